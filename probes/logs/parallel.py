"""Both cores on one big file: byte ranges analysed in worker processes, results merged.

This process reads the first range itself while forked workers read the others (ranges
are aligned to line starts, see ``readers.iter_chunks``). A worker sends back its events
and counters, and writes its raw step records to a temporary file that this process replays,
in file order, through the same duplicate check, step table and streaming detectors: the
result is the one a single pass gives. Line numbers are local to a range and shifted here by
the lines of the ranges before.
Only plain files above ``MIN_BYTES`` are split (gzip streams cannot seek); a block message
that straddles a range boundary (a wrapped watchdog line, a ChildFailedError summary
hundreds of megabytes into a file) may be cut there — the price of the split.
"""

from __future__ import annotations

import os
import pickle
import tempfile

from probes.logs.readers import ReadStats

MIN_BYTES = 64 << 20
#: this process's range, relative to a worker's: it also replays the workers' step records, but that
#: is cheap (~5 % of reading them), so it reads almost as much (measured balance on 2 cores)
PARENT_SHARE = 0.95


def worth_splitting(path: str) -> bool:
    if path == "-" or (os.cpu_count() or 1) < 2:
        return False
    try:
        if os.path.getsize(path) < MIN_BYTES:
            return False
        with open(path, "rb") as fh:
            return fh.read(2) != b"\x1f\x8b"
    except OSError:
        return False


def _work(args):
    path, start, end, chunk = args
    from probes.logs.analyzer import LogAnalyzer, prefilter_regex
    from probes.logs.readers import scan

    an, stats = LogAnalyzer(), ReadStats()
    fd, raw_path = tempfile.mkstemp(prefix="llmdiag-range-", suffix=".pkl")
    an.raw = os.fdopen(fd, "wb")
    kw = {"chunk": chunk} if chunk else {}
    try:
        scan(path, prefilter_regex(), an, stats, start=start, end=end, **kw)
        an.finish()
    finally:
        an.raw.close()
    an.raw = None
    an.table = None  # the records travel in the raw file, not through the pipe
    return an, stats, raw_path


def scan_parallel(path: str, analyzer, stats: ReadStats, workers: int | None = None, chunk: int | None = None):
    """Range 0 in this process while forked workers read the others; then their records replay here."""
    import multiprocessing as mp

    from probes.logs.analyzer import prefilter_regex
    from probes.logs.readers import scan

    size = os.path.getsize(path)
    n = max(1, min(workers or os.cpu_count() or 1, 8))
    # this process also replays the workers' records through the detectors: it reads a smaller range
    first = int(size * PARENT_SHARE / n) if n > 1 else size
    bounds = [0, first] + [first + (size - first) * i // (n - 1) for i in range(1, n)] if n > 1 else [0, size]
    kw = {"chunk": chunk} if chunk else {}
    analyzer.flush()
    ctx = mp.get_context("fork")
    pool = ctx.Pool(n - 1) if n > 1 else None
    try:
        pending = pool.map_async(_work, [(path, bounds[i], bounds[i + 1], chunk) for i in range(1, n)]) \
            if pool else None
        lines_before = stats.lines
        scan(path, prefilter_regex(), analyzer, stats, start=0, end=bounds[1], **kw)
        analyzer.finish()
        parts = pending.get() if pending else []
    finally:
        if pool is not None:
            pool.close()
            pool.join()
    offset = stats.lines - lines_before
    stats.lines = lines_before
    try:
        for an, st, raw_path in parts:
            merge(analyzer, an, offset, raw_path, path)
            stats.bytes_read += st.bytes_read
            stats.candidate_lines += st.candidate_lines
            for p in st.problems:
                stats.problem(p["file"], p["kind"], p["message"], p["line"] + offset if p["line"] else None)
            if path in st.last_line:
                stats.last_line[path] = st.last_line[path]
            offset += st.lines
    finally:
        for _an, _st, raw_path in parts:
            try:
                os.unlink(raw_path)
            except OSError:
                pass
    stats.lines += offset
    stats.file_lines[path] = offset


def merge(dst, src, offset: int, raw_path: str, path: str) -> None:
    """Append ``src`` (the analyzer of a later range) to ``dst`` with lines shifted by ``offset``.

    Step records are replayed from the worker's raw file through ``dst.ingest``, so duplicate
    detection, the step table and the streaming detectors see one sequence, as in a single pass.
    """
    from probes.logs.table import unpack

    for e in src.events:
        e.line += offset
        dst.events.append(e)
    fid = dst.table.file_id(path)
    with open(raw_path, "rb") as fh:
        while True:
            try:
                b = unpack(pickle.load(fh))
            except EOFError:
                break
            b["line"] += offset
            b["file"][:] = fid  # a worker reads one file
            dst.ingest(b)
    for ev in src.evals:
        ev["line"] += offset
        dst.evals.append(ev)
    dst.lines_with_loss += src.lines_with_loss
    dst.optimizer_step_lines += src.optimizer_step_lines
    for k, v in src.extra.items():
        dst.extra.setdefault(k, v)
