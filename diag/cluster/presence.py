"""A node's process death seen at once: each node holds one TCP connection to rank 0 for its run.

The heartbeat names a stopped node only after ``stale_s`` (10 s: a loaded node's beat thread
stalls for seconds, and a healthy node called dead is a false alarm), and every stage that
waited on the node paid that wait again. A process that dies (SIGKILL, the OOM killer, a
crash) has its sockets closed by the kernel at once, so each node connects to rank 0's
presence port before it joins, says its rank and pid, and says ``bye`` when its run ends. A
connection that closes without ``bye`` is a node that died; rank 0 records it once in the
store (``dead/ranks``), where every node's liveness check reads it. A host that loses power or
its network closes nothing: the heartbeat still covers that.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

from llmdiag.cluster.service import TcpService

BYE = b"bye\n"


class PresenceServer(TcpService):
    """Rank 0: accept presence connections; ``on_death(rank, pid)`` for one that closes without bye."""

    name = "llmdiag-presence"

    def __init__(self, on_death: Callable[[int, int], None], host: str = "0.0.0.0"):
        self._on_death = on_death
        super().__init__(host, backlog=1024)

    def handle(self, conn: socket.socket) -> None:
        conn.settimeout(5.0)
        try:
            line, _, said = conn.recv(64).partition(b"\n")
            rank, pid = (int(x) for x in line.split())
        except (OSError, ValueError):
            conn.close()
            return
        conn.settimeout(None)  # held for the whole run: only its end matters
        try:
            while True:
                chunk = conn.recv(16)
                if not chunk:
                    break
                said += chunk
        except OSError:
            pass
        finally:
            conn.close()
        if BYE not in said and not self._stop.is_set():
            self._on_death(rank, pid)


class Presence:
    """A node's side: connect and say who it is; :meth:`bye` when its run ends."""

    def __init__(self, host: str, port: int, rank: int, pid: int, timeout_s: float):
        self._sock = socket.create_connection((host, port), timeout=max(0.1, timeout_s))
        self._sock.sendall(f"{rank} {pid}\n".encode())

    def bye(self) -> None:
        try:
            self._sock.sendall(BYE)
        except OSError:
            pass
        finally:
            self._sock.close()
