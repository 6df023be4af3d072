"""The per-step table, streamed: records arrive in column batches and are never all kept.

A 2 GB log holds millions of steps; keeping them (and the lists an end-of-run anomaly pass
builds from them) cost gigabytes. :class:`StepStore` keeps only what the report needs:

- the first ``HEAD_ROWS`` rows for the JSON ``steps`` list,
- a bounded, evenly thinned sample of (x, loss, grad norm) for ``--plot``,
- per rank, a :class:`~llmdiag.logs.series.RankSeries` (running metrics and streaming anomaly
  detectors with bounded windows),
- with ``spill=True`` (``--csv`` / ``--parquet``) every batch appended to a temporary file
  that the export streams back.

A batch is a dict of NumPy columns: ``FLOAT_COLS`` as float64 (NaN = not printed) and
``INT_COLS`` as int64 (``NONE`` = absent); ``file`` is an index into ``StepStore.files``.
Single records from the per-line parsers are buffered and converted in batches too.
"""

from __future__ import annotations

import math
import os
import pickle
import tempfile

import numpy as np

from llmdiag.logs.columns import FLOAT_COLS, INT_COLS, NONE

HEAD_ROWS = 5000
#: rows kept for the plot; beyond this the sample is thinned (every other row dropped)
PLOT_ROWS = 20000
#: single records from the per-line parsers buffered before they become a batch
PENDING_ROWS = 4096


_INT64_MIN, _INT64_MAX = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)


def _small_codes(col: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct values of an int64 column (ranks, file ids: a few) and each row's index among them."""
    uniq = np.unique(col)
    return uniq, np.searchsorted(uniq, col)


def empty_batch(n: int = 0) -> dict:
    b = {c: np.full(n, math.nan) for c in FLOAT_COLS}
    b.update({c: np.full(n, NONE, dtype=np.int64) for c in INT_COLS})
    return b


def batch_len(b: dict) -> int:
    return len(b["line"])


def take(b: dict, sel) -> dict:
    """Rows ``sel`` (a slice, boolean mask or index array) of batch ``b``."""
    return {c: a[sel] for c, a in b.items()}


def concat(batches: list[dict]) -> dict:
    """Batches (all with the same columns) one after another, as one."""
    if len(batches) == 1:
        return batches[0]
    return {c: np.concatenate([b[c] for b in batches]) for c in batches[0]}


def rows_to_batch(rows: list[tuple]) -> dict:
    """(rec, line, rank, ts, file_id) tuples from the per-line path → one batch."""
    n = len(rows)
    b = {}
    for c in FLOAT_COLS:
        if c == "ts":
            b[c] = np.array([math.nan if r[3] is None else r[3] for r in rows], dtype=np.float64)
        else:
            b[c] = np.array([float(v) if (v := r[0].get(c)) is not None else math.nan for r in rows],
                            dtype=np.float64)
    for c in ("step", "iter"):  # a counter beyond int64 (a mangled line's "step=1e19") is no counter
        b[c] = np.array([NONE if (v := r[0].get(c)) is None or not _INT64_MIN < int(v) <= _INT64_MAX else int(v)
                         for r in rows], dtype=np.int64)
    b["rank"] = np.array([NONE if r[2] is None else r[2] for r in rows], dtype=np.int64)
    b["line"] = np.array([r[1] for r in rows], dtype=np.int64)
    b["file"] = np.array([r[4] for r in rows], dtype=np.int64)
    b["has_loss"] = np.array([int("loss" in r[0]) for r in rows], dtype=np.int64)
    b["has_grad_norm"] = np.array([int("grad_norm" in r[0]) for r in rows], dtype=np.int64)
    assert all(len(a) == n for a in b.values())
    return b


def pack(b: dict) -> dict:
    """A batch without its empty columns (most formats print a few of the fields), and its constant ones as
    one value (a file id, a rank, an epoch, a learning rate, one line's bar redraws), for spilling: a parallel
    worker's records cross to the main process through a file, so its bytes are written and read back."""
    out: dict = {"_n": batch_len(b)}
    for c, a in b.items():
        if c in FLOAT_COLS:
            if np.isnan(a).all():
                continue
            same = a.view(np.int64) == a[:1].view(np.int64)  # bit for bit: -0.0 is not 0.0
        elif (a == NONE).all():
            continue
        else:
            same = a == a[0]
        out[c] = a[:1].copy() if len(a) > 1 and same.all() else a
    return out


def unpack(p: dict, read_only_empty: bool = False) -> dict:
    """A packed batch with its empty and constant columns again (only those are allocated).

    With ``read_only_empty`` an empty column is one read-only value broadcast to the batch's length, not
    allocated (fresh pages for a dozen absent columns of every batch were a fifth of the parallel replay)."""
    n = p["_n"]
    b = {c: _column(p, c, n, math.nan, np.float64, read_only_empty) for c in FLOAT_COLS}
    b.update((c, _column(p, c, n, NONE, np.int64, read_only_empty)) for c in INT_COLS)
    return b


def _column(p: dict, c: str, n: int, empty, dtype, read_only_empty: bool) -> np.ndarray:
    a = p.get(c)
    if a is None:
        return np.broadcast_to(np.array(empty, dtype=dtype), n) if read_only_empty else np.full(n, empty, dtype=dtype)
    return a if len(a) == n else np.full(n, a[0], dtype=a.dtype)


def _json_float(v: float) -> float | str:
    """The JSON document spells a printed NaN / Inf as a string."""
    if v != v:
        return "nan"
    return ("inf" if v > 0 else "-inf") if v in (math.inf, -math.inf) else v


def head_rows(b: dict, k: int, files: list[str]) -> list[dict]:
    """The first ``k`` rows as the JSON ``steps`` entries (None = absent, "nan" = printed NaN)."""
    cols: dict[str, list] = {}
    for c in ("step", "iter", "rank"):
        cols[c] = [None if v == NONE else v for v in b[c][:k].tolist()]
    for c in FLOAT_COLS:
        col = b[c][:k]
        vals = col.tolist()
        if c in ("loss", "grad_norm"):  # a printed NaN stays (as "nan"); an absent value is None
            has = b["has_" + c][:k].tolist()
            if np.isfinite(col).all():
                cols[c] = [v if h else None for v, h in zip(vals, has)]
            else:
                cols[c] = [_json_float(v) if h else None for v, h in zip(vals, has)]
        elif np.isnan(col).all():
            cols[c] = [None] * len(vals)
        elif np.isfinite(col).all():
            cols[c] = vals
        else:
            cols[c] = [None if v != v else _json_float(v) for v in vals]
    cols["line"] = b["line"][:k].tolist()
    cols["file"] = [files[f] for f in b["file"][:k].tolist()]
    names = list(cols)
    return [dict(zip(names, row)) for row in zip(*cols.values())]


class StepStore:
    def __init__(self, settings=None, spill: bool = False) -> None:
        from llmdiag.logs.config import Settings
        from llmdiag.logs.detectors import NanDetector

        self.settings = settings or Settings()
        self.files: list[str] = []
        self._file_ids: dict[str, int] = {}
        self.total = 0
        self.head: list[dict] = []
        self.counts: dict[int, int] = {}
        self.series: dict[int, object] = {}
        #: (file id, rank) -> the last step (else iteration) of that file's rows of that rank: each rank's
        #: progress, also where one file per rank names no rank (see diagnosis.stream_progress)
        self.last_key: dict[tuple[int, int], int] = {}
        self.all_nan = NanDetector()
        self._plot: dict[str, np.ndarray] = {"x": np.empty(0), "loss": np.empty(0), "grad_norm": np.empty(0)}
        self._plot_stride = 1
        self._plot_seen = 0
        self.spill_path: str | None = None
        self._spill_fh = None
        if spill:
            fd, self.spill_path = tempfile.mkstemp(prefix="llmdiag-steps-", suffix=".pkl")
            self._spill_fh = os.fdopen(fd, "wb")

    # -- input -----------------------------------------------------------------------------
    def file_id(self, file: str) -> int:
        fid = self._file_ids.get(file)
        if fid is None:
            fid = self._file_ids[file] = len(self.files)
            self.files.append(file)
        return fid

    def __len__(self) -> int:
        return self.total

    def add_batch(self, b: dict) -> None:
        """Append a batch (file ids already this store's, duplicates already dropped)."""
        if batch_len(b):
            self._ingest(b)

    def _ingest(self, b: dict) -> None:
        from llmdiag.logs.series import RankSeries

        n = batch_len(b)
        if len(self.head) < HEAD_ROWS:
            self.head += head_rows(b, min(n, HEAD_ROWS - len(self.head)), self.files)
        if self._spill_fh is not None:
            pickle.dump(pack(b), self._spill_fh, protocol=pickle.HIGHEST_PROTOCOL)
        self._sample_plot(b)
        self.total += n
        self.all_nan.feed(b, self.files)
        ranks = b["rank"]
        first = int(ranks[0])
        if (ranks == first).all():
            groups = [(first, b)]
        else:  # interleaved ranks: one stable sort by rank, then each rank's rows are a slice (log order kept)
            order = np.argsort(ranks, kind="stable")
            by_rank = take(b, order)
            sr = by_rank["rank"]
            cuts = [0, *(np.flatnonzero(sr[1:] != sr[:-1]) + 1).tolist(), n]
            groups = [(int(sr[a]), take(by_rank, slice(a, z))) for a, z in zip(cuts, cuts[1:])]
        for r, sub in groups:
            self.counts[r] = self.counts.get(r, 0) + batch_len(sub)
            s = self.series.get(r)
            if s is None:
                s = self.series[r] = RankSeries(self.settings)
            s.feed(sub, self.files)

    def note_progress(self, b: dict) -> None:
        """Each (file, rank) stream's last step in batch ``b``, duplicates included (a duplicate is no
        further than the step it repeats; rank-less files of one run are not each other's duplicates)."""
        keys = np.where(b["step"] != NONE, b["step"], b["iter"])
        ok = keys != NONE
        if not ok.any():
            return
        fids, ranks = b["file"][ok], b["rank"][ok]
        keys = keys[ok]
        if (fids == fids[0]).all() and (ranks == ranks[0]).all():
            self.last_key[(int(fids[0]), int(ranks[0]))] = int(keys[-1])
            return
        # each (file, rank) pair as one integer, in the pairs' sorted order (np.unique over rows, axis=0, sorts
        # them as opaque bytes: 0.5 s per million rows of eight interleaved ranks)
        fu, fi = _small_codes(fids)
        ru, ri = _small_codes(ranks)
        last = np.zeros(len(fu) * len(ru), dtype=np.int64)
        np.maximum.at(last, fi * len(ru) + ri, np.arange(1, len(keys) + 1))  # 1 + the last row of each pair
        for code in np.flatnonzero(last).tolist():
            self.last_key[(int(fu[code // len(ru)]), int(ru[code % len(ru)]))] = int(keys[last[code] - 1])

    def _sample_plot(self, b: dict) -> None:
        x = np.where(b["step"] != NONE, b["step"], b["iter"]).astype(np.float64)
        idx = np.arange(self._plot_seen, self._plot_seen + batch_len(b))
        x = np.where(x == NONE, idx, x)  # the plot's fallback x is the row number
        keep = (idx % self._plot_stride) == 0
        loss = np.where(b["has_loss"] == 1, b["loss"], math.nan)
        gn = np.where(b["has_grad_norm"] == 1, b["grad_norm"], math.nan)
        for k, v in (("x", x), ("loss", loss), ("grad_norm", gn)):
            self._plot[k] = np.concatenate([self._plot[k], v[keep]])
        self._plot_seen += batch_len(b)
        while len(self._plot["x"]) > PLOT_ROWS:
            self._plot = {k: v[::2] for k, v in self._plot.items()}
            self._plot_stride *= 2

    # -- output ----------------------------------------------------------------------------
    def ranks(self) -> list[int | None]:
        return [None if r == NONE else r for r in sorted(self.counts)]

    def primary_rank(self) -> int | None:
        """The rank with the most records (ties: no rank, then the lowest rank)."""
        if not self.counts:
            return None
        best = max(self.counts.items(), key=lambda kv: (kv[1], -kv[0]))[0]
        return None if best == NONE else best

    def series_of(self, rank: int | None):
        return self.series.get(NONE if rank is None else rank)

    def plot_sample(self) -> dict[str, np.ndarray]:
        return self._plot

    def iter_batches(self):
        """Every batch again, in order (needs ``spill=True``)."""
        if self.spill_path is None:
            raise RuntimeError("the step table was not spilled (StepStore(spill=True))")
        if self._spill_fh is not None:
            self._spill_fh.flush()
        with open(self.spill_path, "rb") as fh:
            while True:
                try:
                    yield unpack(pickle.load(fh))
                except EOFError:
                    return

    def close(self) -> None:
        if self._spill_fh is not None:
            self._spill_fh.close()
            self._spill_fh = None
        if self.spill_path is not None:
            try:
                os.unlink(self.spill_path)
            except OSError:
                pass
            self.spill_path = None
