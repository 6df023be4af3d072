"""Which node or link is slow: send/recv bandwidth between pairs of nodes.

One rank per node (the lowest rank on each host) represents it; when every rank is on one
host (a standalone run) each rank stands for itself. Pairs are measured one at a time, so
two transfers never share a link and a number belongs to exactly one pair: first the ring
neighbours (every node in two pairs, m measurements), then, for every node in a slow ring
pair, a few partners outside the ring (``samples``), which tells a slow node (all its links
slow) from a slow cable or switch port (one link slow, both ends fine elsewhere).

Each measurement is a simultaneous exchange in both directions; bandwidth is bytes per
direction / time, in GB/s (10^9 B/s). A rate limit on one node's egress therefore shows on
every pair that node is part of. A link's number comes from the median of its ``iters``
exchanges, and a link found slow is measured once more (the better result counts): on a busy
machine one unlucky measurement is common, a slow link is slow both times.

Reference: the median over nodes of each node's best link. A plain median of links would be
dragged down by the slow node itself (on 3 nodes, 2 of 3 ring links touch it); each node's
best link is what its hardware can do when the other end is healthy.
"""

from __future__ import annotations

import math
import socket
import statistics
import time
from typing import Any


def _units(hosts: list[str]) -> list[tuple[str, int]]:
    """(label, rank) of the rank representing each node, in rank order."""
    if len(set(hosts)) == 1:
        return [(f"{hosts[0]}:rank{r}", r) for r in range(len(hosts))]
    seen: dict[str, int] = {}
    for r, h in enumerate(hosts):
        seen.setdefault(h, r)
    return list(seen.items())


def ring_pairs(m: int) -> list[tuple[int, int]]:
    if m < 2:
        return []
    if m == 2:
        return [(0, 1)]
    return [(i, (i + 1) % m) for i in range(m)]


def sample_pairs(m: int, suspects: list[int], done: set[frozenset[int]], samples: int) -> list[tuple[int, int]]:
    """Up to ``samples`` new partners for each suspect, healthy nodes first, nearest first."""
    out: list[tuple[int, int]] = []
    chosen = set(done)
    for s in suspects:
        others = sorted((u for u in range(m) if u != s), key=lambda u: (u in suspects, (u - s) % m))
        picked = 0
        for u in others:
            if picked >= samples:
                break
            key = frozenset((s, u))
            if key in chosen:
                continue
            chosen.add(key)
            out.append((s, u))
            picked += 1
    return out


#: How many scaled MADs below the median a value must lie to be an outlier (a common cut-off
#: for the modified z-score, robust to the outliers themselves).
MAD_CUTOFF = 3.5


def mad(values: list[float]) -> float:
    """Median absolute deviation, scaled to estimate a standard deviation (x 1.4826)."""
    if len(values) < 2:
        return 0.0
    med = statistics.median(values)
    return 1.4826 * statistics.median(abs(v - med) for v in values)


def robust_floor(values: list[float], fraction: float) -> tuple[float, float, float]:
    """(median, MAD of log10 values, floor): below the floor a bandwidth is a low outlier.

    Bandwidth noise is multiplicative (a busy host halves a link, it does not subtract a
    constant), so the test runs on log10 values: an outlier lies ``MAD_CUTOFF`` scaled MADs
    below the median there, AND below ``fraction`` of the median (a tight, healthy set must
    not fail over small differences). Nothing has to be configured.
    """
    pos = [v for v in values if v > 0]
    if not values:
        return 0.0, 0.0, 0.0
    med = statistics.median(values)
    if len(pos) < 2:
        return med, 0.0, fraction * med
    logs = [math.log10(v) for v in pos]
    spread = mad(logs)
    return med, spread, min(fraction * med, 10 ** (statistics.median(logs) - MAD_CUTOFF * spread))


def outliers(values: dict[str, float], fraction: float) -> dict:
    """Low outliers of ``values`` (name -> number) by the robust test: the numbers, the median."""
    nums = list(values.values())
    if len(nums) < 3:
        return {"median": statistics.median(nums) if nums else None, "mad_log10": 0.0, "floor": None, "low": []}
    med, spread, floor = robust_floor(nums, fraction)
    low = sorted((k for k, v in values.items() if v < floor), key=lambda k: values[k])
    return {"median": med, "mad_log10": spread, "floor": floor, "low": low}


def localise(labels: list[str], links: list[dict[str, Any]], low_fraction: float) -> dict[str, Any]:
    """Name slow nodes and slow links from measured ``links`` ({a, b, gbps} with unit indices).

    A node is slow when at least two, and more than half, of its links are below
    ``low_fraction`` of the median of the links measured without it (leave-one-out): what the
    other nodes reach among themselves. A reference that includes the node's own links is
    dragged down by them, and on a loaded machine the healthy links spread so far that a common
    floor fell below a 20x slow node's links (a CI run on 4 ranks under load 8). A slow link
    whose ends are both otherwise fine is reported as a link (below the robust floor of every
    node's best link).
    """
    per_unit: dict[int, list[dict[str, Any]]] = {}
    best: dict[int, float] = {}
    for link in links:
        for u in (link["a"], link["b"]):
            per_unit.setdefault(u, []).append(link)
            best[u] = max(best.get(u, 0.0), link["gbps"])
    reference, spread, threshold = robust_floor(list(best.values()), low_fraction)
    slow_nodes = []
    for u, mine in sorted(per_unit.items()):
        others = [link["gbps"] for link in links if u not in (link["a"], link["b"])]
        floor = low_fraction * statistics.median(others) if others else threshold
        bad = sum(link["gbps"] < floor for link in mine)
        if bad >= 2 and 2 * bad > len(mine):
            slow_nodes.append({
                "node": labels[u],
                "links": [{"peer": labels[link["b"] if link["a"] == u else link["a"]], "gbps": link["gbps"]}
                          for link in mine],
                "median_gbps": statistics.median(link["gbps"] for link in mine),
                "floor_gbps": floor,
            })
    blamed = {n["node"] for n in slow_nodes}
    slow_links = [
        {"a": labels[link["a"]], "b": labels[link["b"]], "gbps": link["gbps"]}
        for link in links
        if link["gbps"] < threshold and labels[link["a"]] not in blamed and labels[link["b"]] not in blamed
    ]
    return {
        "reference_gbps": reference,
        "mad_log10": spread,
        "threshold_gbps": threshold,
        "slow_nodes": slow_nodes,
        "slow_links": slow_links,
    }


def _exchange_times(peer: int, nbytes: int, iters: int, device, group) -> list[float]:
    """Seconds of each of ``iters`` simultaneous two-way exchanges with ``peer`` (after one warm-up)."""
    import torch
    import torch.distributed as dist

    from llmdiag.ncclbench.collectives import group_peer

    send = torch.ones(max(1, nbytes), dtype=torch.uint8, device=device)
    recv = torch.empty_like(send)
    gpeer = group_peer(group, peer)

    def once():
        ops = [dist.P2POp(dist.isend, send, gpeer, group), dist.P2POp(dist.irecv, recv, gpeer, group)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        if send.is_cuda:
            torch.cuda.synchronize(device)

    # Warm-up with a small message: connection setup is not bandwidth, and on a slow link a
    # full-size warm-up would cost as much as a measurement.
    warm = send[: min(send.numel(), 64 << 10)]
    ops = [dist.P2POp(dist.isend, warm, gpeer, group), dist.P2POp(dist.irecv, recv[: warm.numel()], gpeer, group)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        once()
        times.append(time.perf_counter() - t0)
    return times


def _link(a: int, b: int, ranks: list[int], phase: str, nbytes: int, times: list[float]) -> dict[str, Any]:
    """A measured link: bandwidth from the median of its exchanges (one slow exchange is noise;
    a link slow half the time or more is slow, whether capped or only intermittently served)."""
    mid, best = statistics.median(times), min(times)
    return {"a": a, "b": b, "ranks": ranks, "phase": phase, "time_us": mid * 1e6, "best_time_us": best * 1e6,
            "gbps": nbytes / mid / 1e9 if mid > 0 else 0.0,
            "best_gbps": nbytes / best / 1e9 if best > 0 else 0.0}


def measure(group, device, rank: int, n: int, *, nbytes: int, iters: int, low_fraction: float,
            samples: int, node_name: str | None = None) -> dict[str, Any]:
    """Run the pairwise schedule on every rank (collective: all ranks must call it)."""
    import torch
    import torch.distributed as dist

    from llmdiag.ncclbench.timing import Clock

    clock = Clock(group, device)
    hosts: list[Any] = [None] * n
    dist.all_gather_object(hosts, node_name or socket.gethostname(), group=group)
    units = _units([str(h) for h in hosts])
    labels = [u[0] for u in units]
    links: list[dict[str, Any]] = []

    def exchange(a: int, b: int) -> list[float]:
        """Per-iteration seconds of the pair (a, b), the slower end's, identical on every rank."""
        ra, rb = units[a][1], units[b][1]
        clock.barrier()
        mine = [0.0] * iters
        if rank in (ra, rb):
            mine = _exchange_times(rb if rank == ra else ra, nbytes, iters, device, group)
        t = torch.tensor(mine, dtype=torch.float64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
        return [float(x) for x in t.cpu().tolist()]

    def run_pairs(pairs: list[tuple[int, int]], phase: str) -> None:
        for a, b in pairs:
            links.append(_link(a, b, [units[a][1], units[b][1]], phase, nbytes, exchange(a, b)))

    m = len(units)
    run_pairs(ring_pairs(m), "ring")
    first = localise(labels, links, low_fraction)
    suspects = sorted({lk["a"] for lk in links if lk["gbps"] < first["threshold_gbps"]}
                      | {lk["b"] for lk in links if lk["gbps"] < first["threshold_gbps"]})
    done = {frozenset((lk["a"], lk["b"])) for lk in links}
    run_pairs(sample_pairs(m, suspects, done, samples), "sample")
    # A link is called slow only if it is slow twice: a busy CPU or a burst of other traffic
    # can slow one measurement, a bad NIC or cable slows both.
    verdict = localise(labels, links, low_fraction)
    for link in links:
        if link["gbps"] < verdict["threshold_gbps"]:
            again = _link(link["a"], link["b"], link["ranks"], link["phase"], nbytes, exchange(link["a"], link["b"]))
            if again["gbps"] > link["gbps"]:
                link.update(again, rechecked=True)
            else:
                link["rechecked"] = True
    verdict = localise(labels, links, low_fraction)
    notes = []
    # Every rank on one host with CPU tensors: the "links" are loopback, and their differences
    # say more about the CPU load than about a network.
    loopback = len(set(hosts)) == 1 and getattr(device, "type", str(device)) == "cpu"
    if loopback and m >= 2:
        notes.append("all ranks on one host over loopback: differences reflect CPU load, not a network")
    if m < 2:
        notes.append("only one node: nothing to compare")
    elif m == 2:
        notes.append("two nodes: a slow pair is found, but which end is slow needs a third node")
    return {
        "bytes": nbytes,
        "iters": iters,
        "low_fraction": low_fraction,
        "nodes": [{"node": label, "rank": r} for label, r in units],
        "loopback": loopback,
        "links": [dict(lk, a=labels[lk["a"]], b=labels[lk["b"]]) for lk in links],
        **verdict,
        "notes": notes,
    }
