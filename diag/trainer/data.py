"""Token streams the trainer reads: synthetic, or a memory-mapped pre-tokenised file.

Both are *positional*: the batch of step ``s`` on rank ``r`` is a pure function of
(seed, s, r). The data position saved in a checkpoint is therefore just the step, and a resumed
run sees exactly the batches an uninterrupted run would have seen.

Token file format (little-endian), written by ``prepare.py``::

    offset 0   8 bytes  magic b"LLMDTOK\\0"
    offset 8   u32      format version (1)
    offset 12  u32      bytes per token: 2 (uint16) or 4 (uint32)
    offset 16  u64      number of tokens
    offset 24  8 bytes  reserved (zero)
    offset 32  tokens
"""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

import numpy as np

MAGIC = b"LLMDTOK\0"
VERSION = 1
HEADER = struct.Struct("<8sIIQ8x")  # 32 bytes
DTYPES = {2: np.uint16, 4: np.uint32}


class DataError(ValueError):
    """A token file that is not in the format above; the message says what is wrong."""


@dataclasses.dataclass(frozen=True)
class Header:
    version: int
    token_bytes: int
    count: int

    @property
    def dtype(self):
        return DTYPES[self.token_bytes]


def dtype_for_vocab(vocab_size: int) -> int:
    """Bytes per token that hold every id below ``vocab_size``."""
    return 2 if vocab_size <= 65536 else 4


def pack_header(token_bytes: int, count: int) -> bytes:
    return HEADER.pack(MAGIC, VERSION, token_bytes, count)


def read_header(path: str | Path) -> Header:
    p = Path(path)
    with p.open("rb") as f:
        raw = f.read(HEADER.size)
    if len(raw) < HEADER.size:
        raise DataError(f"{p}: {len(raw)} bytes, shorter than the {HEADER.size}-byte header")
    magic, version, token_bytes, count = HEADER.unpack(raw)
    if magic != MAGIC:
        raise DataError(f"{p}: not an llmdiag token file (magic {magic!r}, expected {MAGIC!r})")
    if version != VERSION:
        raise DataError(f"{p}: format version {version}, this llmdiag reads version {VERSION}")
    if token_bytes not in DTYPES:
        raise DataError(f"{p}: {token_bytes} bytes per token, expected 2 or 4")
    size = p.stat().st_size
    if size != HEADER.size + count * token_bytes:
        raise DataError(
            f"{p}: header promises {count} tokens ({HEADER.size + count * token_bytes} bytes) "
            f"but the file has {size} bytes (truncated or still being written?)"
        )
    return Header(version, token_bytes, count)


class SyntheticTokens:
    """Learnable synthetic sequences: arithmetic progressions modulo the vocabulary.

    Each row starts at a random token and advances by a random stride from a small set, so the
    loss of a working model falls steadily within a few dozen steps (a broken step does not).
    """

    def __init__(self, vocab_size: int, seq_len: int, seed: int = 0, strides: int = 4):
        self.vocab_size, self.seq_len, self.seed, self.strides = vocab_size, seq_len, seed, strides

    def batch(self, step: int, rank: int, batch_size: int):
        import torch

        g = torch.Generator().manual_seed(_mix(self.seed, step, rank))
        start = torch.randint(0, self.vocab_size, (batch_size, 1), generator=g)
        stride = torch.randint(1, self.strides + 1, (batch_size, 1), generator=g)
        seq = (start + stride * torch.arange(self.seq_len + 1)) % self.vocab_size
        return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()


class TokenFile:
    """Random windows of a memory-mapped token file (the OS pages in only what is read)."""

    def __init__(self, path: str | Path, seq_len: int, seed: int = 0, vocab_size: int | None = None):
        self.path = Path(path)
        self.header = read_header(self.path)
        self.seq_len, self.seed = seq_len, seed
        if self.header.count < seq_len + 1:
            raise DataError(f"{self.path}: {self.header.count} tokens, fewer than one sequence of {seq_len + 1}")
        self.tokens = np.memmap(self.path, dtype=self.header.dtype, mode="r", offset=HEADER.size,
                                shape=(self.header.count,))
        if vocab_size is not None and self.header.count:
            top = int(self.tokens.max())
            if top >= vocab_size:
                raise DataError(f"{self.path}: token id {top} does not fit the model's vocabulary of {vocab_size}")

    def batch(self, step: int, rank: int, batch_size: int):
        import torch

        g = torch.Generator().manual_seed(_mix(self.seed, step, rank))
        starts = torch.randint(0, self.header.count - self.seq_len, (batch_size,), generator=g).tolist()
        rows = np.stack([np.asarray(self.tokens[s : s + self.seq_len + 1], dtype=np.int64) for s in starts])
        t = torch.from_numpy(rows)
        return t[:, :-1].contiguous(), t[:, 1:].contiguous()


def _mix(seed: int, step: int, rank: int) -> int:
    """One generator seed per (seed, step, rank); distinct for every triple we will meet."""
    return (seed * 1_000_003 + step) * 65_537 + rank


def open_dataset(spec: str | None, vocab_size: int, seq_len: int, seed: int):
    """``None`` or ``"synthetic"`` → :class:`SyntheticTokens`; a path → :class:`TokenFile`."""
    if spec in (None, "", "synthetic"):
        return SyntheticTokens(vocab_size, seq_len, seed)
    return TokenFile(spec, seq_len, seed, vocab_size)
