"""Child processes that never outlive llmdiag, and SIGTERM / SIGHUP handled like Ctrl-C.

- :func:`die_with_parent`: a ``preexec_fn`` asking the kernel to SIGKILL the child when its
  parent dies (``PR_SET_PDEATHSIG``, Linux), so even a SIGKILLed llmdiag leaves no bench rank,
  trainer worker, ssh agent or probe subprocess behind. Note the kernel's rule: the signal
  comes when the *thread* that started the child ends, so start children from a thread that
  waits for them (the main thread, or the worker thread of a bounded call).
- :class:`ChildGroup`: children started in one new process group, stopped together
  (SIGTERM, a grace period, SIGKILL) and reaped.
- :func:`install_signal_handlers`: SIGTERM and SIGHUP raise :class:`Terminated`, a
  ``KeyboardInterrupt``, so every cleanup path written for Ctrl-C (``finally`` blocks, pool
  termination, child killing) runs for them too; exit code ``128 + signal number``.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

PR_SET_PDEATHSIG = 1
_libc: Any = None


def _prctl() -> Callable[..., int] | None:
    global _libc
    if not sys.platform.startswith("linux"):
        return None
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        except OSError:
            _libc = False
    return _libc.prctl if _libc else None


def set_pdeathsig(sig: int = signal.SIGKILL, parent: int | None = None) -> None:
    """In the calling (child) process: get ``sig`` when the parent dies; exit at once if the
    parent (``parent``, when given) is already gone."""
    prctl = _prctl()
    if prctl is not None:
        prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def die_with_parent(new_group: bool = False, join: int | None = None) -> Callable[[], None]:
    """A ``preexec_fn``: PR_SET_PDEATHSIG(SIGKILL); with ``new_group`` the child leads a new
    process group, with ``join`` it joins that group."""
    _prctl()  # load libc here, not in the forked child
    parent = os.getpid()

    def pre() -> None:
        if new_group:
            os.setpgid(0, 0)
        elif join is not None:
            with contextlib.suppress(OSError):
                os.setpgid(0, join)
        set_pdeathsig(signal.SIGKILL, parent)

    return pre


_live: set[ChildGroup] = set()


class ChildGroup:
    """Processes started in one new process group; :meth:`stop` ends and reaps them all.
    A group with children is listed until stopped: :func:`stop_all` ends every one (the CLI
    calls it when interrupted, for children started by threads it cannot unwind)."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []
        self.pgid: int | None = None

    def popen(self, argv: Sequence[str], **kw: Any) -> subprocess.Popen:
        pre = die_with_parent(new_group=self.pgid is None, join=self.pgid)
        proc = subprocess.Popen(list(argv), preexec_fn=pre, **kw)  # noqa: PLW1509 - async-signal-safe enough
        if self.pgid is None:
            self.pgid = proc.pid
        self.procs.append(proc)
        _live.add(self)
        return proc

    def running(self) -> bool:
        return any(p.poll() is None for p in self.procs)

    def signal(self, sig: int) -> None:
        """``sig`` to the group, while a member is unreaped: only then can its id not have
        been reused by an unrelated group."""
        if self.pgid is not None and any(p.returncode is None for p in self.procs):
            with contextlib.suppress(OSError):
                os.killpg(self.pgid, sig)

    def stop(self, grace_s: float = 3.0) -> None:
        """SIGTERM to the group, SIGKILL after ``grace_s``, then reap every child."""
        if self.pgid is None:
            return
        if self.running():
            self.signal(signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while self.running() and time.monotonic() < deadline:
                time.sleep(0.02)
        self.signal(signal.SIGKILL)  # also any grandchild left in the group
        for p in self.procs:
            if p.returncode is None:
                with contextlib.suppress(OSError):
                    p.kill()
            p.wait()
        _live.discard(self)

    def __enter__(self) -> ChildGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stop_all(grace_s: float = 2.0) -> None:
    """Stop and reap the children of every live :class:`ChildGroup`."""
    for group in list(_live):
        group.stop(grace_s)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: unwound like Ctrl-C, exit code ``128 + signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


#: signals handled like SIGINT (SIGINT itself stays Python's KeyboardInterrupt): SIGTERM (scancel,
#: systemd, Kubernetes), SIGHUP (terminal or ssh gone), and those whose default would kill llmdiag
#: without cleaning up: SIGUSR1/2 (Slurm's --signal warning), SIGXCPU (the CPU time limit)
HANDLED = (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGXCPU)
_received: list[int] = []


def _raise(signum: int, frame: object) -> None:
    if _received:  # a second signal while unwinding: let the cleanup finish
        return
    _received.append(signum)
    raise Terminated(signum)


def inherited_ignore(sig: int) -> bool:
    """Whether ``sig`` was ignored when llmdiag started: ``nohup`` ignores SIGHUP, a shell's
    background job SIGINT and SIGQUIT. That is the caller's choice, and llmdiag keeps it."""
    try:
        return signal.getsignal(sig) == signal.SIG_IGN
    except (ValueError, OSError):
        return False


def install_signal_handlers() -> None:
    """In the main thread of the llmdiag process: SIGTERM / SIGHUP raise :class:`Terminated`
    (a signal the caller ignored, as ``nohup`` does SIGHUP, stays ignored)."""
    for s in HANDLED:
        if inherited_ignore(s):
            continue
        with contextlib.suppress(ValueError, OSError):  # not the main thread
            signal.signal(s, _raise)


def exit_code(exc: BaseException) -> int:
    """128 + the signal number an interruption came from (130 for Ctrl-C)."""
    return 128 + int(getattr(exc, "signum", signal.SIGINT))


def child_defaults() -> None:
    """In a forked worker (a multiprocessing pool): default SIGTERM/SIGHUP (the parent's
    ``terminate()`` ends it quietly), SIGINT ignored (the parent handles Ctrl-C), and death
    with the parent."""
    for s in HANDLED:
        signal.signal(s, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    set_pdeathsig(signal.SIGKILL)


LOCK_NAME = ".lock"


def _lock_dir(path: str) -> int | None:
    """Hold an exclusive flock on ``path/.lock`` for this process's life (forked workers share it).

    The lock is taken on a temporary name and then renamed into place, so a sweeper never sees
    an unlocked ``.lock`` of a live directory. flock is the kernel's, not a pid: it works across
    pid namespaces sharing a /tmp, and a SIGKILL releases it."""
    import fcntl

    tmp = os.path.join(path, f".lock-{os.getpid()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.rename(tmp, os.path.join(path, LOCK_NAME))
    except OSError:
        os.close(fd)
        return None
    return fd


def sweep_stale_tempdirs(root: str) -> list[str]:
    """Remove ``root/llmdiag-*`` private directories of runs that died without cleaning up
    (SIGKILL, OOM killer, power loss): a directory counts as stale only when it is a real
    directory (not a symlink) owned by this user and its ``.lock`` can be locked, i.e. no process
    holds it. Directories without a lock (other versions, anything else) are left alone."""
    import fcntl
    import shutil
    import stat as st

    removed: list[str] = []
    try:
        names = [n for n in os.listdir(root) if n.startswith("llmdiag-")]
    except OSError:
        return removed
    for name in names:
        d = os.path.join(root, name)
        try:
            info = os.lstat(d)
            if not st.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
                continue
            fd = os.open(os.path.join(d, LOCK_NAME), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # a live run holds it
        else:
            shutil.rmtree(d, ignore_errors=True)
            if not os.path.lexists(d):
                removed.append(d)
        finally:
            os.close(fd)
    return removed


#: the temp directory the system and the user chose (``$TMPDIR``, else ``/tmp``), kept while
#: :func:`private_tempdir` points :mod:`tempfile` at llmdiag's own directory inside it
_system_tempdir: str | None = None


def system_tempdir() -> str:
    """Where the job's temporary files go: the system's temp directory, never llmdiag's private
    one inside it (whose random name would change a check's identity every run)."""
    import tempfile

    return _system_tempdir or tempfile.gettempdir()


def remove_private_tempdir() -> None:
    """Remove this run's private temp directory now, for an exit that runs no ``finally``
    (``os._exit`` from a watchdog thread while the main thread is stuck in native code)."""
    import shutil
    import tempfile

    if _system_tempdir is not None and tempfile.tempdir:
        shutil.rmtree(tempfile.tempdir, ignore_errors=True)


@contextlib.contextmanager
def private_tempdir():
    """Every temporary file of this process (and of its forked workers) in one private
    directory under the system's, removed when the command ends, however it ends. SIGKILL
    cannot be handled: the directory is locked while its run lives, and the next run removes
    the directories of dead runs (:func:`sweep_stale_tempdirs`)."""
    import shutil
    import tempfile

    owner = os.getpid()
    previous = tempfile.tempdir
    try:
        root = tempfile.gettempdir()
        path = tempfile.mkdtemp(prefix="llmdiag-")
    except OSError:  # no writable temp directory: the commands say so where they need one
        yield None
        return
    global _system_tempdir
    lock = _lock_dir(path)
    sweep_stale_tempdirs(root)
    tempfile.tempdir, _system_tempdir = path, root
    try:
        yield path
    finally:
        if os.getpid() == owner:
            tempfile.tempdir, _system_tempdir = previous, None
            if lock is not None:
                os.close(lock)
            shutil.rmtree(path, ignore_errors=True)
