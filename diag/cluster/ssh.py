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


#: Lines ssh prints at LogLevel=VERBOSE that are not the agent's and not a complaint.
_VERBOSE_NOISE = ("Authenticated to ", "Transferred: sent", "Bytes per second")
#: How many ssh connections may be in their handshake at once (sshd's MaxStartups 10:30:100
#: starts dropping unauthenticated connections beyond 10; a bastion shares that limit).
DEFAULT_WINDOW = 64


def ssh_argv(target: str, remote: Sequence[str], *, connect_timeout: int, config: str | None = None) -> list[str]:
    # LogLevel=VERBOSE makes ssh say "Authenticated to ..." on stderr: the end of the handshake,
    # when the next host's connection may start (the lines are filtered from what is kept)
    argv = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={int(connect_timeout)}",
            "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3", "-o", "LogLevel=VERBOSE", "-T", "-n"]
    if config:
        argv += ["-F", config]
    return argv + ["--", target, " ".join(shlex.quote(str(a)) for a in remote)]


def fan_out(entries: Sequence[HostEntry], remote_for_rank, *, connect_timeout: int, config: str | None,
            timeout_s: float, log=lambda s: None, window: int = DEFAULT_WINDOW) -> list[Launch]:
    """Start every host's agent, at most ``window`` ssh handshakes at a time; wait at most
    ``timeout_s`` in all; kill what is left.

    The agents themselves must all run at once (they meet at the rendezvous), so only the
    handshake is windowed: a slot frees when ssh has authenticated, exited, or its connect
    timeout has passed.
    """
    launches = [Launch(e, r, ssh_argv(e.target, remote_for_rank(r), connect_timeout=connect_timeout, config=config))
                for r, e in enumerate(entries)]
    threads = []
    start = time.monotonic()
    slots = threading.Semaphore(max(1, int(window)))
    state = {"peak": 0, "open": 0}
    lock = threading.Lock()

    def run(launch: Launch) -> None:
        slots.acquire()
        with lock:
            state["open"] += 1
            state["peak"] = max(state["peak"], state["open"])
        released = threading.Event()

        def release() -> None:
            if not released.is_set():
                released.set()
                with lock:
                    state["open"] -= 1
                slots.release()

        t0 = time.monotonic()
        try:
            launch.proc = subprocess.Popen(launch.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, text=True, errors="replace",
                                           start_new_session=True, preexec_fn=die_with_parent())
        except OSError as exc:
            launch.error = f"cannot run ssh: {exc}"
            release()
            return
        out: list[str] = []
        err: list[str] = []

        def read_err() -> None:
            for line in launch.proc.stderr:
                if line.startswith("Authenticated to "):
                    release()
                if not line.startswith(_VERBOSE_NOISE):
                    err.append(line)

        def read_out() -> None:
            out.append(launch.proc.stdout.read())

        readers = [threading.Thread(target=fn, daemon=True) for fn in (read_err, read_out)]
        for t in readers:
            t.start()
        left = max(1.0, timeout_s - (t0 - start))
        try:
            launch.proc.wait(timeout=min(left, connect_timeout + 5.0))
        except subprocess.TimeoutExpired:
            pass
        release()  # authenticated, exited, or past its connect timeout: the next host may start
        try:
            launch.proc.wait(timeout=max(0.1, left - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            launch.proc.kill()
            launch.proc.wait()
            launch.error = f"the agent on {launch.entry.host} did not finish within {timeout_s:.0f} s (killed)"
        for t in readers:
            t.join(5)
        launch.stdout, launch.stderr = "".join(out), "".join(err)
        if launch.returncode is None and launch.error is None:
            launch.returncode = launch.proc.returncode
        launch.elapsed_s = time.monotonic() - t0
        if launch.ssh_failed:
            log(f"ssh {launch.entry.target}: {launch.reason()}")

    for launch in launches:
        t = threading.Thread(target=run, args=(launch,), name=f"ssh-{launch.rank}", daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    fan_out.peak = state["peak"]  # type: ignore[attr-defined]  (how many handshakes overlapped)
    return launches
