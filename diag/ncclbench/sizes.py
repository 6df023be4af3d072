"""Message sizes as nccl-tests writes them: ``8``, ``1K``, ``16M``, ``1G`` (powers of 1024)."""

from __future__ import annotations

import re

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)


def parse_size(text: str | int) -> int:
    """``"16M"`` → 16777216. Accepts ``K``/``M``/``G``/``T`` with an optional ``B``/``iB``.

    Raises ValueError with a message naming the accepted forms.
    """
    if isinstance(text, bool):
        raise ValueError(f"{text!r} is not a size")
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"size {text} is negative")
        return text
    m = _SIZE_RE.match(str(text))
    if not m:
        raise ValueError(f"{text!r} is not a size (examples: 1024, 1K, 16M, 1G)")
    value = float(m.group(1)) * _UNITS[m.group(2).upper()]
    if value != int(value):
        raise ValueError(f"{text!r} is not a whole number of bytes")
    return int(value)


def format_size(n: int) -> str:
    """16777216 → ``"16M"``; sizes that are not a whole unit stay in bytes."""
    for unit in ("T", "G", "M", "K"):
        scale = _UNITS[unit]
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def size_sweep(min_bytes: int, max_bytes: int, step_factor: int) -> list[int]:
    """min, min×f, min×f², … up to and including max (nccl-tests' ``-b``/``-e``/``-f``).

    The caller has validated min <= max and factor >= 2 (or min == max).
    """
    sizes = []
    size = max(1, min_bytes)
    while size <= max_bytes:
        sizes.append(size)
        if step_factor <= 1:
            break
        size *= step_factor
    return sizes
