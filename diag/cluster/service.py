"""A small TCP service on an ephemeral port: one thread accepts, one thread per connection."""

from __future__ import annotations

import socket
import threading


class TcpService:
    """Listens on ``host``:(an ephemeral port) and calls ``handle(conn)`` in a thread per
    connection until :meth:`close`. Subclasses set ``name`` (the threads' name)."""

    name = "llmdiag-service"

    def __init__(self, host: str = "0.0.0.0", backlog: int = 128):
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, 0))
        self._sock.listen(backlog)
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except (socket.timeout, OSError):
                continue
            threading.Thread(target=self.handle, args=(conn,), name=f"{self.name}-conn", daemon=True).start()

    def handle(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self._stop.set()
        self._sock.close()
