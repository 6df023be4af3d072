"""When each worker of a launch failed: the launcher's root cause is the earliest failure, not the
earliest exit (a rank that crashes closes its sockets only while it shuts down, and the peer that
then fails on the reset can exit first)."""

from __future__ import annotations

import os
import time

#: where a failing worker notes the moment it failed (``rank_<N>``: the time, then the error)
FAILURE_DIR_ENV = "LLMDIAG_FAILURE_DIR"


def note_failure(rank: int, exc: BaseException) -> None:
    """In a worker: record when it failed, before any cleanup (see the module docstring)."""
    d = os.environ.get(FAILURE_DIR_ENV)
    if not d:
        return
    path = os.path.join(d, f"rank_{rank}")
    try:
        with open(path + ".tmp", "w", encoding="utf-8") as fh:
            fh.write(f"{time.time():.6f}\n{type(exc).__name__}: {str(exc)[:500]}\n")
        os.replace(path + ".tmp", path)
    except OSError:
        pass


def failure_times(d: str) -> dict[int, float]:
    out: dict[int, float] = {}
    for name in os.listdir(d) if os.path.isdir(d) else ():
        if name.startswith("rank_") and name[5:].isdigit():
            try:
                with open(os.path.join(d, name), encoding="utf-8") as fh:
                    out[int(name[5:])] = float(fh.readline())
            except (OSError, ValueError):
                pass
    return out
