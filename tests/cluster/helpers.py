"""Run ``llmdiag preflight`` agents on namespace hosts and read rank 0's report."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import cli_env

PORT = 29500
CONFIG = """
[network]
port_range = "29500-29503"
connect_timeout_s = 1.0

[cluster]
share_wait_s = 2.0
"""


def write_config(tmp: Path, extra: str = "") -> Path:
    p = tmp / "llmdiag.toml"
    p.write_text(CONFIG + extra)
    return p


def agent_argv(tb, k: int, n: int, config: Path, *args: str, timeout: float | None = 20,
               probes=("software",)) -> list[str]:
    """``timeout=None``: no --timeout (cluster.timeout_s and each probe's own deadline apply)."""
    flags = ["--timeout", f"{timeout:g}"] if timeout is not None else []
    for p in probes:
        flags += ["--probe", p]
    return [sys.executable, "-m", "llmdiag", "preflight", "-c", str(config), "--nnodes", str(n), "--node-rank", str(k),
            "--master-addr", tb.addr(0), "--master-port", str(PORT), *flags, "-f", "json", *args]


class Run:
    """Agents started on hosts ``ranks`` of ``tb``; ``finish()`` waits and parses outputs."""

    def __init__(self, tb, n: int, config: Path, *args: str, ranks=None, env=None, binds=None, timeout: float = 20,
                 probes=("software",), probe_timeout: bool = True):
        self.tb, self.timeout = tb, timeout
        self.start = time.monotonic()
        self.procs = {}
        for k in (range(n) if ranks is None else ranks):
            e = cli_env(**{"GLOO_SOCKET_IFNAME": "eth0", **((env or {}).get(k, {}))})
            self.procs[k] = tb.popen(k, agent_argv(tb, k, n, config, *args, timeout=timeout if probe_timeout else None,
                                                            probes=probes), env=e,
                                     binds=(binds or {}).get(k), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.out: dict[int, tuple[int, str, str]] = {}
        self.ended: dict[int, float] = {}
        self.wall_s = None

    def wait_stderr(self, k: int, text: str, timeout: float) -> bool:
        """Read host ``k``'s stderr until ``text`` shows up (the pipe stays readable later)."""
        end = time.monotonic() + timeout
        seen = ""
        p = self.procs[k]
        while time.monotonic() < end:
            line = p.stderr.readline()
            if not line:
                return False
            seen += line
            if text in line:
                self.__dict__.setdefault("early_stderr", {})[k] = seen
                return True
        return False

    def finish(self, limit: float | None = None) -> dict:
        limit = limit or self.timeout + 15
        for k, p in self.procs.items():
            try:
                o, e = p.communicate(timeout=max(1, limit - (time.monotonic() - self.start)))
            except subprocess.TimeoutExpired:
                self.tb.kill(p)
                o, e = p.communicate()
            self.out[k] = (p.returncode, o, e)
            self.ended[k] = time.monotonic() - self.start  # at most this long after the start
        self.wall_s = time.monotonic() - self.start
        return self.doc(0)

    def doc(self, k: int) -> dict:
        rc, o, e = self.out[k]
        try:
            return json.loads(o)
        except json.JSONDecodeError:
            raise AssertionError(f"host {k} printed no JSON (rc={rc}); stderr:\n{e[-3000:]}") from None


def cluster_results(doc: dict, check: str | None = None) -> list[dict]:
    return [r for r in doc["results"] if r["probe"] == "cluster" and (check is None or r["check"].startswith(check))]


def failing(doc: dict) -> list[tuple[str, str, str]]:
    return [(r["node"], r["check"], r["runbook"]) for r in doc["results"] if r["status"] == "fail"]
