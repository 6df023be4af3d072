"""Port sampling: a bounded, evenly spread subset of a port range to test."""

from __future__ import annotations

MAX_TESTED = 128


def sample_ports(lo: int, hi: int, limit: int = MAX_TESTED) -> list[int]:
    """All ports of lo..hi if few, else ``limit`` spread evenly (both ends included)."""
    n = hi - lo + 1
    if n <= limit:
        return list(range(lo, hi + 1))
    step = (n - 1) / (limit - 1)
    return sorted({lo + round(i * step) for i in range(limit)})
