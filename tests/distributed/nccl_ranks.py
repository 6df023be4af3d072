"""Start `llmdiag nccl-bench` as N separate ranks (the plain-variables launch: MASTER_ADDR,
MASTER_PORT, RANK, WORLD_SIZE), each with its own node name, and slow one of them down for real.

Used by the pairwise and straggler tests here and by the namespace-host test in tests/cluster.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from llmdiag.ncclbench.launch import free_port
from tests.conftest import cli_env, llmdiag_argv

#: Small and quick: a 3-4 rank run with --pairwise ends in seconds even on a busy 2-core machine.
BENCH_ARGS = ("-b", "1K", "-e", "64K", "-f", "4", "-w", "1", "-n", "3")


def write_config(tmp: Path, **values) -> Path:
    lines = ["[nccl_bench]"] + [f"{k} = {json.dumps(v)}" for k, v in values.items()]
    path = tmp / "llmdiag.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def rank_argv(config: Path, out: Path, *args: str, bench_args=BENCH_ARGS) -> list[str]:
    return llmdiag_argv("nccl-bench", "--config", str(config), *bench_args, "--format", "json", "--output",
                        str(out), *args)


def rank_env(k: int, n: int, master_addr: str, port: int, **extra: str) -> dict[str, str]:
    env = cli_env(MASTER_ADDR=master_addr, MASTER_PORT=str(port), RANK=str(k), WORLD_SIZE=str(n), **extra)
    for var in ("LOCAL_RANK", "TORCHELASTIC_RUN_ID", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "NNODES", "NODE_RANK"):
        env.pop(var, None)  # a launcher of the test runner itself must not leak into the ranks
    return env


class DutyCycle:
    """Keep a process stopped ``stopped_ms`` out of every ``stopped_ms + running_ms`` (SIGSTOP/SIGCONT):
    a host starved of CPU, for real, without touching the code under test."""

    def __init__(self, pid: int, stopped_ms: float = 30, running_ms: float = 2):
        self.pid, self.stopped, self.running = pid, stopped_ms / 1e3, running_ms / 1e3
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        try:
            # Real-time priority (root only) keeps the cycle's timing when other jobs load the CPU;
            # without it a late SIGSTOP leaves the process running for whole measurements.
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
        except (OSError, AttributeError):
            pass
        try:
            while not self._stop.is_set():
                os.kill(self.pid, signal.SIGSTOP)
                time.sleep(self.stopped)
                os.kill(self.pid, signal.SIGCONT)
                self._stop.wait(self.running)
        except ProcessLookupError:
            return
        finally:
            try:
                os.kill(self.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    def __enter__(self) -> DutyCycle:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def run_local_ranks(tmp: Path, n: int, config: Path, *args: str, slow: int | None = None,
                    timeout: float = 120, bench_args=BENCH_ARGS,
                    running_ms: float = 2) -> tuple[list[tuple[int, str]], dict]:
    """Run ``n`` ranks on 127.0.0.1 with node names node-0..node-(n-1); rank ``slow`` (if any)
    is duty-cycled from the moment it starts. Returns [(exit code, stderr)] and rank 0's document."""
    port = free_port()
    out = tmp / "doc.json"
    procs = []
    try:
        for k in range(n):
            env = rank_env(k, n, "127.0.0.1", port, GLOO_SOCKET_IFNAME="lo", LLMDIAG_NODE_NAME=f"node-{k}")
            procs.append(subprocess.Popen(rank_argv(config, out if k == 0 else tmp / f"doc{k}.json", *args,
                                                    bench_args=bench_args), env=env,
                                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE, text=True))
        cycle = None
        if slow is not None:
            # Starve it from its first socket (the store connection, right after `import torch`; a starved
            # import only makes the test long): waiting for the full mesh raced the measurement itself,
            # which on an idle machine sometimes ended before the first SIGSTOP.
            wait_sockets(procs[slow].pid, 1, timeout=60)
            cycle = DutyCycle(procs[slow].pid, running_ms=running_ms).__enter__()
        try:
            # Rank 0 is done once the measurements are: stop starving the slow one then, so that
            # it writes its verdict at full speed.
            results = wait_all(procs[:1], timeout)
        finally:
            if cycle:
                cycle.__exit__()
        results += wait_all(procs[1:], 30)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    doc = json.loads(out.read_text()) if out.exists() else None
    return results, doc


def wait_sockets(pid: int, count: int, timeout: float) -> bool:
    """Wait until process ``pid`` holds ``count`` sockets (gloo connects the full mesh at init)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            return False  # the process is gone
        socks = 0
        for fd in fds:
            try:
                socks += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
            except OSError:
                pass  # closed meanwhile
        if socks >= count:
            return True
        time.sleep(0.05)
    return False


def wait_all(procs: list[subprocess.Popen], timeout: float) -> list[tuple[int, str]]:
    end = time.monotonic() + timeout
    results = []
    for p in procs:
        try:
            _, err = p.communicate(timeout=max(1.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
            err += f"\n[test: killed after {timeout:g} s]"
        results.append((p.returncode, err))
    return results
