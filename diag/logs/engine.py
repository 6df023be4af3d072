"""The log engine's entry points: read files (in parallel where it pays) and build the document."""

from __future__ import annotations

import time

from llmdiag.logs import config as cfg
from llmdiag.logs import parallel
from llmdiag.logs.analyzer import LogAnalyzer, prefilter_regex
from llmdiag.logs import flight
from llmdiag.logs.diagnosis import build_document, join_flight_recorder
from llmdiag.logs.readers import ReadStats, resolve, scan


def analyze(paths: list[str], *, settings=None, chunk: int | None = None, workers: int | None = None,
            spill: bool = False, fr: str | None = None):
    """Read ``paths``; return the ``log-analysis`` document and the analyzer.

    With ``spill=True`` the analyzer's step table keeps every record in a temporary file for
    ``--csv`` / ``--parquet`` (``export.export_table``); call ``analyzer.table.close()`` after.
    """
    settings = settings or cfg.Settings()
    stats = ReadStats()
    files = resolve(paths, stats)
    analyzer = LogAnalyzer(settings, spill=spill)
    rx = prefilter_regex()
    t0 = time.monotonic()
    for f in files:
        kw = {"chunk": chunk} if chunk else {}
        if (workers is None or workers > 1) and parallel.worth_splitting(f):
            parallel.scan_parallel(f, analyzer, stats, workers=workers, chunk=chunk)
            continue
        analyzer.prime(f)
        scan(f, rx, analyzer, stats, **kw)
        analyzer.finish()
    doc = build_document(analyzer, stats, settings, elapsed_s=time.monotonic() - t0)
    fr_dir = fr or next((d for d in map(flight.beside, files) if d), None)
    if fr_dir:
        dumps, problems = flight.read_dir(fr_dir)
        doc["read"]["problems"].extend(problems)
        if dumps:
            ws = analyzer.extra.get("world_size")
            join_flight_recorder(doc, flight.analyze(dumps, ws if isinstance(ws, int) else None), fr_dir)
    return doc, analyzer


def analyze_paths(paths: list[str], *, settings=None, chunk: int | None = None, workers: int | None = None) -> dict:
    """Read ``paths`` and return the ``log-analysis`` document (see docs/analyze-log.md)."""
    doc, analyzer = analyze(paths, settings=settings, chunk=chunk, workers=workers)
    analyzer.table.close()
    return doc
