"""Output paths of commands: checked before any work starts."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from llmdiag.errors import UsageError


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
