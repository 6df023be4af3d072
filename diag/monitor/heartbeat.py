"""Nodes gone silent: every monitor writes ``DIR/<node>.json`` each sample and reads its peers'.

``DIR`` is a directory every node sees (the shared filesystem a job already uses for
checkpoints). A peer whose last heartbeat is older than the silence threshold has stopped
sampling: the node hangs, lost its network or filesystem, rebooted, or its monitor died.
Heartbeat times are the writers' wall clocks, so clock skew between nodes (checked by
``llmdiag preflight``) shifts the threshold by that much.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from llmdiag.errors import UsageError

_SAFE = re.compile(r"[^A-Za-z0-9._-]")


class Heartbeat:
    def __init__(self, directory: str, node: str, silent_after_s: float) -> None:
        self.dir = Path(directory)
        if not self.dir.is_dir():
            raise UsageError(f"--heartbeat-dir {directory!r} is not a directory")
        self.node = node
        self.silent_after_s = silent_after_s
        self.path = self.dir / f"{_SAFE.sub('_', node)}.json"

    def beat(self, now: float, samples: int) -> str | None:
        """Write this node's heartbeat; an error message when it could not (never raises)."""
        from llmdiag.util.files import write_atomic

        try:
            write_atomic(self.path, json.dumps({"node": self.node, "time": now, "samples": samples}))
        except OSError as exc:
            return f"cannot write heartbeat {self.path}: {exc.strerror or exc}"
        return None

    def peers(self) -> dict[str, float]:
        """Last heartbeat time of every other node (unreadable files are skipped this round)."""
        out: dict[str, float] = {}
        for p in self.dir.glob("*.json"):
            if p == self.path:
                continue
            try:
                doc: Any = json.loads(p.read_text(encoding="utf-8"))
                out[str(doc["node"])] = float(doc["time"])
            except (OSError, ValueError, KeyError, TypeError):
                continue  # being replaced right now, or not ours
        return out

    def silent(self, now: float) -> dict[str, float]:
        """Peers silent for longer than the threshold: node -> seconds since their last beat."""
        return {n: now - t for n, t in self.peers().items() if now - t > self.silent_after_s}
