"""What ended a rank or a collective, in the words an operator acts on.

- A rank process that exits through a signal (``returncode`` -N) is named by the signal, with
  its usual cause: SIGKILL from the kernel's OOM killer is the common one for a benchmark that
  allocates buffers of many times the message size, and leaves no Python traceback.
- A collective that raises tells, by its message, whether a peer went away (gloo's
  ``Connection reset by peer`` / ``Read error`` / ``Connection closed by peer``, NCCL's remote
  errors) or the operation ran past the group's timeout; anything else is a plain failure.
"""

from __future__ import annotations

import re
import signal

#: signal -> the likely cause and where to look
SIGNAL_CAUSES = {
    signal.SIGKILL: "likely the kernel's OOM killer (check `dmesg -T | grep -i -e oom -e 'killed process'`), "
                    "or a kill -9 by a person or the scheduler",
    signal.SIGSEGV: "a crash in native code (torch, gloo/NCCL, the driver); rerun with NCCL_DEBUG=INFO",
    signal.SIGABRT: "an abort in native code (a failed assertion, NCCL's watchdog); its stderr has the reason",
    signal.SIGBUS: "a bus error: /dev/shm too small or full (`df -h /dev/shm`), or a memory hardware error",
    signal.SIGTERM: "stopped by a person, the scheduler (time limit, preemption) or the launcher",
    signal.SIGINT: "interrupted (Ctrl-C)",
}

PEER_LEFT = "peer left"
TIMED_OUT = "timed out"

_PEER_LEFT = re.compile(r"connection reset|connection closed|read error|broken pipe|connection refused|"
                        r"socket closed|remote process exited|peer .*(closed|died|exited)|ncclRemoteError|"
                        r"end of file|\bEOF\b", re.IGNORECASE)
_TIMED_OUT = re.compile(r"timed out|timeout", re.IGNORECASE)


def describe_exit(code: int) -> str:
    """``exited with code 3`` or ``was killed by SIGKILL (signal 9): likely ...``."""
    if code >= 0:
        return f"exited with code {code}"
    try:
        sig = signal.Signals(-code)
    except ValueError:
        return f"was killed by signal {-code}"
    cause = SIGNAL_CAUSES.get(sig)
    return f"was killed by {sig.name} (signal {-code})" + (f": {cause}" if cause else "")


def collective_failure(exc: BaseException) -> str | None:
    """:data:`PEER_LEFT`, :data:`TIMED_OUT`, or None for an error of another kind.

    A peer leaving is tested first: gloo reports a dead peer's socket as a read error even
    while a timeout is pending."""
    text = str(exc)
    if _PEER_LEFT.search(text):
        return PEER_LEFT
    if _TIMED_OUT.search(text):
        return TIMED_OUT
    return None


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The message's first meaningful line, cut: gloo's messages run over many lines."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    text = lines[0] if lines else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
