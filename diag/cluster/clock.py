"""Clock skew: measured against rank 0 NTP-style, judged against the median of all nodes.

Rank 0 serves its wall clock on an ephemeral TCP port (published in the store) to clients
that present the run token. A client takes a few samples and keeps the one with the
smallest round trip, whose error is at most half that round trip: offset =
(t_send + t_recv) / 2 - t_server. Rank 0 is only the reference the offsets are measured
from, not the truth: :func:`judge` names the nodes far from the median of every node's
offset (rank 0's own is 0), so a rank 0 whose clock is off is the node warned, not every
healthy node. Skewed clocks break timeouts, log correlation and certificate checks; they
also make one node's log look like it stalled when it did not.
"""

from __future__ import annotations

import dataclasses
import socket
import statistics
import struct
import time
from collections.abc import Callable, Mapping

from llmdiag.cluster.service import TcpService

_REQ = b"T"
_FMT = "!d"


class TimeServer(TcpService):
    """Rank 0's clock service; ``close()`` stops it (also a context manager)."""

    name = "llmdiag-time"

    def __init__(self, token: str, host: str = "0.0.0.0", now: Callable[[], float] = time.time):
        self.token = token.encode()
        self._now = now  # the clock served (a test serves a skewed one)
        super().__init__(host)

    def handle(self, conn: socket.socket) -> None:
        conn.settimeout(2.0)
        try:
            if _read_line(conn) != self.token:
                return
            while not self._stop.is_set():
                if conn.recv(1) != _REQ:
                    return
                conn.sendall(struct.pack(_FMT, self._now()))
        except OSError:
            pass
        finally:
            conn.close()

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


@dataclasses.dataclass(frozen=True)
class SkewVerdict:
    """How far each node's clock is from the cluster's: ``off`` lists (node, offset from the
    centre in ms), largest first; ``split`` says no majority of nodes agrees on the time (two
    nodes, or two camps), so which clock is wrong cannot be told and ``off`` holds them all."""

    centre_ms: float
    off: tuple[tuple[str, float], ...]
    split: bool = False

    def offset(self, skew_ms: float) -> float:
        return skew_ms - self.centre_ms


def judge(skews: Mapping[str, float], limit_ms: float) -> SkewVerdict:
    """Judge each node's offset from rank 0 (``skews``: node → ms, rank 0's is 0) against the
    median of all of them: a node more than ``limit_ms`` from it is off. The median is the
    robust centre: up to half the nodes (rank 0 among them) may be wrong without moving it."""
    if not skews:
        return SkewVerdict(0.0, ())
    centre = statistics.median(skews.values())
    off = sorted(((n, v - centre) for n, v in skews.items() if abs(v - centre) > limit_ms), key=lambda nv: -abs(nv[1]))
    if len(skews) == 2 and not off and max(skews.values()) - min(skews.values()) > limit_ms:
        off = [(n, v - centre) for n, v in skews.items()]  # two nodes apart by more than the limit
    split = bool(off) and 2 * len(off) >= len(skews)
    return SkewVerdict(centre, tuple(off), split)
