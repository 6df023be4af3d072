"""Reading logs fast and defensively: files, directories, globs, ``.gz``, ``-`` (stdin).

The scanner never looks at most lines. It reads large binary chunks, runs one combined
prefilter regex over the whole chunk (``finditer`` in C), and hands only the lines around
a hit to the detailed parsers; a consumer may ask for the next few lines too (a wrapped
message, a ChildFailedError block). Line numbers come from counting newlines between hits
(``bytes.count``, also C). Problems — unreadable files, truncated gzip, NUL bytes, invalid
UTF-8, megabyte lines — are counted in :class:`ReadStats`, never raised.
"""

from __future__ import annotations

import dataclasses
import glob
import gzip
import io
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

from llmdiag.logs.prefilter import KernelPrefilter

CHUNK = 2 << 20  # NumPy temporaries of a 2 MiB chunk stay in cache: ~25 % less CPU than 8 MiB
#: lines that start a multi-line block (a ChildFailedError summary, a wrapped watchdog line)
BLOCK_TRIGGERS = (b"ChildFailedError", b"Root Cause", b"WorkNCCL(", b"operation timeout:", b" FAILED")
FIRST_CHUNK = 64 << 10
#: Longest line handed to the parsers; longer ones are cut (and counted).
MAX_LINE = 64 << 10
_LOG_SUFFIXES = (".log", ".txt", ".out", ".err", ".gz", ".bz2", ".xz", ".zst", ".jsonl", ".json", ".stdout", ".stderr")


@dataclasses.dataclass
class ReadStats:
    files: list[str] = dataclasses.field(default_factory=list)
    bytes_read: int = 0
    lines: int = 0
    candidate_lines: int = 0
    problems: list[dict] = dataclasses.field(default_factory=list)
    last_line: dict[str, str] = dataclasses.field(default_factory=dict)
    file_lines: dict[str, int] = dataclasses.field(default_factory=dict)

    def problem(self, file: str, kind: str, message: str, line: int | None = None) -> None:
        if len(self.problems) < 200:  # junk files can produce millions; a sample is enough
            self.problems.append({"file": file, "kind": kind, "line": line, "message": message})


def resolve(paths: Iterable[str], stats: ReadStats) -> list[str]:
    """Expand directories (log-like files inside, sorted) and globs; keep '-' for stdin."""
    out: list[str] = []
    for p in paths:
        if p == "-":
            out.append(p)
            continue
        matches = sorted(glob.glob(p)) if any(c in p for c in "*?[") else [p]
        if not matches:
            stats.problem(p, "missing", "no file matches this pattern")
        for m in matches:
            if os.path.isdir(m):
                found = sorted(str(f) for f in Path(m).rglob("*") if f.is_file() and f.name.endswith(_LOG_SUFFIXES))
                if not found:
                    stats.problem(m, "empty-dir", "directory holds no log files")
                out.extend(found)
            elif os.path.exists(m):
                out.append(m)
            else:
                stats.problem(m, "missing", "no such file")
    return out


def open_binary(path: str) -> io.BufferedIOBase:
    if path == "-":
        return sys.stdin.buffer
    from llmdiag.logs.compressed import open_compressed, sniff

    fh = open(path, "rb")  # noqa: SIM115 - closed by the caller
    fmt = sniff(fh.peek(6)[:6] if hasattr(fh, "peek") else b"")
    if fmt:  # gzip, bzip2, xz, zstd: read to the last recoverable byte (logs/compressed.py)
        try:
            return open_compressed(fh, fmt)  # type: ignore[return-value]
        except OSError:
            fh.close()
            raise
    return fh


def iter_chunks(path: str, stats: ReadStats, chunk: int = CHUNK, start: int = 0,
                end: int | None = None) -> Iterator[bytes]:
    """Chunks that end at a newline (the remainder travels into the next chunk).

    With a byte range (plain files only) reading starts at the first line that begins at or
    after ``start`` and stops after the line that contains byte ``end - 1``, so adjacent
    ranges cover every line exactly once.
    """
    try:
        fh = open_binary(path)
    except OSError as exc:
        stats.problem(path, "unreadable", f"{type(exc).__name__}: {exc.strerror or exc}")
        return
    rest = b""
    long_len, head = 0, b""  # an enormous line being skipped: its length so far, its first MAX_LINE bytes
    # the first read is small: the analyzer learns a file's progress-line template from its
    # first progress line, and every later chunk can then take those lines in bulk
    size = min(chunk, FIRST_CHUNK)
    try:
        if start:
            fh.seek(start - 1)
            if fh.read(1) != b"\n":
                fh.readline()
        pos = fh.tell() if end is not None else 0  # stdin and gzip streams are never split
        while True:
            try:
                if end is not None and pos >= end:
                    data = b""
                elif end is not None:
                    data = fh.read(min(size, end - pos))
                    pos += len(data)
                    if pos >= end and data and not data.endswith(b"\n"):
                        data += fh.readline()
                else:
                    data = fh.read(size)
                size = chunk
            except (EOFError, gzip.BadGzipFile, OSError, ValueError) as exc:
                stats.problem(path, "truncated", f"stopped reading: {type(exc).__name__}: {exc}")
                data = b""
            if not data:
                break
            stats.bytes_read += len(data)
            cut = data.rfind(b"\n") + 1
            if cut == 0 and len(rest) + len(data) < 4 * chunk:
                rest += data
                continue
            if cut == 0:  # one enormous line: keep its head for the parsers, count (and drop) the rest
                head = head if long_len else bytes((rest + data)[:MAX_LINE])
                long_len += len(rest) + len(data)
                rest = b""
                continue
            if long_len:  # ... until it ends in this read: reported with its true length
                nl = data.find(b"\n")
                stats.problem(path, "long-line", f"line of {long_len + len(rest) + nl} bytes cut to {MAX_LINE}")
                rest, data, cut, long_len = head, data[nl:], cut - nl, 0
            # one copy per chunk: the carried-over partial line and this read up to its last newline
            out = rest + data if cut == len(data) else b"".join((rest, memoryview(data)[:cut]))
            rest = data[cut:]
            yield out
        if long_len:
            stats.problem(path, "long-line", f"line of {long_len + len(rest)} bytes cut to {MAX_LINE}")
            rest = head
        if rest:
            yield rest
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()


#: consumer(file, lineno, text) -> how many of the following lines it wants to see as well.
Consumer = Callable[[str, int, str], int]


def decode(raw: bytes, path: str, lineno: int, stats: ReadStats) -> str:
    if len(raw) > MAX_LINE:
        stats.problem(path, "long-line", f"line of {len(raw)} bytes cut to {MAX_LINE}", lineno)
        raw = raw[:MAX_LINE]
    if b"\x00" in raw:
        stats.problem(path, "binary", "NUL bytes in line (binary data)", lineno)
        raw = raw.replace(b"\x00", b"")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        stats.problem(path, "encoding", "invalid UTF-8 replaced", lineno)
        return raw.decode("utf-8", errors="replace")


def _line_bounds(buf: bytes, start: int, end: int) -> tuple[int, int]:
    """The physical line around [start, end); a carriage return also ends a progress-bar segment."""
    ls = buf.rfind(b"\n", 0, start) + 1
    cr = buf.rfind(b"\r", ls, start)  # only within this physical line: a full rfind would be quadratic
    if cr >= 0:
        ls = cr + 1
    le_n = buf.find(b"\n", end)
    le_n = len(buf) if le_n < 0 else le_n
    le_r = buf.find(b"\r", end, le_n)
    return ls, (le_r if le_r >= 0 else le_n)


def scan(path: str, prefilter: re.Pattern[bytes], consumer: Consumer, stats: ReadStats,
         chunk: int = CHUNK, start: int = 0, end: int | None = None) -> None:
    """Feed every prefilter-matching line of ``path`` (and requested followers) to ``consumer``.

    A consumer with a ``fast_path(path, buf, base)`` method (the analyzer's bulk progress-line
    template, see probes/logs/bulk.py) may take a chunk's progress lines in one go: it returns
    the chunk with those lines emptied and a feed that receives them in line order, interleaved
    with the remaining candidate lines; or None to read the chunk line by line.
    """
    if not start:
        stats.files.append(path)
    fast = getattr(consumer, "fast_path", None)
    base = 0  # lines before the current chunk
    want = 0  # following lines the consumer still wants (may span chunks)
    last = b""
    for buf in iter_chunks(path, stats, chunk, start, end):
        got = fast(path, buf, base) if fast is not None and not want and buf.endswith(b"\n") else None
        if got is None:
            want = _scan_buffer(path, buf, base, want, prefilter, consumer, stats)
        else:
            view, feed = got
            stop = _scan_buffer(path, view, base, 0, prefilter, consumer, stats, feed)
            stats.candidate_lines += feed.taken
            if stop:  # a block starts on line `n`: read the rest of the original chunk line by line
                n, delta = stop
                k = n - base - 1  # lines of the chunk before it
                at = 0 if k == 0 else int(np.flatnonzero(np.frombuffer(buf, dtype=np.uint8) == 10)[k - 1]) + 1
                want = _scan_buffer(path, buf[at + delta:], base + k, 0, prefilter, consumer, stats)
            else:
                want = 0
        base += (got[1].newlines if got is not None else buf.count(b"\n")) + (0 if buf.endswith(b"\n") else 1)
        end = len(buf)
        while end and buf[end - 1] in (10, 13):  # the last non-empty line, without copying the chunk
            end -= 1
        if end:
            last = buf[max(buf.rfind(b"\n", 0, end) + 1, end - 4096):end]
    stats.lines += base
    stats.file_lines[path] = base
    if last:
        stats.last_line[path] = decode(last, path, base, stats)


#: what a progress bar's redraw prints (tqdm's "12%|", rich's bar, tqdm's count without a total: "10it [00:10, ")
BAR_MARKS = (b"%|", "━".encode(), b"it [")


def _bar_line(buf: bytes, le: int, line_end: int) -> bool:
    """The line's last redraw is a progress bar (a Lightning / tqdm bar redrawn to the end), not a record that
    ``tqdm.write`` printed after the bar's updates (that one is the line's record: bulk templates take it)."""
    end = line_end
    while end > le and buf[end - 1] == 13:
        end -= 1
    last = buf[buf.rfind(b"\r", le, end) + 1:end]
    return any(m in last for m in BAR_MARKS)


def _redraws(path: str, n: int, buf: bytes, ls: int, le: int, line_end: int, prefilter, consumer: Consumer,
             stats: ReadStats) -> int:
    """Every redraw of a progress bar's line (segments between carriage returns) that the prefilter matches,
    from the first matching one at ``[ls, le)``: each is a record (the keyword kernel stops at a line's first
    match). A segment that another one follows keeps its '\r', so the consumer knows a redraw may replace it."""
    whole = getattr(consumer, "bar_line", None)
    if whole is not None:  # every redraw at once (the consumer says None where it cannot)
        # the whole physical line (a bar's line is long by nature: 1000 redraws are 100 KiB, not a cut case)
        got = whole(path, n, buf[ls:line_end])
        if got is not None:
            stats.candidate_lines += max(0, got - 1)  # the first redraw is counted already
            return 0
    rx = getattr(prefilter, "rx", prefilter)
    want = consumer(path, n, decode(buf[ls:le + 1], path, n, stats))
    seg = le + 1
    while seg < line_end and not want:
        cr = buf.find(b"\r", seg, line_end)
        seg_end = line_end if cr < 0 else cr
        if seg_end > seg and rx.search(buf, seg, seg_end) is not None:
            last = cr < 0 or cr + 1 >= line_end
            stats.candidate_lines += 1
            want = consumer(path, n, decode(buf[seg:seg_end] if last else buf[seg:seg_end + 1], path, n, stats))
        seg = seg_end + 1
    return want


def _scan_buffer(path: str, buf: bytes, base: int, want: int, prefilter, consumer: Consumer, stats: ReadStats,
                 feed=None) -> int:
    """One chunk: candidates (and followers) to the consumer; returns the lines still wanted.

    With a bulk ``feed`` (``buf`` then has its template lines emptied) it returns instead, for
    a candidate that would start a multi-line block, its line number and offset in its line,
    before handing it over; or 0 when the chunk is done.
    """
    counted_to = 0
    newlines = 0

    def number(at: int) -> int:
        nonlocal counted_to, newlines
        newlines += buf.count(b"\n", counted_to, at)
        counted_to = at
        return base + newlines + 1

    def follow(pos: int) -> int:
        nonlocal want
        while want and pos < len(buf):
            end = buf.find(b"\n", pos)
            end = len(buf) if end < 0 else end
            n = number(pos)
            if feed is None or not feed.holds(n):  # a template line the feed counts itself (emptied in ``buf``)
                stats.candidate_lines += 1
            want = max(want - 1, consumer(path, n, decode(buf[pos:end].rstrip(b"\r"), path, n, stats)))
            pos = end + 1
        return pos

    pos = follow(0)
    # the first match of a line is all this loop reads of it (it then goes on at the next line)
    hits = prefilter.finditer(buf, pos, True) if isinstance(prefilter, KernelPrefilter) else prefilter.finditer(buf, pos)
    for m in hits:
        if m.start() < pos:
            continue
        ls, le = _line_bounds(buf, m.start(), m.end())
        n = number(ls)
        stats.candidate_lines += 1
        end = buf.find(b"\n", le)
        line_end = len(buf) if end < 0 else end
        if feed is not None:
            feed.until(n)
            # a block may start in a later redraw of the line too (each redraw is read, see _redraws)
            if any(t in buf[ls:line_end if buf[le:le + 1] == b"\r" else le] for t in BLOCK_TRIGGERS):
                stats.candidate_lines -= 1
                return n, ls - (buf.rfind(b"\n", 0, ls) + 1)
        if le + 1 < line_end and buf[le] == 13 and _bar_line(buf, le, line_end):
            want = _redraws(path, n, buf, ls, le, line_end, prefilter, consumer, stats)
        else:
            want = consumer(path, n, decode(buf[ls:le], path, n, stats))
        pos = follow(len(buf) if end < 0 else end + 1)
    if feed is not None:
        feed.until(None)
        return 0
    return want
