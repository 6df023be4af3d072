"""How long one collective takes, measured the way nccl-tests does.

Every rank times its own loop of ``iters`` operations, starting together after a barrier, and
the row's time is the mean over ranks of each rank's time per operation. There is no barrier
at the end: it would make every rank report the slowest one's time and hide a straggler.

On a GPU the loop is bracketed by CUDA events recorded on the current stream (NCCL runs the
collective asynchronously; the host clock would measure only the launch). On CPU (gloo) the
calls are synchronous, so a monotonic wall clock around the loop is exact.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


class Clock:
    """Times loops on this rank and combines the per-rank times of a row."""

    def __init__(self, group, device):
        self.group = group
        self.device = device
        self.cuda = getattr(device, "type", str(device)) == "cuda"

    def barrier(self) -> None:
        import torch
        import torch.distributed as dist

        if self.cuda:
            torch.cuda.synchronize(self.device)
        # A tiny all_reduce is a barrier on every backend (nccl's barrier needs a device guess).
        flag = torch.zeros(1, device=self.device)
        dist.all_reduce(flag, group=self.group)
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def time_loop(self, fn: Callable[[], Any], iters: int) -> float:
        """Seconds per call of ``fn`` on this rank, all ranks starting together."""
        self.barrier()
        if self.cuda:
            import torch

            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3 / iters
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        return (time.perf_counter() - t0) / iters

    def gather(self, values: list[float]) -> list[list[float]]:
        """Every rank's ``values`` (same length on all ranks), indexed [rank][i].

        A NaN stands for "not measured" and survives the exchange.
        """
        import torch
        import torch.distributed as dist

        n = dist.get_world_size(self.group)
        mine = torch.tensor(values, dtype=torch.float64, device=self.device)
        out = torch.zeros(n * len(values), dtype=torch.float64, device=self.device)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        gather(out, mine, group=self.group)
        flat = out.cpu().tolist()
        return [flat[r * len(values):(r + 1) * len(values)] for r in range(n)]

    def total(self, values: list[int]) -> list[int]:
        """Sum over ranks (the #wrong column adds every rank's wrong elements)."""
        import torch
        import torch.distributed as dist

        t = torch.tensor(values, dtype=torch.int64, device=self.device)
        dist.all_reduce(t, group=self.group)
        return [int(v) for v in t.cpu().tolist()]


def mean(values: list[float]) -> float:
    return sum(values) / len(values)
