r"""The keyword prefilter run over whole chunks, on the fastest engine installed.

Engines, fastest first: the C kernel's keyword matcher (``_fastscan.keywords``, built at
install wherever a C compiler is found: it looks up one pair of bytes per position in a table
and finds the exact match spans), Hyperscan (``fast-logs`` extra: SIMD multi-literal matcher,
no match objects: its match ends only say where to look), RE2 (a DFA; the ``re``-compatible
module ``google-re2``, a default dependency), and the standard ``re`` as the fallback that is
always there. All of them yield the same matches: ``re`` matches at the starts the kernel
finds; Hyperscan's wrapper hands each hint to ``re``, which searches from the start of the
hinted line; so the reader sees exactly ``re``'s ``finditer`` sequence.
The kernel takes literal keywords and literals followed by ``\d+(?:\s|$)`` and led by ``:\d+``
(the NCCL return-code chain ``socket.cc:47 -> 3``); a prefilter with a pattern of any other
shape uses the next engine.
"""

from __future__ import annotations

import os
import re


class HyperscanPrefilter:
    """``finditer`` with the matches of ``re`` (``rx``), found from Hyperscan's match ends."""

    def __init__(self, parts: list[str], rx: re.Pattern[bytes]) -> None:
        import hyperscan  # type: ignore[import-not-found]

        self.rx = rx
        self.pattern = rx.pattern
        self.db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        # MULTILINE: '$' also before every newline, i.e. at least the ends that re finds
        self.db.compile(expressions=[p.encode() for p in parts], ids=list(range(len(parts))),
                        elements=len(parts), flags=hyperscan.HS_FLAG_MULTILINE)

    def search(self, buf: bytes, pos: int = 0):
        return self.rx.search(buf, pos)

    def finditer(self, buf: bytes, pos: int = 0):
        ends: list[int] = []

        def on_match(_id, _from, to, _flags, _ctx):
            ends.append(to)

        self.db.scan(buf, match_event_handler=on_match)
        ends.sort()
        cursor = pos
        for e in ends:
            if e <= cursor:
                continue
            # a match that ends at e starts on the line holding byte e-1 (keywords have no
            # newline; the return-code pattern may end with one, which belongs to that line)
            ls = buf.rfind(b"\n", 0, e - 1) + 1 if e > 1 else 0
            m = self.rx.search(buf, max(cursor, ls))
            if m is None:
                return
            yield m
            cursor = m.end() if m.end() > m.start() else m.end() + 1


#: the pattern tails and heads the kernel matches itself (bits of its ``tail`` codes): ``\d+`` then a
#: blank after the literal; ``:`` and digits before it (a source line: ``socket.cc:47 -> 3``)
_TAILS = {"": 0, r"\d+(?:\s|$)": 1}
_HEADS = {r":\d+": 2, "": 0}
#: bytes of text the anchors are chosen from (the first chunk the prefilter sees), and the
#: sample below which they are chosen again from a longer chunk (a first read of a few lines)
SAMPLE_BYTES = 1 << 20
SAMPLE_ENOUGH = 64 << 10


class KernelPrefilter:
    """``finditer`` with the matches of ``re`` (``rx``) at the starts the C kernel finds.

    The kernel looks at one pair of adjacent bytes per keyword, its anchor, at every position,
    and at the keyword only where its anchor occurs: any pair finds the same matches, a rare one
    finds them faster. The anchors are the pairs rarest in the first text scanned (a log's
    lines repeat their shape), chosen again while that text was shorter than SAMPLE_ENOUGH.
    """

    def __init__(self, parts: list[str], rx: re.Pattern[bytes]) -> None:
        if os.environ.get("LLMDIAG_NO_FASTSCAN"):  # as without a C compiler (bench, debugging)
            raise ImportError("LLMDIAG_NO_FASTSCAN is set")
        from llmdiag.logs import _fastscan  # ImportError: not built

        self.rx = rx
        self.pattern = rx.pattern
        self._scan = _fastscan.keywords
        lits = [_literal(part) for part in parts]
        self.keywords = tuple(lit for lit, _ in lits)
        self.tails = tuple(tail for _, tail in lits)
        # a kernel built from an older _fastscan.c lacks a head or tail code: ValueError here, not mid-read
        self._scan(b"", 0, self.keywords, (0,) * len(lits), self.tails)
        self.anchors: tuple[int, ...] | None = None
        self._sampled = -1  # bytes the anchors were chosen from

    def use_anchors(self, sample: bytes) -> None:
        """Anchors chosen from ``sample`` for good (tests; the reader's chunks choose them otherwise)."""
        self.anchors, self._sampled = self.choose_anchors(sample), SAMPLE_ENOUGH

    def choose_anchors(self, sample: bytes) -> tuple[int, ...]:
        """Per keyword, the offset of its pair of bytes that is rarest in ``sample``."""
        import numpy as np

        a = np.frombuffer(sample[:SAMPLE_BYTES], dtype=np.uint8).astype(np.int64)
        counts = np.bincount(a[:-1] | (a[1:] << 8), minlength=65536) if len(a) > 1 else np.zeros(65536, np.int64)
        return tuple(min(range(len(kw) - 1), key=lambda i, kw=kw: counts[kw[i] | (kw[i + 1] << 8)])
                     for kw in self.keywords)

    def search(self, buf: bytes, pos: int = 0):
        return self.rx.search(buf, pos)

    def finditer(self, buf: bytes, pos: int = 0, first_per_line: bool = False):
        """re's ``finditer`` from ``pos``; with ``first_per_line`` only the first match of each line
        (the reader's use: it reads a line once, from its first match, so a progress bar's thousand
        updates on one physical line cost one match object, not a thousand)."""
        if self._sampled < SAMPLE_ENOUGH and len(buf) > self._sampled:
            self.anchors, self._sampled = self.choose_anchors(buf), len(buf)
        spans = self._scan(buf, pos, self.keywords, self.anchors, self.tails, first_per_line)
        match = self.rx.match
        for start in memoryview(spans).cast("q")[::2]:
            m = match(buf, start)
            if m is not None:  # always: the kernel and re agree (tests/unit/logs/test_prefilter.py)
                yield m


def _literal(part: str) -> tuple[bytes, int]:
    """A prefilter part as (literal bytes, head and tail code); ValueError for a shape the kernel lacks."""
    for pre, hcode in _HEADS.items():
        if not part.startswith(pre):
            continue
        for tail, code in _TAILS.items():
            if not part.endswith(tail) or len(part) < len(pre) + len(tail):
                continue
            body = part[len(pre):len(part) - len(tail)]
            # a literal: no metacharacter outside an escape, and no escape of a letter or digit (\d, \b, \1)
            bare = re.sub(r"\\[^0-9A-Za-z]", "", body, flags=re.DOTALL)
            lit = re.sub(r"\\(.)", r"\1", body, flags=re.DOTALL)
            if (not re.search(r"[\\.^$*+?{}\[\]|()]", bare) and len(lit.encode()) >= 2 and "\n" not in lit
                    and not (hcode and lit[:1].isdigit())):
                return lit.encode(), code | hcode
    raise ValueError(f"not a literal the keyword kernel matches: {part!r}")


def compile_prefilter(parts: list[str], engine: str = "auto"):
    """One alternation of ``parts`` (regex sources) with ``finditer``/``search`` over bytes."""
    pattern = "|".join(parts).encode()
    rx = re.compile(pattern)
    if engine in ("auto", "kernel"):
        try:
            return KernelPrefilter(parts, rx)
        except (ImportError, ValueError):
            if engine == "kernel":
                raise
    if engine in ("auto", "hyperscan"):
        try:
            return HyperscanPrefilter(parts, rx)
        except ImportError:
            if engine == "hyperscan":
                raise
    if engine in ("auto", "re2"):
        try:
            import re2  # type: ignore[import-not-found]

            return re2.compile(pattern)
        except ImportError:
            if engine == "re2":
                raise
    return rx
