"""Renderer lookup and output writing (see the package docstring for the conventions)."""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from diag.errors import UsageError
from diag.redact import redact_doc

#: Formats every command accepts with ``--format``.
FORMATS: tuple[str, ...] = ("terminal", "json", "markdown", "html", "prometheus", "junit")


@dataclasses.dataclass(frozen=True)
class RenderOptions:
    """How to render: fixed ``width`` and ``color`` make terminal output deterministic."""

    width: int | None = None
    color: bool = False
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)


Renderer = Callable[[Mapping[str, Any], RenderOptions], str]


def _mod(name: str):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            return None
        raise


def find_renderer(kind: str, fmt: str) -> Renderer | None:
    k = kind.replace("-", "_")
    f = fmt.replace("-", "_")
    if f == "json":
        return json_renderer
    for module, attr in ((f"reports.{k}", f), (f"reports.{f}", k), (f"reports.{f}", "generic"), ("reports.generic", f)):
        m = _mod(module)
        fn = getattr(m, attr, None) if m is not None else None
        if callable(fn):
            return fn
    return None


#: a list of at least this many flat objects (a table: step rows, timeline samples) is written
#: one object per line; json's indenting encoder is pure Python and ~10x slower than its C one
_TABLE_MIN_ROWS = 32
_SCALARS = (str, int, float, bool, type(None))


def _is_row(v: Any) -> bool:
    return type(v) is dict and all(type(x) in _SCALARS for x in v.values())


def json_renderer(doc: Mapping[str, Any], opts: RenderOptions) -> str:
    kw = {"ensure_ascii": False, "allow_nan": False, "default": str}
    tables: list[list] = []
    token = os.urandom(8).hex()

    def lift(v: Any) -> Any:
        if isinstance(v, Mapping):
            return {k: lift(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            if len(v) >= _TABLE_MIN_ROWS and all(_is_row(x) for x in v):
                tables.append(list(v))
                return f"\x00table-{token}-{len(tables) - 1}\x00"
            return [lift(x) for x in v]
        return v

    text = json.dumps(lift(doc), indent=2, **kw)
    for i, rows in enumerate(tables):
        mark = json.dumps(f"\x00table-{token}-{i}\x00")
        at = text.index(mark)
        prefix = text[text.rfind("\n", 0, at) + 1:at]  # '  "steps": ' or the spaces of a list item
        indent = " " * (len(prefix) - len(prefix.lstrip(" ")))
        body = ",\n".join(indent + "  " + json.dumps(r, **kw) for r in rows)
        text = text[:at] + "[\n" + body + "\n" + indent + "]" + text[at + len(mark):]
    return text + "\n"


def render(doc: Mapping[str, Any], fmt: str, opts: RenderOptions | None = None) -> str:
    opts = opts or RenderOptions()
    fn = find_renderer(str(doc.get("kind", "generic")), fmt)
    if fn is None:
        raise UsageError(f"--format {fmt} is not available for {doc.get('command', 'this command')}")
    return fn(doc, opts)


def write_atomic(path: Path, text: str) -> None:
    """Write via a temporary file in the same directory and rename: never a half-written file."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def check_output_path(output: str | os.PathLike[str], protect: Iterable[str | os.PathLike[str]] = ()) -> Path:
    """Refuse outputs that would destroy user data: a directory, or one of the inputs."""
    p = Path(output)
    if p.is_dir():
        raise UsageError(f"-o {str(p)!r} is a directory; give a file name")
    if not p.parent.exists() and str(p.parent) not in ("", "."):
        raise UsageError(f"-o {str(p)!r}: directory {str(p.parent)!r} does not exist")
    for q in protect:
        try:
            if p.exists() and Path(q).exists() and p.resolve() == Path(q).resolve():
                raise UsageError(f"-o {str(p)!r} is also an input; refusing to overwrite it")
        except OSError:
            continue
    return p


def emit(
    doc: Mapping[str, Any],
    fmt: str,
    output: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    opts: RenderOptions | None = None,
    protect: Iterable[str | os.PathLike[str]] = (),
    stream=None,
) -> str:
    """Redact, render and write ``doc``; returns the text written."""
    if output is not None and str(output) != "-":
        target = check_output_path(output, protect)
    else:
        target = None
    safe = redact_doc(dict(doc), env if env is not None else os.environ)
    if opts is None:
        stream_ = stream or sys.stdout
        tty = target is None and hasattr(stream_, "isatty") and stream_.isatty()
        opts = RenderOptions(color=tty and fmt == "terminal" and "NO_COLOR" not in os.environ)
    text = render(safe, fmt, opts)
    if target is not None:
        write_atomic(target, text)
    else:
        out = stream or sys.stdout
        out.write(text)
        out.flush()
    return text
