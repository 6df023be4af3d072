"""Node-to-node port reachability: listeners on the job's ports, connects from sampled peers.

Each node listens briefly on the job's ports (a sample of a long range) and answers only a
client that presents the run's token (anything else is closed at once). Each node then
connects to its ring neighbours plus ``sample`` further peers chosen from the run token (so
the choice is random but the same on every node), or to all peers with ``full``. Every node
thus makes O(ports × (2 + sample)) connects however large the cluster: the wall time stays
flat, and over a run the sampled pairs cover different links.

A connect is classified by :mod:`llmdiag.cluster.reach`; a port that the target could not
listen on (something else holds it) is ``busy`` and not connected to.
"""

from __future__ import annotations

import random
import selectors
import socket
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from llmdiag.cluster import reach

BUSY = "busy"
HELLO = b"LLMDIAG1 "


def choose_ports(lo: int, hi: int, limit: int) -> list[int]:
    from llmdiag.util.ports import sample_ports

    return sample_ports(lo, hi, max(1, limit))


def choose_peers(ranks: Sequence[int], me: int, sample: int, seed: str, full: bool = False) -> list[int]:
    """Ring neighbours (next and previous in ``ranks``) plus ``sample`` random others."""
    others = [r for r in ranks if r != me]
    if full or len(others) <= 2 + sample:
        return others
    i = list(ranks).index(me)
    ring = {ranks[(i + 1) % len(ranks)], ranks[(i - 1) % len(ranks)]}
    rest = [r for r in others if r not in ring]
    rng = random.Random(f"{seed}:{me}")
    return sorted(ring | set(rng.sample(rest, min(sample, len(rest)))))


class Listeners:
    """Listening sockets on ``ports``; one selector thread answers token holders."""

    def __init__(self, ports: Iterable[int], token: str, rank: int, skip: Iterable[int] = ()):
        self.token = token.encode()
        self.reply = f"OK {rank}\n".encode()
        self.busy: dict[int, str] = {}
        self.listening: list[int] = []
        self._sel = selectors.DefaultSelector()
        self._socks: list[socket.socket] = []
        skip = set(skip)
        for port in ports:
            if port in skip:
                continue
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("0.0.0.0", port))
                s.listen(64)
            except OSError as exc:
                s.close()
                self.busy[port] = exc.strerror or str(exc)
                continue
            s.setblocking(False)
            self._sel.register(s, selectors.EVENT_READ, ("listen", None))
            self._socks.append(s)
            self.listening.append(port)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="llmdiag-listeners", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        pending: dict[socket.socket, tuple[bytes, float]] = {}
        while not self._stop.is_set():
            for key, _ in self._sel.select(timeout=0.1):
                kind, _ = key.data
                sock = key.fileobj
                if kind == "listen":
                    try:
                        conn, _ = sock.accept()
                    except OSError:
                        continue
                    conn.setblocking(False)
                    pending[conn] = (b"", time.monotonic())
                    self._sel.register(conn, selectors.EVENT_READ, ("conn", None))
                    continue
                buf, t0 = pending.get(sock, (b"", time.monotonic()))
                try:
                    chunk = sock.recv(256)
                except OSError:
                    chunk = b""
                buf += chunk
                if chunk and b"\n" not in buf and len(buf) < 256:
                    pending[sock] = (buf, t0)
                    continue
                line = buf.split(b"\n", 1)[0]
                if line.startswith(HELLO) and line[len(HELLO):].split(b" ")[0] == self.token:
                    try:
                        sock.sendall(self.reply)
                    except OSError:
                        pass
                self._drop(sock, pending)
            now = time.monotonic()
            for sock in [s for s, (_, t0) in pending.items() if now - t0 > 2.0]:
                self._drop(sock, pending)  # a client that never speaks is not kept open
        for sock in list(pending):
            self._drop(sock, pending)

    def _drop(self, sock: socket.socket, pending: dict) -> None:
        pending.pop(sock, None)
        try:
            self._sel.unregister(sock)
        except (KeyError, ValueError):
            pass
        sock.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        for s in self._socks:
            try:
                self._sel.unregister(s)
            except (KeyError, ValueError):
                pass
            s.close()
        self._sel.close()


def check_one(addr: str, port: int, token: str, src: int, timeout: float) -> reach.Reach:
    """Connect, present the token, expect ``OK <rank>``; classify what happened."""
    s, r = reach.connect(addr, port, timeout)
    if s is None:
        return r
    try:
        s.settimeout(timeout)
        s.sendall(HELLO + token.encode() + f" {src}\n".encode())
        reply = s.recv(64)
    except OSError as exc:
        reply = b""
        detail = str(exc)
    else:
        detail = "no llmdiag answer" if not reply else f"unexpected answer {reply[:20]!r}"
    finally:
        s.close()
    if reply.startswith(b"OK "):
        return r
    return reach.Reach(addr, port, reach.FOREIGN, detail, r.address, r.elapsed_s)


def probe_peers(targets: Mapping[int, str], ports: Sequence[int], busy: Mapping[int, Iterable[int]], token: str,
                src: int, timeout: float, workers: int = 32) -> list[dict]:
    """Connect to every (peer, port); one row per connect: dst_rank, port, outcome, detail."""
    jobs = []
    rows: list[dict] = []
    for dst, addr in targets.items():
        held = set(busy.get(dst, ()))
        for port in ports:
            if port in held:
                rows.append({"src_rank": src, "dst_rank": dst, "port": port, "outcome": BUSY,
                             "detail": "the target could not listen there (in use)", "elapsed_s": 0.0})
            else:
                jobs.append((dst, addr, port))
    if not jobs:
        return rows
    with ThreadPoolExecutor(max_workers=min(workers, len(jobs)), thread_name_prefix="llmdiag-matrix") as pool:
        results = list(pool.map(lambda j: (j, check_one(j[1], j[2], token, src, timeout)), jobs))
        # a timeout may be one lost SYN (a lossy link: TCP's first retransmit comes after a second): once more, so
        # that a firewall drop is a connect that fails twice; one that answers now is a lossy link, not a drop
        # (so is a connect whose listener did not answer in time: under load its reply can be late, and it is
        # no other program either)
        again = [i for i, (_, r) in enumerate(results) if r.outcome == "timeout" or
                 (r.outcome == reach.FOREIGN and not r.detail.startswith("unexpected answer"))]
        if again:
            retried = list(pool.map(lambda i: check_one(results[i][0][1], results[i][0][2], token, src, timeout),
                                    again))
            for i, r in zip(again, retried):
                if r.outcome == reach.OPEN or (r.outcome != "timeout" and results[i][1].outcome == "timeout"):
                    results[i] = (results[i][0], r)
    for (dst, _, port), r in results:
        rows.append({"src_rank": src, "dst_rank": dst, "port": port, "outcome": r.outcome, "detail": r.detail,
                     "elapsed_s": round(r.elapsed_s, 4)})
    return rows
