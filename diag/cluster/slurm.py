"""Slurm health checks: drain a node that fails preflight, with the finding as the reason.

Run from a Prolog, Epilog or ``HealthCheckProgram`` (NHC style): ``llmdiag preflight
--slurm-drain ...`` checks the node and, when a check failed, runs

    scontrol update nodename=NODE state=drain reason="llmdiag: <probe>/<check>: <summary>"

so ``sinfo -R`` says why the node left service. The node is ``SLURMD_NODENAME`` (set for
prologs and job steps), else the short host name. The reason is one line, at most
:data:`REASON_MAX` characters; several failures are counted ("and 2 more").
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterable, Mapping

from llmdiag.result import Result, Status

REASON_MAX = 200


def node_name(env: Mapping[str, str]) -> str:
    return env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def drain_reason(results: Iterable[Result], strict: bool = False) -> str | None:
    """``llmdiag: probe/check: summary`` of the first failure (warnings too with ``strict``); None if none."""
    bad = [r for r in results if r.status is Status.FAIL or (strict and r.status is Status.WARN)]
    if not bad:
        return None
    first = bad[0]
    more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
    text = " ".join(f"llmdiag: {first.probe}/{first.check}: {first.summary}".split())
    room = REASON_MAX - len(more)
    if len(text) > room:
        text = text[:room - 3].rstrip() + "..."
    return text + more


def drain_argv(node: str, reason: str) -> list[str]:
    return ["scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}"]


def drain(node: str, reason: str, env: Mapping[str, str] | None = None, timeout: float = 30.0) -> tuple[bool, str]:
    """Run ``scontrol update ... state=drain``; (done, what happened)."""
    if shutil.which("scontrol", path=(env or os.environ).get("PATH")) is None:
        return False, "scontrol not found on PATH: the node was not drained"
    argv = drain_argv(node, reason)
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=dict(env or os.environ))
    except subprocess.TimeoutExpired:
        return False, f"scontrol did not answer within {timeout:g} s (slurmctld down?): the node was not drained"
    except OSError as exc:
        return False, f"cannot run scontrol: {exc}"
    if p.returncode != 0:
        why = (p.stderr or p.stdout).strip().splitlines()[-1:] or [f"exit code {p.returncode}"]
        return False, f"scontrol failed: {why[0]}"
    return True, f"drained {node}: {reason}"
