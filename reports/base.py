"""Renderer lookup and output writing (see the package docstring for the conventions)."""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from llmdiag import documents
from llmdiag.errors import UsageError
from llmdiag.outputs import check_output_path
from llmdiag.redact import redact_doc
from llmdiag.util.files import write_atomic

#: Formats every command accepts with ``--format``.
FORMATS: tuple[str, ...] = ("terminal", "json", "markdown", "html", "prometheus", "junit")


@dataclasses.dataclass(frozen=True)
class RenderOptions:
    """How to render: fixed ``width`` and ``color`` make terminal output deterministic."""

    width: int | None = None
    color: bool = False
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)


#: a renderer takes the typed document (:func:`llmdiag.documents.read`), JSON the plain dict
Renderer = Callable[[Any, RenderOptions], str]


#: Every renderer: (document kind, format) -> "module:function". The one place to look; a kind
#: or format missing here cannot be rendered (an error, never a silent fallback). The contract
#: test imports every entry. JSON is one renderer for every kind.
RENDERERS: dict[tuple[str, str], str] = {
    ("cluster", "terminal"): "llmdiag.reports.cluster:terminal",
    ("cluster", "markdown"): "llmdiag.reports.cluster:markdown",
    ("cluster", "html"): "llmdiag.reports.html:cluster",
    ("cluster", "prometheus"): "llmdiag.reports.prometheus:cluster",
    ("cluster", "junit"): "llmdiag.reports.junit:cluster",
    ("nccl-bench", "terminal"): "llmdiag.reports.nccl_bench:terminal",
    ("nccl-bench", "markdown"): "llmdiag.reports.nccl_bench:markdown",
    ("nccl-bench", "html"): "llmdiag.reports.html:nccl_bench",
    ("nccl-bench", "prometheus"): "llmdiag.reports.prometheus:nccl_bench",
    ("nccl-bench", "junit"): "llmdiag.reports.junit:nccl_bench",
    ("log-analysis", "terminal"): "llmdiag.reports.log_analysis:terminal",
    ("log-analysis", "markdown"): "llmdiag.reports.log_analysis:markdown",
    ("log-analysis", "html"): "llmdiag.reports.html_training:log_analysis",
    ("log-analysis", "prometheus"): "llmdiag.reports.prometheus:log_analysis",
    ("log-analysis", "junit"): "llmdiag.reports.junit:log_analysis",
    ("memory-estimate", "terminal"): "llmdiag.reports.memory_estimate:terminal",
    ("memory-estimate", "markdown"): "llmdiag.reports.memory_estimate:markdown",
    ("memory-estimate", "html"): "llmdiag.reports.html_training:memory_estimate",
    ("memory-estimate", "prometheus"): "llmdiag.reports.prometheus:memory_estimate",
    ("memory-estimate", "junit"): "llmdiag.reports.junit:memory_estimate",
    ("monitor", "terminal"): "llmdiag.reports.monitor:terminal",
    ("monitor", "markdown"): "llmdiag.reports.monitor:markdown",
    ("monitor", "html"): "llmdiag.reports.html_training:monitor",
    ("monitor", "prometheus"): "llmdiag.reports.prometheus:monitor",
    ("monitor", "junit"): "llmdiag.reports.junit:monitor",
    # documents of no specific kind (a plain dict with findings)
    ("generic", "terminal"): "llmdiag.reports.generic:terminal",
    ("generic", "markdown"): "llmdiag.reports.generic:markdown",
    ("generic", "html"): "llmdiag.reports.html:generic",
    ("generic", "prometheus"): "llmdiag.reports.prometheus:generic",
    ("generic", "junit"): "llmdiag.reports.junit:generic",
}
#: the kinds above
KINDS: tuple[str, ...] = tuple(dict.fromkeys(k for k, _ in RENDERERS))


def find_renderer(kind: str, fmt: str) -> Renderer | None:
    """The renderer of ``kind`` in ``fmt``; None if there is none. A listed renderer whose module
    fails to import raises: a broken built-in is an error, not a missing format."""
    if fmt == "json" and kind in KINDS:
        return json_renderer
    spec = RENDERERS.get((kind, fmt))
    if spec is None:
        return None
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


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
    """``doc`` in ``fmt``. JSON writes the dict as it is (checked against its type in tests, where
    documents are read strictly); every other format gets the document read once through its type
    (:func:`llmdiag.documents.read`: strict in tests, for users what can be read), so no renderer
    reads a dict key."""
    opts = opts or RenderOptions()
    kind = str(doc.get("kind", "generic"))
    if kind not in KINDS:
        raise ValueError(f"no renderer for document kind {kind!r} (reports.base.RENDERERS)")
    fn = find_renderer(kind, fmt)
    if fn is None:
        raise UsageError(f"--format {fmt} is not available for {doc.get('command', 'this command')}")
    if fn is json_renderer:
        if os.environ.get(documents.STRICT_ENV) == "1":
            documents.read(doc)  # tests: the JSON written is a document of its type, as the other formats read it
        return fn(doc, opts)
    return fn(documents.read(doc), opts)


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
    if opts is None:
        stream_ = stream or sys.stdout
        tty = output in (None, "-") and hasattr(stream_, "isatty") and stream_.isatty()
        opts = RenderOptions(color=tty and "NO_COLOR" not in os.environ)
    target = None if output is None or str(output) == "-" else output
    return emit_all(doc, [(fmt, target)], env=env, opts=opts, protect=protect, stream=stream)


def emit_all(
    doc: Mapping[str, Any],
    targets: Iterable[tuple[str, str | os.PathLike[str] | None]],
    *,
    env: Mapping[str, str] | None = None,
    opts: RenderOptions | None = None,
    protect: Iterable[str | os.PathLike[str]] = (),
    stream=None,
    stream_extra: Mapping[str, Any] | None = None,
) -> str:
    """Redact ``doc`` once and write it in every ``(format, path)`` of ``targets`` (path None:
    ``stream``, default stdout). Every path is checked before anything is written; colour only
    for a terminal report on the stream, and ``stream_extra`` (what the stream's reader has
    seen already, e.g. rows streamed to the same terminal) only for the stream's report: a
    file gets the whole report. Returns the first text."""
    targets = list(targets)
    protect = list(protect)
    checked = [(fmt, None if p is None else check_output_path(p, protect)) for fmt, p in targets]
    safe = redact_doc(dict(doc), env if env is not None else os.environ)
    opts = opts or RenderOptions()
    texts = []
    for fmt, target in checked:
        color = opts.color and fmt == "terminal" and target is None
        extra = {**opts.extra, **(stream_extra or {})} if target is None else opts.extra
        text = render(safe, fmt, dataclasses.replace(opts, color=color, extra=extra))
        texts.append(text)
        if target is not None:
            write_atomic(target, text)
        else:
            out = stream or sys.stdout
            out.write(text)
            out.flush()
    return texts[0] if texts else ""
