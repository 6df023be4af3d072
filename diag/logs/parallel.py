"""All cores on one big file: byte ranges analysed in worker processes, replayed here in order.

The file is cut into byte ranges (aligned to line starts, see ``readers.iter_chunks``), more
ranges than cores. A pool of forked workers, one per core, reads them in file order; each
returns its events and counters and writes its raw step records to a temporary file. This
process replays each range as soon as it is done, in file order, through the same duplicate
check, step table and streaming detectors: the result is the one a single pass gives, and
the replay (the only part that must run in order) overlaps with the reading of later ranges,
so the operating system balances the work over the cores whatever the mix of the log.
Line numbers are local to a range and shifted here by the lines of the ranges before.
Only plain files above ``MIN_BYTES`` are split (gzip streams cannot seek); a block message
that straddles a range boundary (a wrapped watchdog line, a ChildFailedError summary
hundreds of megabytes into a file) may be cut there — the price of the split.
"""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile

from llmdiag.logs.readers import ReadStats

MIN_BYTES = 64 << 20
#: about this many bytes per range (at least two ranges per worker, at most MAX_RANGES)
RANGE_BYTES = 48 << 20  # each range has a fixed cost (a fresh analyzer, priming, a spill file): 16 MiB took ~8 % more CPU
MAX_RANGES = 256
#: in a worker process: the templates it learned per file (see _work)
_TEMPLATES: dict[str, list] = {}


def worth_splitting(path: str) -> bool:
    if path == "-" or (os.cpu_count() or 1) < 2:
        return False
    try:
        if os.path.getsize(path) < MIN_BYTES:
            return False
        with open(path, "rb") as fh:
            from llmdiag.logs.compressed import sniff

            return sniff(fh.read(6)) is None  # a compressed stream is read in one piece
    except OSError:
        return False


def _work(args):
    path, start, end, chunk, spill_dir = args
    from llmdiag.logs.analyzer import LogAnalyzer, prefilter_regex
    from llmdiag.logs.readers import scan

    an, stats = LogAnalyzer(), ReadStats()
    # the progress-line templates this worker learned in its earlier ranges of the file: a range
    # then starts on the bulk path instead of parsing its first progress lines one by one (a
    # template is valid anywhere in the file, so the result is the same)
    if _TEMPLATES.get(path):
        an._templates[path] = list(_TEMPLATES[path])
    an.prime(path)
    fd, raw_path = tempfile.mkstemp(prefix="range-", suffix=".pkl", dir=spill_dir)
    an.raw = os.fdopen(fd, "wb")
    kw = {"chunk": chunk} if chunk else {}
    try:
        scan(path, prefilter_regex(), an, stats, start=start, end=end, **kw)
        an.finish(end_of_input=end >= os.path.getsize(path))  # a later range goes on with what this one left open
    finally:
        an.raw.close()
    an.raw = None
    _TEMPLATES[path] = list(an._templates.get(path, ()))
    an._templates = {}
    an.table = None  # the records travel in the raw file, not through the pipe
    return an, stats, raw_path


def scan_parallel(path: str, analyzer, stats: ReadStats, workers: int | None = None, chunk: int | None = None):
    """Ranges read by a pool of forked workers, replayed here in file order as they finish."""
    import multiprocessing as mp

    size = os.path.getsize(path)
    n = max(1, min(workers or os.cpu_count() or 1, 8))
    k = max(2 * n, min(MAX_RANGES, size // RANGE_BYTES))
    bounds = [size * i // k for i in range(k + 1)]
    analyzer.flush()
    stats.files.append(path)
    spill_dir = tempfile.mkdtemp(prefix="llmdiag-ranges-")
    offset = 0
    from llmdiag.util.procs import child_defaults

    pool = mp.get_context("fork").Pool(n, initializer=child_defaults)
    try:
        tasks = [(path, bounds[i], bounds[i + 1], chunk, spill_dir) for i in range(k)]
        for an, st, raw_path in pool.imap(_work, tasks):
            try:
                merge(analyzer, an, offset, raw_path, path)
            finally:
                os.unlink(raw_path)
            stats.bytes_read += st.bytes_read
            stats.candidate_lines += st.candidate_lines
            for p in st.problems:
                stats.problem(p["file"], p["kind"], p["message"], p["line"] + offset if p["line"] else None)
            if path in st.last_line:
                stats.last_line[path] = st.last_line[path]
            offset += st.lines
        pool.close()
    finally:
        pool.terminate()
        pool.join()
        shutil.rmtree(spill_dir, ignore_errors=True)
    analyzer.finish()
    stats.lines += offset
    stats.file_lines[path] = offset


def merge(dst, src, offset: int, raw_path: str, path: str) -> None:
    """Append ``src`` (the analyzer of a later range) to ``dst`` with lines shifted by ``offset``.

    Step records are replayed from the worker's raw file through ``dst.ingest``, so duplicate
    detection, the step table and the streaming detectors see one sequence, as in a single pass.
    """
    from llmdiag.logs.table import unpack

    for e in src.events:
        e.line += offset
        dst.events.append(e)
    fid = dst.table.file_id(path)
    with open(raw_path, "rb") as fh:
        while True:
            try:
                b = unpack(pickle.load(fh), read_only_empty=True)  # nothing below writes into an empty column
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
    dst.ranks_seen |= src.ranks_seen
