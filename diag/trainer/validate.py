"""What ``llmdiag train`` checks before any worker starts: the files it will read and write.

A missing or binary ``--data`` file, a ``--checkpoint-dir`` that is a file, or a ``--log-file``
in a directory that does not exist would otherwise surface as a traceback from every worker,
or (the checkpoint directory) only at the first save, after the steps before it were wasted.
"""

from __future__ import annotations

import os
from pathlib import Path


def _creatable_dir(path: Path) -> str | None:
    """None when ``path`` is a writable directory or can be created as one."""
    if path.exists():
        if not path.is_dir():
            return "exists and is not a directory"
        return None if os.access(path, os.W_OK | os.X_OK) else "is not writable"
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"cannot be created: {str(parent)!r} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot be created: {str(parent)!r} is not writable"
    return None


def _writable_file(path: Path) -> str | None:
    if path.is_dir():
        return "is a directory"
    if path.exists():
        return None if os.access(path, os.W_OK) else "is not writable"
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        return f"directory {str(parent)!r} does not exist"
    return None if os.access(parent, os.W_OK | os.X_OK) else f"directory {str(parent)!r} is not writable"


def check_args(args) -> str | None:
    """The first problem with the paths of ``args`` (the trainer's parsed flags), or None."""
    try:
        return _check_args(args)
    except OSError as exc:  # a name too long, a loop of links: whatever the file system says
        return f"{exc.filename or 'a path'}: {exc.strerror or exc}"


def _check_args(args) -> str | None:
    from llmdiag.trainer.data import DataError, read_header

    if args.data not in (None, "", "synthetic"):
        p = Path(args.data)
        if not p.exists():
            return f"--data {args.data!r}: no such file (give a token file from `llmdiag prepare-data`, or 'synthetic')"
        if p.is_dir():
            return f"--data {args.data!r} is a directory; give a token file from `llmdiag prepare-data`"
        try:
            header = read_header(p)
        except DataError as exc:
            return f"--data {exc} (make one with `llmdiag prepare-data TEXT OUT`)"
        except OSError as exc:
            return f"--data {args.data!r}: cannot read: {exc.strerror or exc}"
        if header.count < args.seq_len + 1:
            return f"--data {args.data!r}: {header.count} tokens, fewer than one sequence of {args.seq_len + 1}"
    if args.checkpoint_dir:
        why = _creatable_dir(Path(args.checkpoint_dir))
        if why:
            return f"--checkpoint-dir {args.checkpoint_dir!r} {why}"
    for flag, value in (("--log-file", args.log_file), ("--summary-file", args.summary_file)):
        if value:
            why = _writable_file(Path(value))
            if why:
                return f"{flag} {value!r}: {why}" if why.startswith("directory") else f"{flag} {value!r} {why}"
    return None
