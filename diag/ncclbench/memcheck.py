"""Will the buffers fit? Checked before any rank starts (``-e 1T`` must be one clear line,
not a traceback from every rank's allocator).

A rank allocates, per collective, a send and a receive buffer at the largest count
(``Buffers``), and with ``-c 1`` the expected result of the check as large as the output. The
largest of those, times the ranks that share the memory (all local ranks share host memory
with gloo; each NCCL rank has its own GPU), must fit in what is free.
"""

from __future__ import annotations

import os

from llmdiag.errors import UsageError
from llmdiag.ncclbench.collectives import COLLECTIVES
from llmdiag.ncclbench.config import BenchSpec
from llmdiag.ncclbench.pattern import element_size

#: what the rest of the process needs besides the buffers (torch, gloo's own buffers)
HEADROOM = 512 << 20


def rank_bytes(spec: BenchSpec, n: int) -> int:
    """Bytes of buffers one rank of an ``n``-rank run allocates at most."""
    elsize = element_size(spec.dtype)
    worst = 0
    for name in spec.collectives:
        coll = COLLECTIVES[name]
        count = max((coll.count_for(s, elsize, n) for s in spec.sizes), default=0)
        send = count * (n if name in ("reduce_scatter", "all_to_all") else 1)
        recv = count * (n if name in ("all_gather", "all_to_all") else 1)
        worst = max(worst, (send + recv + (recv if spec.check else 0)) * elsize)
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


def check_fits(spec: BenchSpec, world: int, local_ranks: int, backend: str, gpu: int | None = None) -> None:
    """Raise :class:`UsageError` when the buffers of the run cannot fit in free memory."""
    need = rank_bytes(spec, world)
    largest = max(spec.sizes, default=0)
    if backend == "nccl":
        free = gpu_free(gpu or 0)
        where = f"GPU {gpu or 0} has {_gib(free)} free" if free is not None else ""
        total = need
    else:
        free = host_available()
        where = f"the host has {_gib(free)} available" if free is not None else ""
        total = need * local_ranks
    if free is not None and total + HEADROOM > free:
        per = f"{local_ranks} ranks x {_gib(need)}" if backend != "nccl" else f"{_gib(need)} per rank"
        raise UsageError(f"-e/--max-bytes: the largest message ({_gib(largest)}) needs buffers of {per} ({spec.dtype}, "
                         f"{', '.join(spec.collectives)}), and {where}; lower -e/--max-bytes")
