"""Rank- and position-dependent buffer contents, the results a correct collective must give,
and the count of elements that differ (#wrong).

Values are small integers, so sums over many ranks stay exact even in half / bfloat16: a
wrong element is a real transport or reduction error, not rounding. A swapped chunk, a stale
buffer or a message delivered to the wrong offset all change values, because the value
depends on both the sending rank and the element's position.
"""

from __future__ import annotations

import functools

DTYPE_NAMES = {
    # nccl-tests' type column name -> torch dtype attribute
    "float": "float32",
    "half": "float16",
    "bfloat16": "bfloat16",
    "double": "float64",
    "int8": "int8",
    "uint8": "uint8",
    "int32": "int32",
    "int64": "int64",
}
REDUCE_OPS = {"sum": "SUM", "prod": "PRODUCT", "min": "MIN", "max": "MAX", "avg": "AVG"}


def torch_dtype(name: str):
    import torch

    return getattr(torch, DTYPE_NAMES[name])


def element_size(name: str) -> int:
    return {"float": 4, "half": 2, "bfloat16": 2, "double": 8, "int8": 1, "uint8": 1, "int32": 4, "int64": 8}[name]


def reduce_op(name: str):
    import torch.distributed as dist

    return getattr(dist.ReduceOp, REDUCE_OPS[name])


def _is_unsigned(dtype: str) -> bool:
    return dtype == "uint8"


def values(rank: int, start: int, count: int, dtype: str, op: str, device):
    """Exact int64 values of ``rank``'s elements ``start .. start+count-1``.

    prod uses 1s and 2s (a product of n of them stays representable); everything else uses
    -8..8 (0..16 for unsigned types), so a sum over up to 32 ranks is exact in bfloat16.
    """
    import torch

    idx = torch.arange(start, start + count, dtype=torch.int64, device=device)
    if op == "prod":
        return (idx + rank) % 2 + 1
    base = (idx * 13 + rank * 7) % 17
    return base if _is_unsigned(dtype) else base - 8


#: elements per slice of a fill or a check: their int64/float64 temporaries (a few times 8
#: bytes per element) stay at tens of MiB, where a whole 1 GiB message made them 14x its size
CHUNK = 1 << 22


def chunks(count: int, step: int = CHUNK):
    """(start, stop) slices covering ``0 .. count``."""
    return ((s, min(s + step, count)) for s in range(0, count, step))


def fill(tensor, rank: int, start: int, dtype: str, op: str) -> None:
    """Write ``rank``'s pattern into ``tensor`` (positions ``start ..``), a slice at a time."""
    for s, e in chunks(tensor.numel()):
        tensor[s:e].copy_(values(rank, start + s, e - s, dtype, op, tensor.device).to(tensor.dtype))


def reduced(ranks: int, start: int, count: int, dtype: str, op: str, device):
    """What reducing the patterns of ranks 0..ranks-1 with ``op`` gives, in float64/int64."""
    import torch

    acc = None
    for r in range(ranks):
        v = values(r, start, count, dtype, op, device)
        if acc is None:
            acc = v.clone()
        elif op in ("sum", "avg"):
            acc += v
        elif op == "prod":
            acc *= v
        elif op == "min":
            acc = torch.minimum(acc, v)
        else:
            acc = torch.maximum(acc, v)
    if op == "avg":
        return acc.to(torch.float64) / ranks
    return acc


@functools.lru_cache(maxsize=None)
def _eps(dtype: str) -> float:
    import torch

    td = torch_dtype(dtype)
    return torch.finfo(td).eps if td.is_floating_point else 0.0


def count_wrong(got, expected, dtype: str, ranks: int) -> int:
    """Elements of ``got`` that differ from ``expected`` (exact for integers and exact sums).

    ``expected`` is cast to the buffer's dtype first, so integer wrap-around and float
    rounding of the expected value match what a correct collective produces. The float
    tolerance only matters for ``avg``, whose division may round differently per backend.
    """
    import torch

    want = expected.to(got.dtype)
    if not got.dtype.is_floating_point:
        return int((got != want).sum().item())
    g = got.to(torch.float64)
    w = want.to(torch.float64)
    tol = _eps(dtype) * ranks * torch.clamp(w.abs(), min=1.0)
    diff = (g - w).abs()
    # inf == inf (an overflowing product) is right; NaN anywhere is wrong.
    wrong = (diff > tol) & ~(torch.isinf(g) & (g == w))
    wrong |= torch.isnan(g)
    return int(wrong.sum().item())


def corrupt(tensor, elements: int) -> int:
    """Test hook: make the first ``elements`` values wrong (NaN for floats, +1 for integers,
    which differs from the right value even with wrap-around)."""
    k = min(int(elements), tensor.numel())
    if k > 0:
        if tensor.dtype.is_floating_point:
            tensor[:k] = float("nan")
        else:
            tensor[:k] += 1
    return k
