"""Rendezvous over torch.distributed's c10d TCPStore: join, roster, heartbeats, bounded barriers.

Rank 0 hosts the store on ``MASTER_ADDR:MASTER_PORT`` (under torchrun the elastic agent
already does, and every agent connects as a client). Every step here has a deadline and
never waits for a node that stopped: each agent bumps a heartbeat counter from its own
store connection, and a waiter gives up on a node whose counter stopped moving. So a node
that never starts is *missing* (it never joined), a node that dies mid-run is *died* (it
joined, then its heartbeat stopped), and everything else still gets a report.

Keys (under the ``llmdiag/`` prefix): ``join/<rank>`` (node identity), ``joined`` (counter),
``roster`` (rank 0's list of joined ranks and the run token), ``hb/<rank>`` (heartbeats),
``<stage>/<rank>`` + ``<stage>/count`` (barriers), and the stage payloads of other modules.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from llmdiag.cluster.world import World

PREFIX = "llmdiag/"
_CLOSED = 1 << 40  # added to a barrier's counter when its coordinator closes it early


@dataclasses.dataclass(frozen=True)
class Roster:
    """Who joined (node ranks, in order) and the run's shared secret for port-matrix listeners.

    It travels as the *missing* ranks, not the joined ones, and without per-node details:
    every node reads it, so its size is what multiplies by N on the store's link.
    """

    ranks: tuple[int, ...]
    token: str
    nnodes: int
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def missing(self) -> list[int]:
        joined = set(self.ranks)
        return [r for r in range(self.nnodes) if r not in joined]


class RankTaken(RuntimeError):
    """Another node already holds this node rank (two nodes were started with the same NODE_RANK)."""

    def __init__(self, rank: int, holder: dict[str, Any]):
        super().__init__(f"node rank {rank} is already held by {holder.get('node')}")
        self.rank, self.holder = rank, holder


def _rank_list(raw: bytes | str, n: int) -> set[int]:
    text = raw.decode() if isinstance(raw, bytes) else raw
    return {int(x) for x in text.split(",") if x.strip().isdigit() and int(x) < n}


class StoreSession:
    """One agent's connection to the store plus the helpers every stage uses."""

    def __init__(self, world: World, *, log: Callable[[str], None] = lambda s: None,
                 heartbeat_s: float | None = None, stale_s: float | None = None):
        self.world = world
        self.rank = world.node_rank
        self.log = log
        # Heartbeats cost the store one add() per node per interval: slow them down at scale.
        self.heartbeat_s = heartbeat_s or max(0.5, world.nnodes / 1000)
        # A node is declared dead after this long without a beat. Not shorter: on a loaded node
        # (a torch import or a training job holding the CPUs) a healthy agent's beat thread was
        # seen to stall for over 3 s, and a "died" verdict on a healthy node is a false alarm.
        self.stale_s = stale_s or max(10.0, 10 * self.heartbeat_s)
        # Waiters poll the one store: cap the polling rate of the whole cluster near 20k requests/s.
        self.poll_max = max(0.1, world.nnodes / 20000)
        self.store = None
        self._server = None
        self._hb_stop = threading.Event()
        self._hb_thread: threading.Thread | None = None
        self._seen: dict[int, tuple[int, float]] = {}
        self._dead: set[int] = set()  # ranks known dead (their presence connection broke: presence.py)
        self.dead_why: dict[int, str] = {}  # how this process learnt a rank died (rank 0: its presence)
        self._dead_read = 0.0

    # -- connection ----------------------------------------------------------------------
    def open(self, timeout_s: float) -> None:
        """Host (rank 0) or connect to the store within ``timeout_s``; raises RuntimeError with the reason.

        The bound covers importing torch too (seconds on a loaded node), so the store's own
        connect timeout is what is left after the import.
        """
        end = time.monotonic() + timeout_s
        try:
            from torch.distributed import PrefixStore, TCPStore
        except Exception as exc:  # noqa: BLE001 - no torch, or a broken one: a finding, not a crash
            raise RuntimeError(f"torch.distributed is not importable here, so no c10d store: {exc}") from None

        w = self.world
        t = timedelta(seconds=max(1.0, end - time.monotonic()))
        host_it = w.is_root and not w.agent_store
        try:
            base = TCPStore(w.master_addr, w.master_port, None, host_it, t, wait_for_workers=False)
        except Exception as exc:  # noqa: BLE001 - c10d raises RuntimeError/DistStoreError/OSError
            what = "host" if host_it else "connect to"
            raise RuntimeError(f"could not {what} the store at {w.master_addr}:{w.master_port}: "
                               f"{str(exc).splitlines()[0][:300]}") from None
        self._server = base
        self.store = PrefixStore(PREFIX, base)

    def close(self) -> None:
        self.stop_heartbeat()
        self.store = None
        self._server = None

    # -- small helpers -------------------------------------------------------------------
    def put(self, key: str, value: Any) -> None:
        self.store.set(key, json.dumps(value, separators=(",", ":"), default=str))

    def get(self, key: str) -> Any:
        return json.loads(self.store.get(key))

    def has(self, key: str) -> bool:
        return bool(self.store.check([key]))

    def count(self, key: str) -> int:
        return int(self.store.add(key, 0))

    # -- heartbeats ----------------------------------------------------------------------
    def second_connection(self):
        """Another connection to the store (with the prefix), for a thread beside the main one."""
        from torch.distributed import PrefixStore

        return PrefixStore(PREFIX, self._server.clone())

    def start_heartbeat(self) -> None:
        """Bump ``hb/<rank>`` from a second connection, so a busy main thread still beats."""
        hb = self.second_connection()
        key = f"hb/{self.rank}"

        def beat() -> None:
            while not self._hb_stop.is_set():
                try:
                    hb.add(key, 1)
                except Exception:  # noqa: BLE001 - the store went away: nothing left to tell
                    return
                self._hb_stop.wait(self.heartbeat_s)

        hb.add(key, 1)
        self._hb_thread = threading.Thread(target=beat, name="llmdiag-heartbeat", daemon=True)
        self._hb_thread.start()

    def stop_heartbeat(self) -> None:
        self._hb_stop.set()

    def mark_dead(self, rank: int, store=None, why: str | None = None) -> None:
        """Record once, for every node, that ``rank``'s process or host is gone (no stage waits on it
        again); ``store``: a :meth:`second_connection` when called beside the main thread; ``why``:
        how it was seen (kept for this process's report)."""
        self.mark_gone(rank, why)
        (store or self.store).append("dead/ranks", f"{rank},")

    def mark_gone(self, rank: int, why: str | None = None) -> None:
        """Record ``rank`` dead for this process only (a node that lost rank 0 has no store to tell)."""
        if why:
            self.dead_why.setdefault(rank, why)
        self._dead.add(rank)

    def abandon_store(self, address: str) -> int:
        """Rank 0 at ``address`` is gone: shut down this process's connections to its store.

        The c10d client waits on a store reply without a bound of its own (a main thread was seen
        blocked in ``check`` 24 s after rank 0's host went silent, past the whole budget), and only
        the kernel could end that wait. Shutting the sockets down makes the blocked call and every
        later one fail at once, so this node ends in time with its own report. Returns how many.
        """
        try:
            import psutil

            me = psutil.Process()
            conns = (getattr(me, "net_connections", None) or me.connections)(kind="tcp")
        except Exception:  # noqa: BLE001 - no psutil or no /proc: the store's own timeout stays
            return 0
        n = 0
        for c in conns:
            # c10d's sockets may be IPv6 ones reaching an IPv4 address as ::ffff:a.b.c.d
            ip = c.raddr.ip.removeprefix("::ffff:") if c.raddr else None
            if ip == address and c.raddr.port == self.world.master_port and c.fd >= 0:
                try:
                    with socket.socket(c.family, socket.SOCK_STREAM, fileno=os.dup(c.fd)) as s:
                        s.shutdown(socket.SHUT_RDWR)
                    n += 1
                except OSError:
                    pass
        return n

    def known_dead(self, rank: int) -> bool:
        """Whether ``rank`` was recorded dead (the store's list is read at most twice a second)."""
        now = time.monotonic()
        if rank not in self._dead and now - self._dead_read >= 0.5:
            self._dead_read = now
            try:
                if self.has("dead/ranks"):
                    self._dead |= _rank_list(self.store.get("dead/ranks"), self.world.nnodes)
            except Exception:  # noqa: BLE001 - the heartbeat still decides
                pass
        return rank in self._dead

    def alive(self, rank: int) -> bool:
        """False once ``rank`` is recorded dead, or its heartbeat has not moved for ``stale_s`` seconds."""
        if self.known_dead(rank):
            return False
        now = time.monotonic()
        try:
            value = int(self.store.add(f"hb/{rank}", 0))
        except Exception:  # noqa: BLE001
            return True
        last = self._seen.get(rank)
        if last is None or last[0] != value:
            self._seen[rank] = (value, now)
            return True
        return now - last[1] < self.stale_s

    def last_beat_age(self, rank: int) -> float | None:
        last = self._seen.get(rank)
        return None if last is None else time.monotonic() - last[1]

    # -- join and roster -----------------------------------------------------------------
    def join(self, info: dict[str, Any]) -> None:
        """Claim this node rank (once: a second node started with the same rank is refused, :class:`RankTaken`)
        and say who this node is. Every claim, refused or not, is logged with the node's launcher view (its node
        count, master port) for rank 0 to cross-check (:meth:`claims`)."""
        me = {k: info.get(k) for k in ("node", "hostname", "address", "pid")}
        self.store.append("launch/claims", json.dumps({**me, "rank": self.rank, "nnodes": self.world.nnodes,
                                                       "master_port": self.world.master_port}) + "\n")
        token = json.dumps(me, sort_keys=True)
        held = self.store.compare_set(f"claim/{self.rank}", "", token)
        held = held.decode() if isinstance(held, bytes) else str(held)
        if held != token:
            raise RankTaken(self.rank, json.loads(held) if held.startswith("{") else {"node": held})
        self.put(f"join/{self.rank}", info)
        self.store.append("join/ranks", f"{self.rank},")
        self.store.add("joined", 1)

    def wait_joins(self, deadline: float, extra: dict[str, Any] | Callable[[], dict[str, Any]] | None = None, poll: float = 0.05) -> Roster:
        """Rank 0: wait until every node joined or ``deadline`` (monotonic); publish the roster."""
        n = self.world.nnodes
        # distinct ranks inside 0..n-1, not a bare count: a rank out of range (a node whose launcher says more
        # nodes) must not stand in for one that has not joined yet
        while time.monotonic() < deadline and (self.count("joined") < n or len(self.joined()) < n):
            time.sleep(poll)
        ranks = self.joined()
        # ``extra`` may be a function: its values are taken when the roster is published
        roster = Roster(tuple(ranks), secrets.token_hex(16), n, dict((extra() if callable(extra) else extra) or {}))
        self.put("roster", {"missing": roster.missing, "token": roster.token, "nnodes": n, "extra": roster.extra})
        return roster

    def claims(self) -> list[dict[str, Any]]:
        """Every node's claim of a rank, in order, with its launcher's node count and master port."""
        if not self.has("launch/claims"):
            return []
        raw = self.store.get("launch/claims")
        out = []
        for line in (raw.decode() if isinstance(raw, bytes) else str(raw)).splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def joined(self) -> list[int]:
        """The node ranks that have joined so far."""
        return sorted(_rank_list(self.store.get("join/ranks"), self.world.nnodes)) if self.has("join/ranks") else []

    def wait_roster(self, deadline: float) -> Roster | None:
        """Other ranks: rank 0's roster, or None when it never came (rank 0 gone or too slow)."""
        if not self.wait_key("roster", deadline, ranks_alive=[0]):
            return None
        d = self.get("roster")
        missing = set(d["missing"])
        return Roster(tuple(r for r in range(d["nnodes"]) if r not in missing), d["token"], d["nnodes"],
                      d.get("extra") or {})

    def join_info(self, ranks: Iterable[int]) -> dict[int, dict[str, Any]]:
        """What ``ranks`` said when they joined (host name, address): only the nodes asked for."""
        ranks = list(ranks)
        out: dict[int, dict[str, Any]] = {}
        for i in range(0, len(ranks), 256):
            batch = ranks[i:i + 256]
            out.update(zip(batch, (json.loads(v) for v in self.store.multi_get([f"join/{r}" for r in batch]))))
        return out

    # -- waiting ---------------------------------------------------------------------------
    def wait_key(self, key: str, deadline: float, *, ranks_alive: Iterable[int] = (), poll: float = 0.02) -> bool:
        """Poll for ``key`` until ``deadline``; give up early if a rank it depends on died."""
        watch = list(ranks_alive)
        next_live = time.monotonic() + 1.0
        while True:
            if self.has(key):
                return True
            now = time.monotonic()
            if now >= deadline:
                return False
            if watch and now >= next_live:
                next_live = now + 1.0
                if not all(self.alive(r) for r in watch):
                    return False
            time.sleep(min(poll, max(0.0, deadline - now)))
            poll = min(poll * 1.5, 2 * self.poll_max)

    def barrier(self, name: str, ranks: Iterable[int], deadline: float) -> tuple[set[int], set[int]]:
        """Arrive at ``name``; wait for ``ranks``. Returns (arrived, died): never past ``deadline``.

        Everyone polls one counter, at a rate capped by the cluster size. Only the coordinator
        (rank 0, or the lowest rank present) looks for who is late, with one read of the
        arrival list, and closes the barrier for everyone when the rest are dead or the
        deadline came: it writes the verdict and pushes the counter past any total. So a late
        node costs the store O(1) requests per second, not O(N) per node.
        """
        ranks = set(ranks)
        coord = 0 if 0 in ranks else min(ranks)
        self.store.append(f"{name}/ranks", f"{self.rank},")
        self.store.add(f"{name}/count", 1)
        # with a node known dead the coordinator looks at once and often: the rest close it quickly
        every = 0.2 if self._dead & ranks else 1.0
        next_check = time.monotonic() + (0.0 if self._dead & ranks else 1.0)
        poll = 0.01
        while True:
            count = self.count(f"{name}/count")
            if count >= _CLOSED:
                v = self.get(f"{name}/verdict")
                return ranks - set(v["pending"]), set(v["died"])
            if count >= len(ranks):
                return ranks, set()
            now = time.monotonic()
            if now >= next_check or now >= deadline:
                next_check = now + every
                if self.rank == coord:
                    pending = ranks - _rank_list(self.store.get(f"{name}/ranks"), 1 << 30)
                    died = {r for r in pending if not self.alive(r)}
                    if now >= deadline or (pending and pending <= died):
                        self.put(f"{name}/verdict", {"pending": sorted(pending), "died": sorted(died)})
                        self.store.add(f"{name}/count", _CLOSED)
                        return ranks - pending, died
                elif now >= deadline or not self.alive(coord):
                    pending = ranks - _rank_list(self.store.get(f"{name}/ranks"), 1 << 30)
                    return ranks - pending, ({coord} & pending) if now < deadline else set()
            time.sleep(min(poll, max(0.0, deadline - now)))
            poll = min(poll * 1.5, self.poll_max)
