"""One verdict and one line for a node's results, as health frameworks take them.

Kubernetes node-problem-detector runs a custom plugin and reads its exit code (0 OK, 1 NonOK,
2 or anything else Unknown) and its stdout, cut to ``max_output_length`` bytes (80 by default),
as the condition's message. LBNL NHC's ``check_llmdiag`` (examples/node-health/llmdiag.nhc)
reads the same codes and passes the line to ``die``, which becomes the Slurm drain reason.

A check that failed makes the node NonOK. A check that could not run to its end (the probe
timed out or crashed: runbooks ``probe-timeout`` / ``probe-error``) says nothing about the node:
alone, such results make the verdict Unknown, never NonOK, so a slow node is not drained for
llmdiag's own trouble. Warnings are OK unless ``strict``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence

from llmdiag.result import Result, Status

COULD_NOT_CHECK = frozenset({"probe-timeout", "probe-error"})
NPD_MAX_OUTPUT = 80  # node-problem-detector's default max_output_length


class Verdict(enum.IntEnum):
    """The exit code is the verdict (node-problem-detector's custom-plugin codes)."""

    OK = 0  # nothing failed
    NONOK = 1  # a check failed: the node has a problem
    UNKNOWN = 2  # llmdiag could not tell (bad usage, or checks that could not run)


def judge(results: Iterable[Result], strict: bool = False) -> tuple[Verdict, list[Result]]:
    """The verdict and the results behind it (worst first, in report order)."""
    results = list(results)
    bad = {Status.FAIL, Status.WARN} if strict else {Status.FAIL}
    failed = [r for r in results if r.status in bad and r.runbook not in COULD_NOT_CHECK]
    failed.sort(key=lambda r: -r.status.severity)  # stable: report order within a status
    if failed:
        return Verdict.NONOK, failed
    broken = [r for r in results if r.status is Status.FAIL and r.runbook in COULD_NOT_CHECK]
    if broken:
        return Verdict.UNKNOWN, broken
    return Verdict.OK, []


def fit(text: str, max_bytes: int, suffix: str = "") -> str:
    """``text`` on one line, cut so that it and ``suffix`` take at most ``max_bytes`` UTF-8 bytes
    (node-problem-detector cuts bytes, which could split a character)."""
    text = " ".join(text.split())
    if len((text + suffix).encode()) <= max_bytes:
        return text + suffix
    room = max_bytes - len(suffix.encode()) - 3
    if room < 16:  # no room for both: the finding itself matters more than the count
        suffix, room = "", max_bytes - 3
    return text.encode()[:max(0, room)].decode(errors="ignore").rstrip() + "..." + suffix


def line(verdict: Verdict, behind: Sequence[Result], results: Sequence[Result], node: str, max_bytes: int) -> str:
    """The message: what failed first (and how many more), or a count of what passed."""
    if verdict is Verdict.OK:
        passed = sum(r.status is Status.PASS for r in results)
        warned = sum(r.status is Status.WARN for r in results)
        return fit(f"OK: {node}: {passed} checks passed" + (f", {warned} warning{'s' if warned > 1 else ''}" if warned else ""), max_bytes)
    first = behind[0]
    more = f" (+{len(behind) - 1} more)" if len(behind) > 1 else ""
    head = f"{first.probe}/{first.check}: {first.summary}"
    if verdict is Verdict.UNKNOWN:
        head = f"Unknown: {head}"
    return fit(head, max_bytes, more)


def unknown_line(message: str, max_bytes: int) -> str:
    return fit(f"Unknown: {message}", max_bytes)
