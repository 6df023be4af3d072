"""A run as it happens: the world once the ranks have met, what is being measured now, and
each row as soon as it is measured.

Rank 0 sends records (plain dicts, one of ``{"world": ...}``, ``{"measuring": ...}``,
``{"row": ...}``) to an ``emit`` callable. In a launched rank that is :meth:`Progress.record`
in the same process; a standalone run's worker writes them as JSON lines to a file that the
parent reads back while it waits (:class:`LineFile`). Either way the command holds a
:class:`Progress`, so the rows measured so far survive Ctrl-C, a timeout or a dead rank, and
make the partial report (:meth:`Progress.result`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llmdiag.ncclbench.config import BenchSpec

Emit = Callable[[dict[str, Any]], None]


def planned_rows(spec: BenchSpec, n: int) -> int:
    """How many rows the sweep of ``spec`` on ``n`` ranks measures (as :func:`runner.sweep` does)."""
    from llmdiag.ncclbench.collectives import COLLECTIVES
    from llmdiag.ncclbench.pattern import element_size

    total = 0
    for name in spec.collectives:
        coll = COLLECTIVES[name]
        if n >= coll.min_ranks:
            total += len({c for c in (coll.count_for(s, element_size(spec.dtype), n) for s in spec.sizes) if c > 0})
    return total


def describe(measuring: dict[str, Any] | None) -> str | None:
    """``all_reduce 16 MiB (row 12 of 15)``, ``pairwise send/recv``, or None."""
    if not measuring:
        return None
    from llmdiag.ncclbench.sizes import format_size

    if measuring.get("what") == "pairwise":
        return "the pairwise send/recv between nodes"
    text = f"{measuring['collective']} {format_size(measuring['size'])}B"
    if measuring.get("index") is not None and measuring.get("planned"):
        text += f" (row {measuring['index'] + 1} of {measuring['planned']})"
    return text


class Progress:
    """What rank 0 has reported so far; ``listener`` sees every record as it arrives."""

    def __init__(self, spec: BenchSpec, listener: Emit | None = None) -> None:
        self.spec = spec
        self.listener = listener
        self.world: dict[str, Any] | None = None
        self.rows: list[dict[str, Any]] = []
        self.measuring: dict[str, Any] | None = None
        self.started = time.monotonic()

    def record(self, rec: dict[str, Any]) -> None:
        if "world" in rec:
            self.world = dict(rec["world"])
        elif "measuring" in rec:
            self.measuring = dict(rec["measuring"])
        elif "row" in rec:
            self.rows.append(rec["row"])
            self.measuring = None
        if self.listener is not None:
            self.listener(rec)

    def result(self, *, world_size: int, backend: str) -> dict[str, Any]:
        """The run's result dict (as :func:`launch.run_on_group` returns it) of what was measured;
        ``world_size`` and ``backend`` stand in when the ranks never met."""
        world = self.world or {"world_size": world_size, "backend": backend, "hosts": [], "nodes": None}
        return {
            **{k: world.get(k) for k in ("world_size", "backend", "device", "torch_version", "nccl_version",
                                         "hosts", "nodes")},
            "spec": self.spec.to_dict(),
            "rows": list(self.rows),
            "pairwise": None,
            "duration_s": time.monotonic() - self.started,
        }

    def stop(self, reason: str, detail: str) -> dict[str, Any]:
        """The ``stopped`` entry of a partial document: why, and what was still running."""
        planned = (self.world or {}).get("planned_rows") or (self.measuring or {}).get("planned")
        return {"reason": reason, "detail": detail, "measuring": describe(self.measuring),
                "rows_measured": len(self.rows), "rows_planned": planned}


class LineFile:
    """Records as JSON lines in a file: a worker appends (:meth:`emit`), the parent reads what
    is new (:meth:`poll`); a line not yet ended is left for the next poll."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.partial = b""

    def emit(self, rec: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(rec) + "\n")

    def poll(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        *lines, self.partial = (self.partial + data).split(b"\n")
        return [json.loads(ln) for ln in lines if ln.strip()]
