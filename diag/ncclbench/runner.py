"""The size sweep on one rank: for each collective and size, warm up, time out-of-place and
in-place, check the result, and combine the per-rank numbers into a nccl-tests row.

Every rank runs the same sequence of collectives (the sweep is a pure function of the spec
and the world size), which is what keeps them matched. The data check runs after the timed
loop on freshly filled buffers, as nccl-tests does: the timed loop's repeated reductions
would otherwise change the expected values.
"""

from __future__ import annotations

import math
from typing import Any

from llmdiag.ncclbench import pattern, progress
from llmdiag.ncclbench.collectives import COLLECTIVES, Buffers, bind
from llmdiag.ncclbench.config import BenchSpec
from llmdiag.ncclbench.timing import Clock, mean

NAN = float("nan")


def _measure(coll, bufs, count, inplace, spec: BenchSpec, clock: Clock, rank: int, n: int, group):
    """(seconds per op on this rank, wrong elements on this rank or -1 when not checked)."""
    op = bind(coll, bufs, count, inplace=inplace, rank=rank, n=n, dtype=spec.dtype, op=spec.op,
              root=spec.root, group=group)
    op.fill()
    for _ in range(spec.warmup_iters):
        op.run()
    seconds = clock.time_loop(op.run, spec.iters)
    wrong = -1
    if spec.check:
        op.fill()
        clock.barrier()  # every rank's input is in place before anyone reads it
        op.run()
        if spec.inject_corruption and spec.inject_corruption[0] == rank:
            pattern.corrupt(op.output, spec.inject_corruption[1])
        wrong = sum(pattern.count_wrong(op.output[s:e], op.expected(s, e), spec.dtype, n)
                    for s, e in pattern.chunks(op.output.numel()))
    return seconds, wrong


def sweep(spec: BenchSpec, group, device, rank: int, n: int, emit=None) -> list[dict[str, Any]]:
    """All rows of the run (identical on every rank), with per-rank times attached; ``emit``
    (rank 0's, see :mod:`progress`) hears of each row before it is measured and once it is."""
    clock = Clock(group, device)
    planned = progress.planned_rows(spec, n)
    elsize = pattern.element_size(spec.dtype)
    rows: list[dict[str, Any]] = []
    for name in spec.collectives:
        coll = COLLECTIVES[name]
        if n < coll.min_ranks:
            continue
        counts = [c for c in (coll.count_for(s, elsize, n) for s in spec.sizes) if c > 0]
        counts = list(dict.fromkeys(counts))  # rounding can map two sizes to one count
        if not counts:
            continue
        bufs = Buffers(coll, max(counts), n, spec.dtype, device)
        for count in counts:
            if emit is not None:
                emit({"measuring": {"collective": name, "size": coll.bytes_for(count, elsize, n),
                                    "index": len(rows), "planned": planned}})
            t_oop, w_oop = _measure(coll, bufs, count, False, spec, clock, rank, n, group)
            if coll.inplace:
                t_ip, w_ip = _measure(coll, bufs, count, True, spec, clock, rank, n, group)
            else:
                t_ip, w_ip = NAN, -1
            per_rank = clock.gather([t_oop, t_ip])
            wrong = clock.total([max(w_oop, 0), max(w_ip, 0)])
            rows.append(make_row(coll, count, elsize, n, spec, per_rank,
                                 wrong_oop=wrong[0] if w_oop >= 0 else None,
                                 wrong_ip=wrong[1] if w_ip >= 0 else None))
            if emit is not None:
                emit({"row": rows[-1]})
        del bufs
    return rows


def _cell(coll, size: int, n: int, seconds: float, wrong: int | None) -> dict[str, Any] | None:
    if math.isnan(seconds):
        return None
    algbw = size / seconds / 1e9 if seconds > 0 else 0.0
    return {
        "time_us": seconds * 1e6,
        "algbw": algbw,
        "busbw": algbw * coll.busbw_factor(n),
        "wrong": wrong,
    }


def make_row(coll, count: int, elsize: int, n: int, spec: BenchSpec, per_rank: list[list[float]],
             *, wrong_oop: int | None, wrong_ip: int | None) -> dict[str, Any]:
    """One table row from every rank's [oop, in-place] seconds (time = mean over ranks)."""
    size = coll.bytes_for(count, elsize, n)
    oop_times = [r[0] for r in per_rank]
    ip_times = [r[1] for r in per_rank]
    return {
        "collective": coll.name,
        "size": size,
        "count": count,
        "type": spec.dtype,
        "redop": spec.op if coll.reduces else "none",
        "root": spec.root if coll.rooted else -1,
        "out_of_place": _cell(coll, size, n, mean(oop_times), wrong_oop),
        "in_place": None if any(math.isnan(t) for t in ip_times) else _cell(coll, size, n, mean(ip_times), wrong_ip),
        "rank_time_us": {
            "out_of_place": [t * 1e6 for t in oop_times],
            "in_place": None if any(math.isnan(t) for t in ip_times) else [t * 1e6 for t in ip_times],
        },
    }
