"""Start one agent per hostfile entry over OpenSSH, and judge the ssh step itself.

``ssh -o BatchMode=yes -o ConnectTimeout=N [-F CONFIG] -- TARGET COMMAND``: batch mode
never prompts (a missing key is a finding, not a hang), the user's ``~/.ssh/config`` is
honoured unless ``cluster.ssh_config`` names another file (so ``ProxyJump`` bastions and
per-host users work), and the target was validated by :mod:`llmdiag.cluster.hostfile` and
follows ``--``, so it can never be read as an option. The remote command is one string for
the remote shell (that is how ssh works); every word of it is quoted with ``shlex.quote``.
"""

from __future__ import annotations

import dataclasses
import shlex
import subprocess
import threading
import time
from collections.abc import Sequence

from llmdiag.cluster.hostfile import HostEntry
from llmdiag.util.procs import die_with_parent

SSH_FAILED = 255  # ssh's own exit status for "could not connect / authenticate"


@dataclasses.dataclass
class Launch:
    """One host's agent: its ssh process, what it printed, how it ended."""

    entry: HostEntry
    rank: int
    argv: list[str]
    proc: subprocess.Popen | None = None
    stdout: str = ""
    stderr: str = ""
    returncode: int | None = None
    error: str | None = None
    elapsed_s: float = 0.0

    @property
    def ssh_failed(self) -> bool:
        return self.error is not None or self.returncode == SSH_FAILED

    def reason(self) -> str:
        if self.error:
            return self.error
        lines = [ln.strip() for ln in self.stderr.splitlines() if ln.strip()]
        # ssh's own complaints come last; banner and agent warnings come first
        for ln in reversed(lines):
            if any(k in ln for k in ("Permission denied", "Could not resolve", "timed out", "Connection refused",
                                     "Host key verification", "No route", "Connection closed", "kex_exchange")):
                return ln[:300]
        return (lines[-1] if lines else f"ssh exited with {self.returncode}")[:300]


def ssh_argv(target: str, remote: Sequence[str], *, connect_timeout: int, config: str | None = None) -> list[str]:
    argv = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={int(connect_timeout)}",
            "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3", "-T", "-n"]
    if config:
        argv += ["-F", config]
    return argv + ["--", target, " ".join(shlex.quote(str(a)) for a in remote)]


def fan_out(entries: Sequence[HostEntry], remote_for_rank, *, connect_timeout: int, config: str | None,
            timeout_s: float, log=lambda s: None) -> list[Launch]:
    """Start every host's agent at once; wait at most ``timeout_s``; kill what is left."""
    launches = [Launch(e, r, ssh_argv(e.target, remote_for_rank(r), connect_timeout=connect_timeout, config=config))
                for r, e in enumerate(entries)]
    threads = []
    start = time.monotonic()

    def run(launch: Launch) -> None:
        t0 = time.monotonic()
        try:
            launch.proc = subprocess.Popen(launch.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, text=True, errors="replace",
                                           start_new_session=True, preexec_fn=die_with_parent())
        except OSError as exc:
            launch.error = f"cannot run ssh: {exc}"
            return
        try:
            launch.stdout, launch.stderr = launch.proc.communicate(timeout=max(1.0, timeout_s - (t0 - start)))
            launch.returncode = launch.proc.returncode
        except subprocess.TimeoutExpired:
            launch.proc.kill()
            launch.stdout, launch.stderr = launch.proc.communicate()
            launch.error = f"the agent on {launch.entry.host} did not finish within {timeout_s:.0f} s (killed)"
        launch.elapsed_s = time.monotonic() - t0
        if launch.ssh_failed:
            log(f"ssh {launch.entry.target}: {launch.reason()}")

    for launch in launches:
        t = threading.Thread(target=run, args=(launch,), name=f"ssh-{launch.rank}", daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    return launches
