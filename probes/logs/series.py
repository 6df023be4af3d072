"""One rank's training curve, streamed: running metrics and bounded-window anomaly detectors.

Every detector sees the rank's records in order, a batch of NumPy columns at a time, and
keeps only a rolling window (``Settings.window`` values) plus the few facts its finding
reports, so memory does not grow with the log. The detection rules are the ones of
:mod:`probes.logs.anomalies` (documented there and in docs/analyze-log.md); a batch first
goes through a cheap vectorised bound that proves "nothing can fire here" (e.g. a loss
spike needs ``loss > rolling min + spike_min_abs``), and only the records the bound cannot
clear are checked one by one with the exact rule, so results match a full-series pass.

Medians over a whole run (typical step time, the typical gap between steps) are exact up to
``MedianSketch.CAP`` values and then computed over an evenly thinned sample.
"""

from __future__ import annotations

import math
import statistics
from collections import deque

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from probes.logs.table import NONE


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def xval(b: dict, i: int) -> tuple[str, float | int | None]:
    """The record's position: its step, else its iteration, else its epoch."""
    for col in ("step", "iter"):
        v = int(b[col][i])
        if v != NONE:
            return col, v
    e = float(b["epoch"][i])
    return "epoch", None if math.isnan(e) else e


def where(b: dict, i: int, files: list[str]) -> dict:
    name, x = xval(b, i)
    step = int(b["step"][i]) if b["step"][i] != NONE else (int(b["iter"][i]) if b["iter"][i] != NONE else None)
    ts = float(b["ts"][i])
    rank = int(b["rank"][i])
    return {"x_name": name, "x": x, "line": int(b["line"][i]), "file": files[int(b["file"][i])],
            "rank": None if rank == NONE else rank, "step": step, "ts": None if math.isnan(ts) else ts}


def finding(kind: str, at: dict, message: str, facts: dict) -> dict:
    d = dict(at)
    d.update(kind=kind, message=message, facts=facts)
    return d


def _xs(b: dict) -> np.ndarray:
    """Positions as floats (NaN = none): step, else iter, else epoch."""
    step, it = b["step"], b["iter"]
    x = np.where(step != NONE, step, it).astype(np.float64)
    return np.where(np.where(step != NONE, step, it) == NONE, b["epoch"], x)


def _rolling(prev: list[float], v: np.ndarray, w: int, fn) -> np.ndarray:
    """For each v[p], fn (np.min / np.max) over the ``w`` values before it in prev + v (inf pad)."""
    pad = math.inf if fn is np.min else -math.inf
    c = np.concatenate([np.full(w, pad), np.asarray(prev, dtype=np.float64), v])
    win = sliding_window_view(c, w)[len(prev):len(prev) + len(v)]
    return fn(win, axis=1)


def robust(values: list[float]) -> tuple[float, float]:
    med = statistics.median(values)
    mad = statistics.median([abs(v - med) for v in values])
    return med, 1.4826 * mad


class MedianSketch:
    """Exact median up to CAP values, then over every 2nd, 4th, ... value."""

    CAP = 1 << 16

    def __init__(self) -> None:
        self.parts: list[np.ndarray] = []
        self.n = 0
        self.seen = 0
        self.stride = 1

    def add(self, v: np.ndarray) -> None:
        if self.stride > 1:
            idx = np.arange(self.seen, self.seen + len(v))
            self.seen += len(v)
            v = v[idx % self.stride == 0]
        else:
            self.seen += len(v)
        if len(v):
            self.parts.append(np.asarray(v, dtype=np.float64))
            self.n += len(v)
        if self.n > self.CAP:
            allv = np.concatenate(self.parts)[::2]
            self.parts, self.n, self.stride = [allv], len(allv), self.stride * 2

    def __len__(self) -> int:
        return self.n

    def median(self) -> float:
        return statistics.median(np.concatenate(self.parts).tolist())


class NanDetector:
    """NaN/Inf loss (or Megatron's NaN-iteration counter), NaN grad norm, loss exactly 0."""

    def __init__(self) -> None:
        self.nan_first: dict | None = None
        self.nan_steps: list = []
        self.nan_count = 0
        self.last_finite: tuple | None = None
        self.gn_first: dict | None = None
        self.gn_count = 0
        self.zero_first: dict | None = None
        self.zero_count = 0

    def feed(self, b: dict, files: list[str]) -> None:
        loss, has = b["loss"], b["has_loss"] == 1
        fin = has & np.isfinite(loss)
        nm = (has & ~np.isfinite(loss)) | (b["nan_iters"] > 0)
        if nm.any():
            idx = np.flatnonzero(nm)
            for i in idx[:max(0, 100 - len(self.nan_steps))]:
                self.nan_steps.append(xval(b, int(i))[1])
            self.nan_count += len(idx)
            if self.nan_first is None:
                i0 = int(idx[0])
                self.nan_first = where(b, i0, files)
                before = np.flatnonzero(fin[:i0])
                if len(before):
                    j = int(before[-1])
                    self.last_finite = (xval(b, j)[1], float(loss[j]))
        elif self.nan_first is None and fin.any():
            j = int(np.flatnonzero(fin)[-1])
            self.last_finite = (xval(b, j)[1], float(loss[j]))
        gn = b["grad_norm"]
        gm = (b["has_grad_norm"] == 1) & ~np.isfinite(gn) & ~nm
        if gm.any():
            if self.gn_first is None:
                self.gn_first = where(b, int(np.argmax(gm)), files)
            self.gn_count += int(gm.sum())
        zm = has & (loss == 0.0)
        if zm.any():
            if self.zero_first is None:
                self.zero_first = where(b, int(np.argmax(zm)), files)
            self.zero_count += int(zm.sum())

    def result(self) -> list[dict]:
        out = []
        if self.nan_first is not None:
            at = self.nan_first
            f = {"nan_first_step": at["x"], "nan_steps": list(self.nan_steps), "nan_count": self.nan_count,
                 "value": "nan"}
            if self.last_finite is not None:
                f["last_finite_step"], f["last_finite_loss"] = self.last_finite
            out.append(finding("nan_loss", at, f"loss is NaN/Inf from {at['x_name']} {self.nan_steps[0]} "
                               f"({self.nan_count} record(s))", f))
        if self.gn_first is not None:
            at = self.gn_first
            out.append(finding("nan_grad_norm", at, f"grad norm is NaN/Inf at {at['x_name']} {at['x']} "
                               "while the loss is finite",
                               {"nan_grad_norm_first_step": at["x"], "nan_count": self.gn_count, "value": "nan"}))
        if self.zero_first is not None:
            at = self.zero_first
            out.append(finding("zero_loss", at, f"loss is exactly 0 in {self.zero_count} record(s) from "
                               f"{at['x_name']} {at['x']} (steps skipped or the loss masked out)",
                               {"zero_loss_first_step": at["x"], "zero_loss_records": self.zero_count,
                                "value": 0.0}))
        return out


class LossSpikeDetector:
    """loss > median + max(k·robust σ, min_rel·|median|, min_abs) of the last ``window`` losses.

    Spike values do not enter the baseline; a spike lasts while the loss stays above half
    the threshold's margin, and has recovered when a lower loss follows.
    """

    def __init__(self, s) -> None:
        self.s = s
        self.window: deque[float] = deque(maxlen=s.window)
        self.n_window = 0
        self.prev: tuple[float, float | None] | None = None  # (loss, loss scale) of the previous point
        self.open: dict | None = None
        self.done: list[dict] = []

    def feed(self, b: dict, files: list[str]) -> None:
        loss = b["loss"]
        rows = np.flatnonzero((b["has_loss"] == 1) & np.isfinite(loss))
        if not len(rows):
            return
        v = loss[rows]
        start = 0
        if self.open is None:
            s = self.s
            rmin = _rolling(list(self.window), v, s.window, np.min)
            margin = np.maximum(s.spike_min_abs, np.where(rmin >= 0, s.spike_min_rel * rmin, 0.0))
            enough = (self.n_window + np.arange(len(v))) >= 3
            flag = np.flatnonzero(enough & (v > rmin + margin))
            start = int(flag[0]) if len(flag) else len(v)
            if start:
                self.window.extend(v[:start].tolist())
                self.n_window += start
                j = int(rows[start - 1])
                self.prev = (float(v[start - 1]), _opt(b["loss_scale"][j]))
        for p in range(start, len(v)):
            self._step(float(v[p]), b, int(rows[p]), files)

    def _step(self, v: float, b: dict, i: int, files: list[str]) -> None:
        s = self.s
        scale = _opt(b["loss_scale"][i])
        sp = self.open
        if sp is not None:
            if v > sp["half"]:
                if v > sp["vm"]:
                    sp["vm"], sp["km"] = v, xval(b, i)
                if scale is not None:
                    sp["scales"].append(scale)
                self.prev = (v, scale)
                return
            self._close(sp, recovered=True)
        if len(self.window) >= 3:
            med, sigma = robust(list(self.window))
            thr = med + max(s.spike_spread_k * sigma, s.spike_min_rel * abs(med), s.spike_min_abs)
            if v > thr:
                self.open = {"at": where(b, i, files), "med": med, "half": med + (thr - med) / 2, "vm": v,
                             "km": xval(b, i), "before": self.prev,
                             "scales": [scale] if scale is not None else []}
                self.prev = (v, scale)
                return
        self.window.append(v)
        self.n_window += 1
        self.prev = (v, scale)

    def _close(self, sp: dict, recovered: bool) -> None:
        self.open = None
        self.done.append(self._finding(sp, recovered))

    def _finding(self, sp: dict, recovered: bool) -> dict:
        med, vm, km, at = sp["med"], sp["vm"], sp["km"], sp["at"]
        f = {"spike_first_step": at["x"], "max_loss": vm, "max_loss_step": km[1], "value": vm, "baseline": med,
             "baseline_loss": sp["before"][0], "ratio": vm / med if med else None, "recovered": recovered}
        if sp["before"][1] is not None:
            f["loss_scale_before"] = sp["before"][1]
        if sp["scales"]:
            f["loss_scale_min"] = min(sp["scales"])
        x_ratio = f"x{vm / med:.2f}" if med else "x inf"
        return finding("loss_spike", at, f"loss spikes to {_fmt(vm)} at {km[0]} {km[1]} (baseline {_fmt(med)}, "
                       f"{x_ratio})" + ("; recovered" if recovered else "; did not recover"), f)

    def result(self) -> list[dict]:
        out = list(self.done)
        if self.open is not None:
            out.append(self._finding(self.open, recovered=False))
        return out


def _opt(v) -> float | None:
    v = float(v)
    return None if math.isnan(v) else v


class GradJumpDetector:
    """grad norm ≥ ratio × the median of the previous ``window`` positive norms (after 5 records)."""

    MAX_LINES = 100_000

    def __init__(self, s) -> None:
        self.s = s
        self.window: deque[float] = deque(maxlen=s.window)
        self.n = 0
        self.first: tuple | None = None  # (where, median)
        self.max: tuple | None = None  # (value, xval)
        self.count = 0
        self.lines: list[int] = []

    def feed(self, b: dict, files: list[str]) -> None:
        gn = b["grad_norm"]
        rows = np.flatnonzero((b["has_grad_norm"] == 1) & np.isfinite(gn) & (gn > 0))
        if not len(rows):
            return
        v = gn[rows]
        s = self.s
        prev = list(self.window)
        rmin = _rolling(prev, v, s.window, np.min)
        with np.errstate(divide="ignore", invalid="ignore"):
            flag = np.flatnonzero(((self.n + np.arange(len(v))) >= 5) & (v / rmin >= s.grad_spike_ratio))
        if len(flag):
            c = prev + v.tolist()
            for p in flag.tolist():
                q = len(prev) + p
                med = statistics.median(c[max(0, q - s.window):q])
                val = c[q]
                if med > 0 and val / med >= s.grad_spike_ratio:
                    i = int(rows[p])
                    if self.first is None:
                        self.first = (where(b, i, files), med)
                    if self.max is None or val > self.max[0]:
                        self.max = (val, xval(b, i))
                    self.count += 1
                    if len(self.lines) < self.MAX_LINES:
                        self.lines.append(int(b["line"][i]))
        self.window.extend(v[-s.window:].tolist())
        self.n += len(v)

    def result(self, spike_lines: set) -> list[dict]:
        if self.first is None:
            return []
        at, med = self.first
        vm, x = self.max
        ratio = vm / med
        kind = "grad_norm_explosion" if ratio >= self.s.grad_explosion_ratio else "grad_norm_spike"
        if kind == "grad_norm_spike" and any(line in spike_lines for line in self.lines):
            return []  # the loss spike already tells this story
        f = {"max_grad_norm": vm, f"max_grad_norm_{x[0]}": x[1], "baseline_grad_norm": med, "baseline": med,
             "value": vm, "ratio": ratio, "first_step": at["x"], "records": self.count}
        return [finding(kind, at, f"grad norm jumps to {_fmt(vm)} at {x[0]} {x[1]} "
                        f"(x{ratio:.1f} the rolling median {_fmt(med)})", f)]


def speeds(b: dict) -> np.ndarray:
    """tokens/s, else samples/s, else TFLOP/s (the first that is > 0), else 1000 / step time."""
    st = b["step_time_ms"]
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(~np.isnan(st) & (st != 0), 1000.0 / st, math.nan)
    for col in ("tflops", "samples_per_s", "tokens_per_s"):
        c = b[col]
        out = np.where(c > 0, c, out)
    return out


class ThroughputDetector:
    """Speed below ``drop_fraction`` × its rolling median for ``drop_min_records`` records in a
    row (the rank's first record, which includes compile time, is ignored). Only the first drop
    is reported."""

    MAX_VALUES = 1 << 20

    def __init__(self, s) -> None:
        self.s = s
        self.window: deque[float] = deque(maxlen=s.window)
        self.n = 0
        self.skipped_first = False
        self.pending: list[dict] = []
        self.drop: dict | None = None
        self.finished = False

    def feed(self, b: dict, files: list[str]) -> None:
        if self.finished:
            return
        sp = speeds(b)
        if not self.skipped_first:
            sp = sp.copy()
            sp[0] = math.nan
            self.skipped_first = True
        rows = np.flatnonzero(~np.isnan(sp))
        if not len(rows):
            return
        v = sp[rows]
        s = self.s
        start = 0
        if self.drop is not None:
            base = self.drop["base"]
            hi = np.flatnonzero(v >= s.drop_fraction * base)
            end = int(hi[0]) if len(hi) else len(v)
            self._keep(v[:end])
            if len(hi):
                self.drop["recovered"] = True
                self.finished = True
            return
        if not self.pending:
            rmax = _rolling(list(self.window), v, s.window, np.max)
            flag = np.flatnonzero(((self.n + np.arange(len(v))) >= 5) & (v < s.drop_fraction * rmax))
            start = int(flag[0]) if len(flag) else len(v)
            self.window.extend(v[max(0, start - s.window):start].tolist())
            self.n += start
        for p in range(start, len(v)):
            if self._step(float(v[p]), b, int(rows[p]), files):
                rest = v[p + 1:]
                if len(rest):
                    self.feed_rest(rest)
                return

    def feed_rest(self, v: np.ndarray) -> None:
        base = self.drop["base"]
        hi = np.flatnonzero(v >= self.s.drop_fraction * base)
        end = int(hi[0]) if len(hi) else len(v)
        self._keep(v[:end])
        if len(hi):
            self.drop["recovered"] = True
            self.finished = True

    def _keep(self, v) -> None:
        d = self.drop
        d["count"] += len(v)
        d["values"].extend(v.tolist() if isinstance(v, np.ndarray) else v)
        if len(d["values"]) > self.MAX_VALUES:
            d["values"] = d["values"][::2]

    def _step(self, v: float, b: dict, i: int, files: list[str]) -> bool:
        """One speed value; True when a drop was confirmed (the rest goes to the drop)."""
        s = self.s
        keep = []
        for c in self.pending:
            if v < s.drop_fraction * c["base"]:
                c["values"].append(v)
                keep.append(c)
        self.pending = keep
        if self.pending and len(self.pending[0]["values"]) >= s.drop_min_records:
            self._confirm(self.pending[0])
            return True
        if self.n >= 5:
            base = statistics.median(self.window)
            if v < s.drop_fraction * base:
                c = {"base": base, "at": where(b, i, files), "values": [v]}
                if s.drop_min_records <= 1:
                    self.window.append(v)
                    self.n += 1
                    self._confirm(c)
                    return True
                self.pending.append(c)
        self.window.append(v)
        self.n += 1
        return False

    def _confirm(self, c: dict) -> None:
        self.pending = []
        self.drop = {"base": c["base"], "at": c["at"], "values": list(c["values"]), "count": len(c["values"]),
                     "recovered": False}

    def result(self) -> list[dict]:
        d = self.drop
        if d is None:
            return []
        base, at = d["base"], d["at"]
        low = statistics.median(d["values"])
        f = {"first_step": at["x"], "value": low, "baseline": base, "ratio": low / base,
             "recovered": d["recovered"], "slow_records": d["count"]}
        return [finding("throughput_drop", at, f"throughput falls to {low / base:.0%} of its baseline from "
                        f"{at['x_name']} {at['x']} for {d['count']} record(s)", f)]


class ScaleDetector:
    """fp16 overflow without messages: skipped-iteration counters, or a loss scale that fell
    by ``scale_collapse_factor``."""

    def __init__(self, s) -> None:
        self.s = s
        self.first = self.last = self.top = self.low = None
        self.low_at: dict | None = None
        self.skip_first: dict | None = None
        self.skipped = 0  # summed like the full-series rule did: 0 + floats

    def feed(self, b: dict, files: list[str]) -> None:
        ls = b["loss_scale"]
        m = ls > 0
        if m.any():
            v = ls[m]
            if self.first is None:
                self.first = float(v[0])
            self.last = float(v[-1])
            top, low = float(v.max()), float(v.min())
            self.top = top if self.top is None else max(self.top, top)
            if self.low is None or low < self.low:
                self.low = low
                self.low_at = where(b, int(np.flatnonzero(m)[int(np.argmin(v))]), files)
        sk = b["skipped"]
        km = sk > 0
        if km.any():
            if self.skip_first is None:
                self.skip_first = where(b, int(np.argmax(km)), files)
            for x in sk[km].tolist():
                self.skipped += x

    def result(self) -> dict | None:
        if self.first is None and self.skip_first is None:
            return None
        facts: dict = {}
        if self.first is not None:
            facts.update(loss_scale_first=self.first, loss_scale_last=self.last, loss_scale_min=self.low)
            if self.top / self.low < self.s.scale_collapse_factor and self.skip_first is None:
                return None
        if self.skip_first is not None:
            facts["skipped_iterations"] = self.skipped
        at = self.skip_first if self.skip_first is not None else self.low_at
        return finding("grad_overflow", at, "fp16 overflow: " + (
            f"{facts.get('skipped_iterations', 0):g} skipped iteration(s)" if self.skip_first is not None else
            f"loss scale collapsed to {facts['loss_scale_min']:g}"), facts)


class StallTracker:
    """Gaps between timestamped steps (per step), for the hang rule."""

    def __init__(self) -> None:
        self.gaps = MedianSketch()
        self.count = 0
        self.prev: tuple[float, float] | None = None  # (ts, x)
        self.last_at: dict | None = None

    def feed(self, b: dict, files: list[str]) -> None:
        ts = b["ts"]
        rows = np.flatnonzero(~np.isnan(ts))
        if not len(rows):
            return
        t, x = ts[rows], _xs(b)[rows]
        if self.prev is not None:
            t, x = np.concatenate([[self.prev[0]], t]), np.concatenate([[self.prev[1]], x])
        if len(t) > 1:
            x0, x1 = x[:-1], x[1:]
            steps = np.where(~np.isnan(x0) & ~np.isnan(x1) & (x1 > x0), x1 - x0, 1.0)
            self.gaps.add((t[1:] - t[:-1]) / np.maximum(steps, 1.0))
        self.count += len(rows)
        self.prev = (float(t[-1]), float(x[-1]))
        self.last_at = where(b, int(rows[-1]), files)

    def result(self, s, last_ts: float | None, noise_after: bool) -> list[dict]:
        if self.count < 2:
            return []
        typical = self.gaps.median() if len(self.gaps) else 0
        limit = max(s.hang_minutes * 60.0, 10 * typical)
        at = self.last_at
        t_last = at["ts"]
        if last_ts is not None and noise_after and last_ts - t_last > limit:
            f = {"last_step": at["x"], "silent_s": last_ts - t_last, "typical_interval_s": typical}
            return [finding("hang_no_progress", at, f"no training progress for {(last_ts - t_last) / 60:.1f} "
                            f"min after {at['x_name']} {at['x']} while other lines keep arriving", f)]
        return []


class TailTracker:
    """Line spacing of one rank's steps in one file, for the no-timestamp hang rule."""

    def __init__(self) -> None:
        self.count = 0
        self.last_line: int | None = None
        self.diffs = MedianSketch()
        self.any_ts = False
        self.last_at: dict | None = None

    def feed(self, b: dict, rows: np.ndarray, files: list[str]) -> None:
        lines = b["line"][rows].astype(np.float64)
        if self.last_line is not None:
            lines = np.concatenate([[self.last_line], lines])
        d = np.diff(lines)
        self.diffs.add(d[d > 0])
        self.count += len(rows)
        self.last_line = int(lines[-1])
        self.any_ts = self.any_ts or bool((~np.isnan(b["ts"][rows])).any())
        self.last_at = where(b, int(rows[-1]), files)

    def result(self, lines_after: int) -> list[dict]:
        if self.count < 5:
            return []
        spacing = self.diffs.median() if len(self.diffs) else 1
        if spacing == int(spacing):
            spacing = int(spacing)
        if lines_after < 50 or lines_after < 20 * spacing:
            return []
        at = self.last_at
        f = {"last_step": at["x"], "lines_after_last_step": lines_after, "typical_lines_per_step": spacing}
        return [finding("hang_no_progress", at, f"no training progress after {at['x_name']} {at['x']}: "
                        f"{lines_after} more lines arrive (steps came every {spacing:g} lines)", f)]


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
            self.first_mfu = _opt(b["mfu_pct"][0])
        self.count += n
        has = b["has_loss"] == 1
        loss = b["loss"][has]
        self._upd(self.loss, loss)
        fin = loss[np.isfinite(loss)]
        if len(fin):
            lo, hi = float(fin.min()), float(fin.max())
            self.loss_min = lo if self.loss_min is None else min(self.loss_min, lo)
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

    def feed(self, b: dict, files: list[str]) -> None:
        self.metrics.feed(b)
        for det in (self.nan, self.spikes, self.grad, self.drop, self.scale, self.stall):
            det.feed(b, files)
        fids = b["file"]
        for fid in (np.unique(fids) if not (fids == fids[0]).all() else fids[:1]).tolist():
            rows = np.flatnonzero(fids == fid)
            self.tails.setdefault(fid, TailTracker()).feed(b, rows, files)
        self.last_file, self.last_line = int(fids[-1]), int(b["line"][-1])
