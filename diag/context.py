"""What a probe may touch: everything from the outside world comes in through :class:`Context`.

Probes never read ``os.environ``, never spawn processes with ``subprocess`` directly and never
look at the wall clock on their own: they use ``ctx.env``, ``ctx.run`` and ``ctx.deadline``.
Tests build a Context with real inputs (a real environment dict, a real sysfs-like tree, a
recorded NVML adapter) and drive probes with it.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from llmdiag.launcher import LauncherInfo, parse_launcher
from llmdiag.util.procs import ChildGroup


@dataclasses.dataclass(frozen=True)
class CommandResult:
    """What a command did. ``error`` is set when it could not run at all (not found, ...)."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    error: str | None = None
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and not self.timed_out and self.returncode == 0


class CommandRunner:
    """Runs external commands with a timeout, never through a shell.

    A missing executable or a timeout is returned as data (``error`` / ``timed_out``),
    never raised: the diagnostic must not break because the thing it diagnoses is broken.
    """

    def __init__(self, env: Mapping[str, str] | None = None):
        self._env = dict(env) if env is not None else None

    def which(self, name: str) -> str | None:
        path = (self._env or os.environ).get("PATH")
        return shutil.which(name, path=path)

    def run(self, argv: Sequence[str], timeout: float = 10.0, input: str | None = None) -> CommandResult:
        argv = tuple(str(a) for a in argv)
        start = time.monotonic()
        # its own process group, killed with llmdiag (even SIGKILLed) and by an interruption
        group = ChildGroup()
        try:
            proc = group.popen(argv, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                               env=self._env)
            try:
                out, err = proc.communicate(input, timeout=timeout)
            except subprocess.TimeoutExpired:
                group.stop(grace_s=0.0)
                out, err = proc.communicate()
                return CommandResult(argv, None, _text(out), _text(err), timed_out=True,
                                     error=f"timed out after {timeout:g} s", duration_s=time.monotonic() - start)
        except (OSError, ValueError) as exc:
            return CommandResult(argv, None, error=f"{type(exc).__name__}: {exc}", duration_s=time.monotonic() - start)
        finally:
            group.stop()
        return CommandResult(argv, proc.returncode, out, err, duration_s=time.monotonic() - start)


def node_name(env: Mapping[str, str]) -> str:
    """This node's name in reports and metrics: ``$LLMDIAG_NODE_NAME``, else the host name."""
    return env.get("LLMDIAG_NODE_NAME") or socket.gethostname() or "localhost"


def _text(b: bytes | str | None) -> str:
    if b is None:
        return ""
    if isinstance(b, bytes):
        return b.decode(errors="replace")
    return b


class Deadline:
    """A point in (monotonic) time after which work should stop."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic):
        self.seconds = float(seconds)
        self._clock = clock
        self.expires_at = clock() + self.seconds

    def remaining(self) -> float:
        return max(0.0, self.expires_at - self._clock())

    @property
    def expired(self) -> bool:
        return self.remaining() <= 0.0

    def bound(self, timeout: float) -> float:
        """``timeout`` cut down to what is left (at least a few milliseconds)."""
        return max(0.01, min(timeout, self.remaining()))


class Cleanup:
    """Temporary files and directories a probe created; removed at the end, also on Ctrl-C.

    Probes run in worker threads that are abandoned when they overrun, so they cannot be
    trusted to reach their own ``finally``: the runner (and the CLI's interrupt handler)
    call :meth:`run` on the main thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._paths: list[Path] = []
        self._callbacks: list[Callable[[], None]] = []

    def track(self, path: str | os.PathLike[str]) -> Path:
        p = Path(path)
        with self._lock:
            self._paths.append(p)
        return p

    def untrack(self, path: str | os.PathLike[str]) -> None:
        with self._lock:
            self._paths = [p for p in self._paths if p != Path(path)]

    def add(self, fn: Callable[[], None]) -> None:
        with self._lock:
            self._callbacks.append(fn)

    def run(self) -> list[str]:
        """Remove everything tracked; returns error messages (never raises)."""
        errors: list[str] = []
        with self._lock:
            paths, self._paths = self._paths, []
            callbacks, self._callbacks = self._callbacks, []
        for p in reversed(paths):
            try:
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                elif p.exists() or p.is_symlink():
                    p.unlink()
            except OSError as exc:
                errors.append(f"could not remove {p}: {exc}")
        for fn in reversed(callbacks):
            try:
                fn()
            except Exception as exc:  # noqa: BLE001 - cleanup must go on
                errors.append(f"cleanup failed: {exc}")
        return errors


@dataclasses.dataclass
class Context:
    """Everything a probe gets. Build one with :meth:`create` (real world) or directly in tests.

    - ``env``: environment variables (a plain dict; never ``os.environ`` itself).
    - ``config``: the validated :class:`llmdiag.config.Config`.
    - ``launcher``: parsed launcher variables (:mod:`llmdiag.launcher`).
    - ``node``: this node's name in reports (hostname by default).
    - ``runner``: runs external commands with timeouts.
    - ``deadline``: the deadline of the probe currently running (the runner sets it).
    - ``root``: prefix for ``/proc`` and ``/sys`` reads, so tests can feed a recorded tree.
    - ``nvml``: factory for the NVML adapter (see :mod:`llmdiag.nvml`); ``None`` means the real one.
    - ``cleanup``: where probes register temporary paths they create.
    - ``services``: named extras other subsystems inject (a process group, a store, ...).
    """

    env: dict[str, str]
    config: Any
    launcher: LauncherInfo
    node: str
    runner: CommandRunner
    deadline: Deadline = dataclasses.field(default_factory=lambda: Deadline(30.0))
    root: Path = Path("/")
    nvml: Callable[[], Any] | None = None
    cleanup: Cleanup = dataclasses.field(default_factory=Cleanup)
    services: dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def create(
        cls,
        config: Any = None,
        env: Mapping[str, str] | None = None,
        node: str | None = None,
        **kwargs: Any,
    ) -> Context:
        if config is None:
            from llmdiag.config import Config

            config = Config.default()
        env = dict(os.environ if env is None else env)
        return cls(
            env=env,
            config=config,
            launcher=parse_launcher(env),
            node=node or node_name(env),
            runner=kwargs.pop("runner", None) or CommandRunner(env),
            **kwargs,
        )

    def path(self, absolute: str) -> Path:
        """``/sys/...`` or ``/proc/...`` under :attr:`root`."""
        return self.root / absolute.lstrip("/")

    def run(self, argv: Sequence[str], timeout: float = 10.0, input: str | None = None) -> CommandResult:
        """Run a command, its timeout bounded by the probe's deadline."""
        return self.runner.run(argv, timeout=self.deadline.bound(timeout), input=input)

    def with_deadline(self, seconds: float) -> Context:
        return dataclasses.replace(self, deadline=Deadline(seconds))
