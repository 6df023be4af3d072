"""The collectives nccl-bench runs, their sizes and their bus-bandwidth factors.

Byte accounting follows nccl-tests: for all_gather, reduce_scatter and all_to_all the row's
size is the total (per-rank count × n × element size) and the count column is the per-rank
count; for all_reduce, broadcast and sendrecv size is the buffer and count its elements.

busbw = algbw × factor turns what the algorithm moves into the load on the slowest link:
2(n−1)/n for all_reduce (reduce-scatter + all-gather), (n−1)/n for all_gather,
reduce_scatter and all_to_all, 1 for broadcast and sendrecv.

torch.distributed has no out-of-place all_reduce or broadcast: their out-of-place form copies
the send buffer into the receive buffer and runs the in-place call, which is what a torch
program pays for the same result. all_to_all and sendrecv have no safe in-place form (the
receive would overwrite data still being sent), so their in-place columns are N/A.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from llmdiag.ncclbench import pattern


@dataclasses.dataclass(frozen=True)
class Collective:
    name: str
    split: bool  # size = per-rank count × n (the count column is per rank)
    reduces: bool  # has a reduction op (the redop column)
    rooted: bool  # has a root (the root column)
    inplace: bool  # has an in-place form
    min_ranks: int = 1

    def busbw_factor(self, n: int) -> float:
        return busbw_factor(self.name, n)

    def count_for(self, size_bytes: int, elsize: int, n: int) -> int:
        """The count column for a requested size (rounded down as nccl-tests does)."""
        elements = size_bytes // elsize
        return elements // n if self.split else elements

    def bytes_for(self, count: int, elsize: int, n: int) -> int:
        """The size column: the bytes algbw divides by."""
        return count * elsize * (n if self.split else 1)


COLLECTIVES: dict[str, Collective] = {
    c.name: c
    for c in (
        Collective("all_reduce", split=False, reduces=True, rooted=False, inplace=True),
        Collective("all_gather", split=True, reduces=False, rooted=False, inplace=True),
        Collective("reduce_scatter", split=True, reduces=True, rooted=False, inplace=True),
        Collective("broadcast", split=False, reduces=False, rooted=True, inplace=True),
        Collective("all_to_all", split=True, reduces=False, rooted=False, inplace=False),
        Collective("sendrecv", split=False, reduces=False, rooted=False, inplace=False, min_ranks=2),
    )
}


def busbw_factor(name: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor of collective ``name`` on ``n`` ranks."""
    if name == "all_reduce":
        return 2.0 * (n - 1) / n
    if name in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if name in ("broadcast", "sendrecv"):
        return 1.0
    raise KeyError(name)


@dataclasses.dataclass
class Bound:
    """One collective at one size, out-of-place or in-place, bound to real buffers.

    ``run()`` issues the operation and returns once this rank's part is done (the timer adds
    the device synchronisation). ``fill()`` writes the input pattern; ``output[start:stop]``
    and ``expected(start, stop)`` are what the check compares, one slice at a time, so the
    check's int64/float64 temporaries stay a bounded size whatever the message size.
    """

    run: Callable[[], Any]
    fill: Callable[[], None]
    output: Any
    expected: Callable[[], Any]


class Buffers:
    """Send and receive buffers allocated once at the largest size (as nccl-tests does)."""

    def __init__(self, coll: Collective, max_count: int, n: int, dtype: str, device):
        import torch

        send_len = max_count * (n if coll.name in ("reduce_scatter", "all_to_all") else 1)
        recv_len = max_count * (n if coll.name in ("all_gather", "all_to_all") else 1)
        td = pattern.torch_dtype(dtype)
        self.send = torch.zeros(max(1, send_len), dtype=td, device=device)
        self.recv = torch.zeros(max(1, recv_len), dtype=td, device=device)


def bind(coll: Collective, bufs: Buffers, count: int, *, inplace: bool, rank: int, n: int,
         dtype: str, op: str, root: int, group) -> Bound:
    """The operation of ``coll`` with ``count`` (the table's count column) elements."""
    import torch.distributed as dist

    c = count
    name = coll.name
    redop = pattern.reduce_op(op) if coll.reduces else None
    device = bufs.send.device

    if name == "all_reduce":
        send, recv = bufs.send[:c], bufs.recv[:c]
        target = send if inplace else recv

        def run():
            if not inplace:
                recv.copy_(send)
            dist.all_reduce(target, op=redop, group=group)

        return Bound(run, lambda: pattern.fill(send, rank, 0, dtype, op), target,
                     lambda s, e: pattern.reduced(n, s, e - s, dtype, op, device))

    if name == "all_gather":
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        out = bufs.recv[: c * n]
        inp = out[rank * c:(rank + 1) * c] if inplace else bufs.send[:c]

        def expected_gather(s, e):
            # Chunk r of the output is rank r's input.
            return by_rank(c, s, e, lambda r, off, k: pattern.values(r, off, k, dtype, op, device))

        return Bound(lambda: gather(out, inp, group=group), lambda: pattern.fill(inp, rank, 0, dtype, op), out,
                     expected_gather)

    if name == "reduce_scatter":
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        inp = bufs.send[: c * n]
        out = inp[rank * c:(rank + 1) * c] if inplace else bufs.recv[:c]
        return Bound(lambda: scatter(out, inp, op=redop, group=group), lambda: pattern.fill(inp, rank, 0, dtype, op),
                     out, lambda s, e: pattern.reduced(n, rank * c + s, e - s, dtype, op, device))

    if name == "broadcast":
        send, recv = bufs.send[:c], bufs.recv[:c]
        target = send if inplace else recv

        def run_bcast():
            if not inplace and rank == root:
                recv.copy_(send)
            dist.broadcast(target, src=root, group=group)

        return Bound(run_bcast, lambda: pattern.fill(send, rank, 0, dtype, op), target,
                     lambda s, e: pattern.values(root, s, e - s, dtype, op, device))

    if name == "all_to_all":
        inp, out = bufs.send[: c * n], bufs.recv[: c * n]

        def expected_a2a(s, e):
            # Chunk r of my output is chunk `rank` of rank r's input.
            return by_rank(c, s, e, lambda r, off, k: pattern.values(r, rank * c + off, k, dtype, op, device))

        return Bound(lambda: dist.all_to_all_single(out, inp, group=group),
                     lambda: pattern.fill(inp, rank, 0, dtype, op), out, expected_a2a)

    if name == "sendrecv":
        send, recv = bufs.send[:c], bufs.recv[:c]
        nxt, prv = (rank + 1) % n, (rank - 1) % n

        def run_ring():
            ops = [dist.P2POp(dist.isend, send, group_peer(group, nxt), group),
                   dist.P2POp(dist.irecv, recv, group_peer(group, prv), group)]
            for work in dist.batch_isend_irecv(ops):
                work.wait()

        return Bound(run_ring, lambda: pattern.fill(send, rank, 0, dtype, op), recv,
                     lambda s, e: pattern.values(prv, s, e - s, dtype, op, device))

    raise KeyError(name)


def by_rank(c: int, start: int, stop: int, piece: Callable[[int, int, int], Any]):
    """Elements ``start:stop`` of an output made of one ``c``-element chunk per rank:
    ``piece(rank, offset in the chunk, length)`` for each chunk the slice touches, joined."""
    import torch

    parts = []
    for r in range(start // c, -(-stop // c)):
        lo, hi = max(start, r * c), min(stop, (r + 1) * c)
        parts.append(piece(r, lo - r * c, hi - lo))
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def group_peer(group, group_rank: int) -> int:
    """Global rank of ``group_rank`` in ``group`` (p2p calls take global ranks)."""
    import torch.distributed as dist

    if group is None:
        return group_rank
    return dist.get_global_rank(group, group_rank)
