"""What a progress line is: the one rule both the line-by-line and the bulk path apply.

The per-line path (:class:`~llmdiag.logs.analyzer.LogAnalyzer`) calls :func:`progress_of` and
:func:`timestamp_of` for every candidate line; the bulk path (:mod:`llmdiag.logs.bulk`) learns
a template from a line only if :func:`read_line` makes the same record of it, and checks its
probe lines against :func:`read_line` again, so a template can never read a line differently.
"""

from __future__ import annotations

from llmdiag.logs import prefixes, signatures
from llmdiag.logs.formats import parse_progress
from llmdiag.logs.unwrap import needs_continuation


def may_be_progress(msg: str) -> bool:
    """Cheap gate before the format parsers: every progress format prints a loss or an iteration."""
    return "oss" in msg or "iteration" in msg or "OSS" in msg


def progress_of(msg: str) -> dict | None:
    """The progress record of a message (prefix already split off), or None."""
    return parse_progress(msg) if may_be_progress(msg) else None


def timestamp_of(pre: prefixes.Prefix) -> float | None:
    """The line's time: from its prefix, else the first timestamp in the message."""
    return pre.ts if pre.ts is not None else prefixes.find_timestamp(pre.message)


def read_line(text: str, file_rank: int | None):
    """``(record, rank, ts)`` of one raw line read on its own, or None when the line is not
    a plain progress line (it starts a wrapped watchdog message or carries a failure signature)."""
    pre = prefixes.split_prefix(text.rstrip("\r\n"))
    rank = pre.rank if pre.rank is not None else file_rank
    msg = pre.message
    if "WorkNCCL(" in msg and needs_continuation(msg):
        return None
    if signatures.match_line(msg):
        return None
    return progress_of(msg), rank, timestamp_of(pre)
