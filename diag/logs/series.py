"""One rank's training curve, streamed: the running metrics summary and the detectors.

:class:`RankSeries` is what the step table keeps per rank: :class:`RankMetrics` (first /
last / min / max / median values of the ``metrics`` summary, accumulated batch by batch) and
every detector of :mod:`llmdiag.logs.detectors`. Medians over a whole run (typical step time)
are exact up to ``MedianSketch.CAP`` values and then computed over an evenly thinned sample.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from llmdiag.logs.detectors import (GradJumpDetector, LossSpikeDetector, NanDetector, ScaleDetector, StallTracker,
                                   TailTracker, ThroughputDetector)
from llmdiag.logs.columns import NONE
from llmdiag.logs.window import MedianSketch, opt

#: data-loading times kept per rank (the latest ones)
DATA_TIMES = 64


class _FirstLast:
    __slots__ = ("first", "last")

    def __init__(self) -> None:
        self.first = self.last = None


class RankMetrics:
    """The ``metrics`` summary of one rank, accumulated batch by batch."""

    MAX_INTERVALS = 10_000

    def __init__(self) -> None:
        self.count = 0
        self.loss = _FirstLast()
        self.loss_min = self.loss_max = None
        self.loss_max_at: int | None = None
        self.step, self.iter = _FirstLast(), _FirstLast()
        self.intervals = {"step": {}, "iter": {}}
        self.fl = {c: _FirstLast() for c in ("lr", "grad_norm", "loss_scale", "epoch")}
        self.max_grad_norm = None
        self.minmax: dict[str, list] = {}
        self.st_first = None
        self.st_rest = MedianSketch()
        self.memory = None
        self.first_mfu = "unset"

    @staticmethod
    def _upd(fl: _FirstLast, vals: np.ndarray, conv=float) -> None:
        if len(vals):
            if fl.first is None:
                fl.first = conv(vals[0])
            fl.last = conv(vals[-1])

    def feed(self, b: dict) -> None:
        n = len(b["line"])
        if self.first_mfu == "unset":
            self.first_mfu = opt(b["mfu_pct"][0])
        self.count += n
        has = b["has_loss"] == 1
        loss = b["loss"][has]
        self._upd(self.loss, loss)
        fin = loss[np.isfinite(loss)]
        if len(fin):
            lo, hi = float(fin.min()), float(fin.max())
            self.loss_min = lo if self.loss_min is None else min(self.loss_min, lo)
            if self.loss_max is None or hi > self.loss_max:
                # where the curve peaks: the first record at its highest loss (its step, else its iteration)
                k = int(np.flatnonzero(has)[np.flatnonzero(np.isfinite(loss))[int(np.argmax(fin))]])
                pos = b["step"][k] if b["step"][k] != NONE else b["iter"][k]
                self.loss_max_at = int(pos) if pos != NONE else None
            self.loss_max = hi if self.loss_max is None else max(self.loss_max, hi)
        for col, fl in (("step", self.step), ("iter", self.iter)):
            vals = b[col][b[col] != NONE]
            if not len(vals):
                continue
            prev = fl.last
            self._upd(fl, vals, int)
            seq = vals if prev is None else np.concatenate([[prev], vals])
            d = np.diff(seq)
            d = d[d > 0]
            if len(d):
                counter = self.intervals[col]
                u, first, cnt = np.unique(d, return_index=True, return_counts=True)
                for k in np.argsort(first, kind="stable"):
                    key = int(u[k])
                    if key in counter or len(counter) < self.MAX_INTERVALS:
                        counter[key] = counter.get(key, 0) + int(cnt[k])
        for col, fl in self.fl.items():
            vals = b[col][b["has_grad_norm"] == 1] if col == "grad_norm" else b[col][~np.isnan(b[col])]
            self._upd(fl, vals)
        gn = b["grad_norm"][(b["has_grad_norm"] == 1) & np.isfinite(b["grad_norm"])]
        if len(gn):
            g = float(gn.max())
            self.max_grad_norm = g if self.max_grad_norm is None else max(self.max_grad_norm, g)
        for col in ("tflops", "tokens_per_s", "mfu_pct"):
            vals = b[col][~np.isnan(b[col])]
            if len(vals):
                lo, hi = float(vals.min()), float(vals.max())
                mm = self.minmax.get(col)
                self.minmax[col] = [lo, hi] if mm is None else [min(mm[0], lo), max(mm[1], hi)]
        st = b["step_time_ms"][~np.isnan(b["step_time_ms"])]
        if len(st):
            if self.st_first is None:
                self.st_first = float(st[0])
                st = st[1:]
            self.st_rest.add(st)
        mem = b["memory_gib"][~np.isnan(b["memory_gib"])]
        if len(mem):
            m = float(mem.max())
            self.memory = m if self.memory is None else max(self.memory, m)

    def summary(self) -> dict:
        m: dict = {"num_records": self.count}
        xs = self.step if self.step.first is not None else self.iter
        m["has_step_number"] = xs.first is not None
        if xs.first is not None:
            m["first_step"], m["last_step"] = xs.first, xs.last
            counter = self.intervals["step" if xs is self.step else "iter"]
            if counter:
                m["log_interval"] = max(counter.items(), key=lambda kv: kv[1])[0]
        else:
            m["first_step"] = m["last_step"] = None
        if self.step.first is not None and self.iter.first is not None:
            m["first_iter"], m["last_iter"] = self.iter.first, self.iter.last
        m.update(loss_min=self.loss_min, loss_max=self.loss_max, first_loss=self.loss.first,
                 last_loss=self.loss.last)
        if self.loss_max_at is not None:
            m["loss_max_step"] = self.loss_max_at
        m["loss_last"] = m["last_loss"]
        for col, fl in self.fl.items():
            if fl.first is not None:
                if col == "epoch":
                    m["first_epoch"], m["last_epoch"] = fl.first, fl.last
                else:
                    m[f"{col}_first"], m[f"{col}_last"] = fl.first, fl.last
        if m.get("loss_scale_last") is not None:
            m["loss_scale"] = m["loss_scale_last"]
        if self.max_grad_norm is not None:
            m["max_grad_norm"] = self.max_grad_norm
        for col, name in (("tflops", "tflops_per_gpu"), ("tokens_per_s", "tps"), ("mfu_pct", "mfu")):
            if col in self.minmax:
                suffix = "_pct" if name == "mfu" else ""
                m[f"{name}_min{suffix}"], m[f"{name}_max{suffix}"] = self.minmax[col]
        if self.st_first is not None:
            m["iter_time_ms_first"] = self.st_first
            m["iter_time_ms_typical"] = self.st_rest.median() if len(self.st_rest) else self.st_first
        if self.memory is not None:
            m["memory_gib"] = self.memory
        if self.first_mfu not in (None, "unset"):
            m["iter0_mfu_pct" if xs.first == 0 else "first_mfu_pct"] = self.first_mfu
        return m


class RankSeries:
    """Metrics and every streaming detector of one rank."""

    def __init__(self, settings) -> None:
        self.metrics = RankMetrics()
        self.nan = NanDetector()
        self.spikes = LossSpikeDetector(settings)
        self.grad = GradJumpDetector(settings)
        self.drop = ThroughputDetector(settings)
        self.scale = ScaleDetector(settings)
        self.stall = StallTracker()
        self.tails: dict[int, TailTracker] = {}
        self.last_file: int | None = None
        self.last_line: int | None = None
        #: the rank's latest data-loading times (ms): a straggler's own share of a slow step
        self.data_times: deque[float] = deque(maxlen=DATA_TIMES)

    def feed(self, b: dict, files: list[str]) -> None:
        self.metrics.feed(b)
        dt = b["data_time_ms"]
        printed = ~np.isnan(dt)
        if printed.any():
            self.data_times.extend(dt[printed][-DATA_TIMES:].tolist())
        for det in (self.nan, self.spikes, self.grad, self.drop, self.scale, self.stall):
            det.feed(b, files)
        fids = b["file"]
        for fid in (np.unique(fids) if not (fids == fids[0]).all() else fids[:1]).tolist():
            rows = np.flatnonzero(fids == fid)
            self.tails.setdefault(fid, TailTracker()).feed(b, rows, files)
        self.last_file, self.last_line = int(fids[-1]), int(b["line"][-1])
