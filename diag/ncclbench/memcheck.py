"""Will the buffers fit? Checked before any rank starts (``-e 1T`` must be one clear line,
not a traceback from every rank's allocator).

A rank allocates, per collective, a send and a receive buffer at the largest count
(``Buffers``); the fill and the check work a slice at a time (``pattern.CHUNK``), so they add
a bounded amount. On the host (gloo) a rank also holds the interpreter and torch, and gloo
works on copies of part of the message. Measured peak resident set of a gloo rank, 2 ranks,
torch 2.13 CPU, above the ~250 MiB of an idle rank: all_reduce 256 MiB 3.2x the message with
the check, 2.5x without; all_gather / all_to_all / reduce_scatter 128 MiB 3.7x / 4.1x / 3.6x
(it was 15.6x for all_reduce while the check built whole int64/float64 copies). The model
below, 1.5 x (send + receive) + the slices' temporaries + the idle rank, lies above each of
those. The sum over the ranks that share the memory (all local ranks share host memory with
gloo; each NCCL rank has its own GPU) must fit in what is available.
"""

from __future__ import annotations

import os

from llmdiag.errors import UsageError
from llmdiag.ncclbench.collectives import COLLECTIVES
from llmdiag.ncclbench.config import BenchSpec
from llmdiag.ncclbench import pattern
from llmdiag.ncclbench.pattern import element_size

#: what the rest of the process needs besides the buffers (torch, gloo's own buffers)
HEADROOM = 512 << 20
#: a gloo rank: the interpreter and torch (about 250 MiB measured), and the fill's and the
#: check's slices (``pattern.CHUNK`` elements; a few int64/float64 temporaries of each)
HOST_RANK_BASE = (256 << 20) + 8 * 8 * pattern.CHUNK
#: gloo's working copies, as a fraction of the buffers (measured 0.5 at most, see above)
HOST_COPY_FACTOR = 1.5
#: how to run anyway when the estimate is wrong for this machine
OVERRIDE = "set memory_check = false in [nccl_bench] of the config (--config FILE) to run anyway"


def rank_bytes(spec: BenchSpec, n: int) -> int:
    """Bytes of buffers one rank of an ``n``-rank run allocates at most."""
    elsize = element_size(spec.dtype)
    worst = 0
    for name in spec.collectives:
        coll = COLLECTIVES[name]
        count = max((coll.count_for(s, elsize, n) for s in spec.sizes), default=0)
        send = count * (n if name in ("reduce_scatter", "all_to_all") else 1)
        recv = count * (n if name in ("all_gather", "all_to_all") else 1)
        worst = max(worst, (send + recv) * elsize)
    if spec.pairwise:
        worst = max(worst, 2 * spec.pairwise_bytes)
    return worst


def host_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def gpu_free(index: int) -> int | None:
    """Free memory of GPU ``index`` from NVML (never CUDA: a context here would take GPU memory)."""
    try:
        from llmdiag.nvml import RealNvml

        nv = RealNvml()
    except Exception:  # noqa: BLE001 - no NVML: nothing to check against
        return None
    try:
        return nv.snapshot(index).memory_free_bytes
    except Exception:  # noqa: BLE001
        return None
    finally:
        nv.close()


def _gib(b: float) -> str:
    return f"{b / (1 << 30):.1f} GiB"


def host_rank_bytes(spec: BenchSpec, n: int) -> int:
    """Peak host memory of one gloo rank of an ``n``-rank run (the model above)."""
    return int(HOST_COPY_FACTOR * rank_bytes(spec, n)) + HOST_RANK_BASE


def check_fits(spec: BenchSpec, world: int, local_ranks: int, backend: str, gpu: int | None = None, *,
               free: int | None = None) -> None:
    """Raise :class:`UsageError` when the run's buffers cannot fit in free memory (``free``:
    the bytes available, read from the machine when not given)."""
    largest = max(spec.sizes, default=0)
    if backend == "nccl":
        need = rank_bytes(spec, world)
        free = gpu_free(gpu or 0) if free is None else free
        where = f"GPU {gpu or 0} has {_gib(free or 0)} free"
        total = need
        per = f"{_gib(need)} per rank"
    else:
        need = host_rank_bytes(spec, world)
        free = host_available() if free is None else free
        where = f"the host has {_gib(free or 0)} available"
        total = need * local_ranks
        per = (f"{local_ranks} rank(s) on this host x {_gib(need)} (buffers {_gib(rank_bytes(spec, world))} x "
               f"{HOST_COPY_FACTOR:g} for gloo's copies, + {_gib(HOST_RANK_BASE)} per process) = {_gib(total)}")
    if free is not None and total + HEADROOM > free:
        raise UsageError(f"-e/--max-bytes: the largest message ({_gib(largest)}) needs {per} ({spec.dtype}, "
                         f"{', '.join(spec.collectives)}) + {_gib(HEADROOM)} headroom, and {where}; lower "
                         f"-e/--max-bytes or the ranks per host, or {OVERRIDE}")
