"""A node's death seen within seconds: each node holds one TCP connection to rank 0 for its run.

The heartbeat names a stopped node only after ``stale_s`` (10 s: a loaded node's beat thread
stalls for seconds, and a healthy node called dead is a false alarm), and every stage that
waited on the node paid that wait again. So each node connects to rank 0's presence port
before it joins, says its rank and pid, and says ``bye`` when its run ends. A connection that
ends without ``bye`` is a node that died; rank 0 records it once in the store
(``dead/ranks``), where every node's liveness check reads it.

Two ways a node dies, both seen here:

- its process ends (SIGKILL, the OOM killer, a crash): the kernel closes its socket, a FIN or
  RST that arrives at once;
- its host loses power or its network: nothing arrives at all. Both ends of the connection
  therefore run TCP keepalive with a short idle time, one probe a second and a
  ``TCP_USER_TIMEOUT`` (:class:`Keepalive`, sized from the run's budget): the kernel, not a
  Python thread, answers and sends the probes, so a node busy importing torch is never taken
  for a silent one, and a host that answers no probe for the window is reported gone.

A node's side watches its connection the same way and tells the agent when rank 0 is gone
(its process or its host), so the node stops waiting for a store that will never answer.
"""

from __future__ import annotations

import dataclasses
import errno
import socket
import threading
from collections.abc import Callable

from llmdiag.cluster.service import TcpService

BYE = b"bye\n"
#: Why a presence connection ended without a goodbye (the ``cause`` handed to the callbacks).
PROCESS_ENDED = "process"  # FIN or RST: the process is gone, its host answered for it
HOST_SILENT = "host"  # no answer to keepalive probes: the host lost power or its network

# errors a keepalive or retransmission failure ends a blocked recv() with
_SILENT_ERRNOS = {errno.ETIMEDOUT, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN, errno.ENETDOWN}


@dataclasses.dataclass(frozen=True)
class Keepalive:
    """TCP keepalive for a presence connection: quiet for ``idle_s``, then one probe a second;
    ``probes`` unanswered probes (and ``TCP_USER_TIMEOUT`` at the same window, so unacknowledged
    data cannot keep a dead peer "alive" longer) end the connection with ``ETIMEDOUT``."""

    idle_s: int
    probes: int
    interval_s: int = 1

    @property
    def window_s(self) -> int:
        """Seconds from the peer's last packet until its silence is reported."""
        return self.idle_s + self.interval_s * self.probes

    @classmethod
    def for_budget(cls, timeout_s: float) -> Keepalive:
        """A window of a tenth of the run's budget, 3 to 8 s: short enough that the stages still
        run among the live nodes (and below the heartbeat's 10 s, which it would otherwise only
        repeat), long enough that a second of packet loss on a busy network is no death. At
        least two probes, so one lost probe is not a verdict."""
        window = int(min(8.0, max(3.0, timeout_s / 10)))
        idle = max(1, window // 3)
        return cls(idle_s=idle, probes=max(2, window - idle))

    def apply(self, sock: socket.socket) -> None:
        """Set the options on ``sock`` (a platform without them keeps the heartbeat alone)."""
        opts = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
        for name, value in (("TCP_KEEPIDLE", self.idle_s), ("TCP_KEEPINTVL", self.interval_s),
                            ("TCP_KEEPCNT", self.probes), ("TCP_USER_TIMEOUT", 1000 * self.window_s)):
            if hasattr(socket, name):
                opts.append((socket.IPPROTO_TCP, getattr(socket, name), value))
        for level, opt, value in opts:
            try:
                sock.setsockopt(level, opt, value)
            except OSError:
                pass


def _wait_end(sock: socket.socket, said: bytes = b"") -> tuple[bytes, str | None]:
    """Read ``sock`` until it ends: (everything said, None for an orderly close or the cause)."""
    cause = None
    try:
        while True:
            chunk = sock.recv(16)
            if not chunk:
                break
            said += chunk
    except OSError as exc:
        cause = HOST_SILENT if exc.errno in _SILENT_ERRNOS else PROCESS_ENDED
    return said, cause


class PresenceServer(TcpService):
    """Rank 0: accept presence connections; ``on_death(rank, pid, cause)`` for one that ends
    without bye (``cause``: :data:`PROCESS_ENDED` or :data:`HOST_SILENT`)."""

    name = "llmdiag-presence"

    def __init__(self, on_death: Callable[[int, int, str], None], host: str = "0.0.0.0",
                 keepalive: Keepalive | None = None):
        self._on_death = on_death
        self._keepalive = keepalive or Keepalive.for_budget(60.0)
        super().__init__(host, backlog=1024)

    def handle(self, conn: socket.socket) -> None:
        self._keepalive.apply(conn)
        conn.settimeout(5.0)
        try:
            line, _, said = conn.recv(64).partition(b"\n")
            rank, pid = (int(x) for x in line.split())
        except (OSError, ValueError):
            conn.close()
            return
        conn.settimeout(None)  # held for the whole run: only its end matters (keepalive bounds a silent one)
        try:
            said, cause = _wait_end(conn, said)
        finally:
            conn.close()
        if BYE not in said and not self._stop.is_set():
            self._on_death(rank, pid, cause or PROCESS_ENDED)


class Presence:
    """A node's side: connect and say who it is; :meth:`bye` when its run ends.

    ``on_lost(cause, address)`` is called (from a watcher thread) when the connection ends before
    :meth:`bye`: rank 0's process ended, or its host stopped answering keepalive probes;
    ``address`` is rank 0's as this node reached it.
    """

    def __init__(self, host: str, port: int, rank: int, pid: int, timeout_s: float,
                 keepalive: Keepalive | None = None, on_lost: Callable[[str, str], None] | None = None):
        self._sock = socket.create_connection((host, port), timeout=max(0.1, timeout_s))
        (keepalive or Keepalive.for_budget(60.0)).apply(self._sock)
        self.peer = self._sock.getpeername()[0]  # rank 0's address as this node reaches it
        self._sock.sendall(f"{rank} {pid}\n".encode())
        self._sock.settimeout(None)
        self._leaving = threading.Event()
        self._on_lost = on_lost
        threading.Thread(target=self._watch, name="llmdiag-presence-watch", daemon=True).start()

    def _watch(self) -> None:
        _, cause = _wait_end(self._sock)
        if not self._leaving.is_set() and self._on_lost is not None:
            self._on_lost(cause or PROCESS_ENDED, self.peer)

    def bye(self) -> None:
        self._leaving.set()
        try:
            self._sock.sendall(BYE)
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the watcher's recv
        except OSError:
            pass
        finally:
            self._sock.close()
