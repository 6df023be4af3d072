"""Runbooks: one Markdown file per failure id in this package directory (``runbooks/`` in the repository).

A runbook id is the file's stem (``runbooks/nccl-timeout.md`` → ``nccl-timeout``). Each file
starts with a ``# Title`` line and has the sections Symptoms, Likely causes, Checks and Fixes.
"""

from __future__ import annotations

import re
from importlib import resources

_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def _dir():
    return resources.files(__name__)


def ids() -> list[str]:
    return sorted(p.name[:-3] for p in _dir().iterdir() if p.name.endswith(".md") and p.name != "README.md")


def exists(runbook_id: str) -> bool:
    return bool(_ID_RE.match(runbook_id or "")) and _dir().joinpath(f"{runbook_id}.md").is_file()


def text(runbook_id: str) -> str:
    if not exists(runbook_id):
        raise KeyError(runbook_id)
    return _dir().joinpath(f"{runbook_id}.md").read_text(encoding="utf-8")


def title(runbook_id: str) -> str:
    for line in text(runbook_id).splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return runbook_id


def suggest(runbook_id: str) -> list[str]:
    """Known ids close to an unknown one (for "did you mean")."""
    import difflib

    return difflib.get_close_matches(runbook_id, ids(), n=3, cutoff=0.5)
