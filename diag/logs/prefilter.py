"""The keyword prefilter run over whole chunks, on the fastest engine installed.

Engines, fastest first (``fast-logs`` extra): Hyperscan (SIMD multi-literal matcher, no match
objects: its match ends only say where to look), RE2 (a DFA; the ``re``-compatible module
``google-re2``), and the standard ``re`` as the fallback that is always there. All three
yield the same matches: Hyperscan's wrapper hands each hint to ``re``, which searches from
the start of the hinted line, so the reader sees exactly ``re``'s ``finditer`` sequence.
"""

from __future__ import annotations

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


def compile_prefilter(parts: list[str], engine: str = "auto"):
    """One alternation of ``parts`` (regex sources) with ``finditer``/``search`` over bytes."""
    pattern = "|".join(parts).encode()
    rx = re.compile(pattern)
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
