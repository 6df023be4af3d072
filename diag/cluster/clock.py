"""Clock skew against rank 0, NTP-style: offset = t_server - (t_send + t_recv) / 2.

Rank 0 serves its wall clock on an ephemeral TCP port (published in the store) to clients
that present the run token. A client takes a few samples and keeps the one with the
smallest round trip, whose error is at most half that round trip. Skewed clocks break
timeouts, log correlation and certificate checks; they also make one node's log look like
it stalled when it did not.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

_REQ = b"T"
_FMT = "!d"


class TimeServer:
    """Rank 0's clock service; ``close()`` stops it (also a context manager)."""

    def __init__(self, token: str, host: str = "0.0.0.0"):
        self.token = token.encode()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, 0))
        self._sock.listen(128)
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="llmdiag-time", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except (socket.timeout, OSError):
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        conn.settimeout(2.0)
        try:
            if _read_line(conn) != self.token:
                return
            while not self._stop.is_set():
                if conn.recv(1) != _REQ:
                    return
                conn.sendall(struct.pack(_FMT, time.time()))
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._sock.close()

    def __enter__(self) -> TimeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_line(conn: socket.socket, limit: int = 128) -> bytes:
    """One line, byte by byte: the client's first request may follow in the same segment."""
    buf = b""
    while not buf.endswith(b"\n") and len(buf) < limit:
        chunk = conn.recv(1)
        if not chunk:
            break
        buf += chunk
    return buf.strip()


def measure(host: str, port: int, token: str, *, samples: int = 5, timeout: float = 2.0) -> dict:
    """This node's clock minus rank 0's, in ms, with the round trip of the best sample.

    Returns ``{"skew_ms", "rtt_ms", "samples"}``, or ``{"error": ...}`` when rank 0's clock
    service cannot be reached.
    """
    try:
        conn = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        return {"error": f"clock service {host}:{port} unreachable: {exc}"}
    best = None
    try:
        conn.settimeout(timeout)
        conn.sendall(token.encode() + b"\n")
        for _ in range(samples):
            t0 = time.time()
            conn.sendall(_REQ)
            data = b""
            while len(data) < 8:
                chunk = conn.recv(8 - len(data))
                if not chunk:
                    raise OSError("clock service closed the connection")
                data += chunk
            t3 = time.time()
            (t1,) = struct.unpack(_FMT, data)
            rtt = t3 - t0
            skew = (t0 + t3) / 2 - t1
            if best is None or rtt < best[0]:
                best = (rtt, skew)
    except OSError as exc:
        if best is None:
            return {"error": f"clock exchange failed: {exc}"}
    finally:
        conn.close()
    return {"skew_ms": round(best[1] * 1000, 3), "rtt_ms": round(best[0] * 1000, 3), "samples": samples}
