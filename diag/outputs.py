"""Output paths of commands: checked before any work starts.

An output is refused (exit 2, one line naming both) when it is the same file as an input of
the command or as another output of it, compared by device and inode after following links,
not by spelling; when it is a directory, a block device or a socket; and when it cannot be
written (missing or read-only directory). Character devices and FIFOs (``/dev/null``,
``/dev/stdout``, a pipe) are written to directly and may be named more than once.
How the files are then written: :mod:`llmdiag.util.files`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from llmdiag.errors import UsageError
from llmdiag.util.files import STREAM, OutputError, check_writable

PathLike = str | os.PathLike[str]


def _identity(path: PathLike) -> tuple | None:
    """What makes two spellings the same file: (dev, ino) of an existing regular file, the
    resolved path of a new one; None for a character device or FIFO (never overwritten)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return ("new", os.path.realpath(path))
    except OSError:
        return None
    import stat

    if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
        return None
    return ("file", st.st_dev, st.st_ino)


def config_input(config_path: PathLike | None, env: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """The config file the command reads, found as :meth:`Config.load` finds it, labelled."""
    from llmdiag.config import CONFIG_ENV, DEFAULT_FILE

    env = os.environ if env is None else env
    if config_path is not None:
        return ("--config", str(config_path))
    if env.get(CONFIG_ENV):
        return (f"${CONFIG_ENV}", env[CONFIG_ENV])
    if os.path.isfile(DEFAULT_FILE):
        return ("config file", DEFAULT_FILE)
    return None


def check_outputs(outputs: Iterable[tuple[str, PathLike | None]],
                  inputs: Iterable[tuple[str, PathLike | None]] = ()) -> dict[str, Path]:
    """Check every ``(option, path)`` output against the others and every ``(label, path)``
    input; returns option -> path. Raises :class:`UsageError` naming both files of a clash."""
    seen: list[tuple[str, str, tuple]] = []
    for label, p in inputs:
        if p is None or str(p) in ("", "-"):
            continue
        ident = _identity(p)
        if ident is not None and ident[0] == "file":
            seen.append((label, str(p), ident))
    checked: dict[str, Path] = {}
    for option, p in outputs:
        if p is None or str(p) == "-":
            continue
        try:
            kind, _ = check_writable(p, option)
        except OutputError as exc:
            raise UsageError(str(exc)) from None
        checked[option] = Path(p)
        ident = None if kind == STREAM else _identity(p)
        if ident is None:
            continue
        for label, q, other in seen:
            if other == ident:
                is_input = not label.startswith("output ")
                what = f"the input {label} {q!r}" if is_input else f"{label[7:]} {q!r}"
                raise UsageError(f"{option} {str(p)!r} is the same file as {what}; refusing to overwrite it")
        seen.append((f"output {option}", str(p), ident))
    return checked


def check_output_path(output: PathLike, protect: Iterable[PathLike] = (), option: str = "-o") -> Path:
    """One output against the inputs ``protect``: the rules of :func:`check_outputs`."""
    return check_outputs([(option, output)], [("file", q) for q in protect])[option]


def write_output(path: PathLike, data: str | bytes, option: str = "-o") -> None:
    """:func:`llmdiag.util.files.write_output`, its failure a usage error (exit 2)."""
    from llmdiag.util.files import write_output as write

    try:
        write(path, data, option)
    except OutputError as exc:
        raise UsageError(str(exc)) from None
