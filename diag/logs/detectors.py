"""Streaming anomaly detectors over one rank's records: NaN/Inf and zero loss, loss spikes,
grad-norm jumps, throughput drops, fp16 loss-scale collapse, and the trackers of the hang rules.

Every detector sees the rank's records in order, a batch of NumPy columns at a time, and
keeps only a rolling window (``Settings.window`` values) plus the few facts its finding
reports, so memory does not grow with the log. A batch first goes through a cheap vectorised
bound that proves "nothing can fire here" (e.g. a loss spike needs ``loss > rolling min +
spike_min_abs``); only the records the bound cannot clear are checked one by one with the
exact rule, so results equal a full-series pass (tests/unit/logs/test_streaming.py compares
them with the pre-streaming implementation). The rules are documented in docs/analyze-log.md.
"""

from __future__ import annotations

import math
import statistics
from collections import deque

import numpy as np

from llmdiag.logs.window import (GRAD_HISTORY, NOISE_HISTORY, SHORT_LOSS_RATIO, MedianSketch, finding, opt, place,
                                 place_at, pos_key, robust, rolling, short_grad_ratio, step_noise, where, xs, xval)
from llmdiag.logs.window import fmt as _fmt


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
                    self.last_finite = (*xval(b, j)[:2], float(loss[j]))
        elif self.nan_first is None and fin.any():
            j = int(np.flatnonzero(fin)[-1])
            self.last_finite = (*xval(b, j)[:2], float(loss[j]))
        gn = b["grad_norm"]
        # a NaN grad norm is its own finding whether or not that record's loss is NaN too (the loss may stay
        # finite: README vocabulary); the NaN loss, where there is one, ranks first
        gm = (b["has_grad_norm"] == 1) & ~np.isfinite(gn)
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
            x = at["x_name"]
            f = {pos_key("nan_first_step", x): at["x"], pos_key("nan_steps", x): list(self.nan_steps),
                 "nan_count": self.nan_count, "value": "nan"}
            if self.last_finite is not None:
                name, step, f["last_finite_loss"] = self.last_finite
                f[pos_key("last_finite_step", name)] = step
            out.append(finding("nan_loss", at, f"loss is NaN/Inf from {place_at(at)} "
                               f"({self.nan_count} record(s))", f))
        if self.gn_first is not None:
            at = self.gn_first
            out.append(finding("nan_grad_norm", at, f"grad norm is NaN/Inf at {place_at(at)}",
                               {pos_key("nan_grad_norm_first_step", at["x_name"]): at["x"], "nan_count": self.gn_count, "value": "nan"}))
        if self.zero_first is not None:
            at = self.zero_first
            out.append(finding("zero_loss", at, f"loss is exactly 0 in {self.zero_count} record(s) from "
                               f"{place_at(at)} (steps skipped or the loss masked out)",
                               {pos_key("zero_loss_first_step", at["x_name"]): at["x"], "zero_loss_records": self.zero_count,
                                "value": 0.0}))
        return out


class LossSpikeDetector:
    """loss > median + max(k·σ, min_rel·|median|, min_abs), the median of the last ``window`` losses and σ the
    larger of their robust spread and the run's record-to-record noise (window.step_noise, over a longer history).

    Spike values do not enter the baseline; a spike lasts while the loss stays above half
    the threshold's margin, and has recovered when a lower loss follows.
    """

    def __init__(self, s) -> None:
        self.s = s
        self.window: deque[float] = deque(maxlen=s.window)
        self.history: deque[float] = deque(maxlen=NOISE_HISTORY)
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
            rmin = rolling(list(self.window), v, s.window, np.min)
            margin = np.maximum(s.spike_min_abs, np.where(rmin >= 0, s.spike_min_rel * rmin, 0.0))
            k = self.n_window + np.arange(len(v))
            # before three losses, only a jump of SHORT_LOSS_RATIO times the baseline (window.SHORT_LOSS_RATIO)
            margin = np.where(k >= 3, margin, np.maximum(margin, (SHORT_LOSS_RATIO - 1) * np.abs(rmin)))
            flag = np.flatnonzero((k >= 1) & (v > rmin + margin))
            start = int(flag[0]) if len(flag) else len(v)
            if start:
                self.window.extend(v[:start].tolist())
                self.history.extend(v[max(0, start - NOISE_HISTORY):start].tolist())
                self.n_window += start
                j = int(rows[start - 1])
                self.prev = (float(v[start - 1]), opt(b["loss_scale"][j]))
        for p in range(start, len(v)):
            self._step(float(v[p]), b, int(rows[p]), files)

    def _step(self, v: float, b: dict, i: int, files: list[str]) -> None:
        s = self.s
        scale = opt(b["loss_scale"][i])
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
        if len(self.window) >= 1:
            med, sigma = robust(list(self.window))
            thr = med + max(s.spike_spread_k * sigma, s.spike_min_rel * abs(med), s.spike_min_abs)
            if len(self.window) < 3:  # an excerpt of a few records: only a jump far beyond any noise
                thr = med + max(s.spike_min_abs, (SHORT_LOSS_RATIO - 1) * abs(med))
            if v > thr:
                thr = max(thr, med + step_noise(self.history, med, s.spike_spread_k))
            if v > thr:
                self.open = {"at": where(b, i, files), "med": med, "half": med + (thr - med) / 2, "vm": v,
                             "km": xval(b, i), "before": self.prev,
                             "scales": [scale] if scale is not None else []}
                self.prev = (v, scale)
                return
        self.window.append(v)
        self.history.append(v)
        self.n_window += 1
        self.prev = (v, scale)

    def _close(self, sp: dict, recovered: bool) -> None:
        self.open = None
        self.done.append(self._finding(sp, recovered))

    def _finding(self, sp: dict, recovered: bool) -> dict:
        med, vm, km, at = sp["med"], sp["vm"], sp["km"], sp["at"]
        f = {pos_key("spike_first_step", at["x_name"]): at["x"], "max_loss": vm,
             pos_key("max_loss_step", km[0]): km[1], "value": vm, "baseline": med, "baseline_loss": sp["before"][0], "ratio": vm / med if med else None, "recovered": recovered}
        if sp["before"][1] is not None:
            f["loss_scale_before"] = sp["before"][1]
        if sp["scales"]:
            f["loss_scale_min"] = min(sp["scales"])
        x_ratio = f"x{vm / med:.2f}" if med else "x inf"
        # where it starts (the finding's place) and where it peaks: a spike of several records names both
        began = "" if (km[1], km[2]) == (at["x"], at["line"]) else f", rising from {place_at(at)}"
        return finding("loss_spike", at, f"loss spikes to {_fmt(vm)} at {place(km)} (baseline {_fmt(med)}, "
                       f"{x_ratio}{began})" + ("; recovered" if recovered else "; did not recover"), f)

    def result(self) -> list[dict]:
        out = list(self.done)
        if self.open is not None:
            out.append(self._finding(self.open, recovered=False))
        return out


class GradJumpDetector:
    """grad norm ≥ ratio × the median of the previous ``window`` positive norms (after 5 records; before, only
    an explosion far larger: window.short_grad_ratio)."""

    MAX_LINES = 100_000

    def __init__(self, s) -> None:
        self.s = s
        self.window: deque[float] = deque(maxlen=s.window)
        self.n = 0
        self.first: tuple | None = None  # (where, median, record number)
        self.max: tuple | None = None  # (value, xval)
        self.count = 0
        self.lines: list[int] = []
        #: a jump in the short history too small to stand on the records before it alone: it stands when the
        #: next record falls back as far (a one-record peak, isolated on both sides)
        self.peak: tuple | None = None  # (record number, where, median before, value, xval, line)

    def _confirm(self, k: int, at, med: float, val: float, x, line: int) -> None:
        """Jump number ``k`` (records so far) is one: the first by ``k`` (a short-history peak is confirmed a
        record late, after later ones may have been)."""
        if self.first is None or k < self.first[2]:
            self.first = (at, med, k)
        if self.max is None or val > self.max[0]:
            self.max = (val, x)
        self.count += 1
        if len(self.lines) < self.MAX_LINES:
            self.lines.append(line)

    def feed(self, b: dict, files: list[str]) -> None:
        gn = b["grad_norm"]
        rows = np.flatnonzero((b["has_grad_norm"] == 1) & np.isfinite(gn) & (gn > 0))
        if not len(rows):
            return
        v = gn[rows]
        s = self.s
        if self.peak is not None:
            k, at, med, val, x, line = self.peak
            self.peak = None
            if val / float(v[0]) >= s.grad_explosion_ratio:
                self._confirm(k, at, med, val, x, line)
        if self.n < GRAD_HISTORY:  # the short history, record by record: a peak the next record leaves
            c = list(self.window) + v.tolist()
            base = len(self.window)
            for p in range(min(len(v), GRAD_HISTORY - self.n)):
                q = base + p
                if q == 0:
                    continue
                med = statistics.median(c[max(0, q - s.window):q])
                val = c[q]
                if not (s.grad_explosion_ratio <= val / med < float(
                        short_grad_ratio(self.n + p, s.grad_spike_ratio, s.grad_explosion_ratio))):
                    continue
                i = int(rows[p])
                if p + 1 < len(v):
                    if val / float(v[p + 1]) >= s.grad_explosion_ratio:
                        self._confirm(self.n + p, where(b, i, files), med, val, xval(b, i), int(b["line"][i]))
                else:
                    self.peak = (self.n + p, where(b, i, files), med, val, xval(b, i), int(b["line"][i]))
        prev = list(self.window)
        rmin = rolling(prev, v, s.window, np.min)
        need = short_grad_ratio(self.n + np.arange(len(v)), s.grad_spike_ratio, s.grad_explosion_ratio)
        with np.errstate(divide="ignore", invalid="ignore"):
            flag = np.flatnonzero(v / rmin >= need)
        if len(flag):
            c = prev + v.tolist()
            for p in flag.tolist():
                q = len(prev) + p
                med = statistics.median(c[max(0, q - s.window):q])
                val = c[q]
                if med > 0 and val / med >= need[p]:
                    i = int(rows[p])
                    self._confirm(self.n + p, where(b, i, files), med, val, xval(b, i), int(b["line"][i]))
        self.window.extend(v[-s.window:].tolist())
        self.n += len(v)

    def result(self, spike_lines: set) -> list[dict]:
        if self.first is None:
            return []
        at, med, _ = self.first
        vm, x = self.max
        ratio = vm / med
        kind = "grad_norm_explosion" if ratio >= self.s.grad_explosion_ratio else "grad_norm_spike"
        if kind == "grad_norm_spike" and any(line in spike_lines for line in self.lines):
            return []  # the loss spike already tells this story
        f = {"max_grad_norm": vm, f"max_grad_norm_{x[0]}": x[1], "baseline_grad_norm": med, "baseline": med,
             "value": vm, "ratio": ratio, pos_key("first_step", at["x_name"]): at["x"], "records": self.count}
        return [finding(kind, at, f"grad norm jumps to {_fmt(vm)} at {place(x)} "
                        f"(x{ratio:.1f} the rolling median {_fmt(med)})", f)]


#: step times shorter than this are timer and scheduler noise (a busy host's time slice, a GC pause): a step of
#: 2 ms that takes 9 ms on the next one is no slow-down of training, while 100 ms that becomes 150 ms is
STEP_TIME_FLOOR_MS = 20.0


def speeds(b: dict) -> np.ndarray:
    """tokens/s, else samples/s, else TFLOP/s (the first that is > 0), else 1000 / step time (at least
    STEP_TIME_FLOOR_MS)."""
    st = b["step_time_ms"]
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(~np.isnan(st) & (st != 0), 1000.0 / np.maximum(st, STEP_TIME_FLOOR_MS), math.nan)
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
            rmax = rolling(list(self.window), v, s.window, np.max)
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
        f = {pos_key("first_step", at["x_name"]): at["x"], "value": low, "baseline": base, "ratio": low / base,
             "recovered": d["recovered"], "slow_records": d["count"]}
        return [finding("throughput_drop", at, f"throughput falls to {low / base:.0%} of its baseline from "
                        f"{place_at(at)} for {d['count']} record(s)", f)]


#: records that all skipped their steps before the run counts as one that trains nothing
MIN_DEAD_RECORDS = 3


class ScaleDetector:
    """fp16 overflow without messages: skipped-iteration counters, or a loss scale that fell
    by ``scale_collapse_factor``."""

    def __init__(self, s) -> None:
        self.s = s
        self.first = self.last = self.top = self.low = None
        self.low_at: dict | None = None
        self.skip_first: dict | None = None
        self.skipped = 0  # summed like the full-series rule did: 0 + floats
        self.records = self.skipped_records = 0  # records of the rank, and those that skipped iterations

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
        self.records += len(sk)  # a counter printed only when non-zero is absent (NaN) on the other records
        self.skipped_records += int(km.sum())
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
        out = finding("grad_overflow", at, "fp16 overflow: " + (
            f"{facts.get('skipped_iterations', 0):g} skipped iteration(s)" if self.skip_first is not None else
            f"loss scale collapsed to {facts['loss_scale_min']:g}"), facts)
        if self.records >= MIN_DEAD_RECORDS and self.skipped_records == self.records:
            # every record counts skipped iterations: no step was applied, the run trains nothing
            facts["all_steps_skipped"] = True
            out["severity"] = "error"
            out["message"] += f"; every one of the {self.records} records skipped its step(s): nothing was trained"
        return out


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
        t, x = ts[rows], xs(b)[rows]
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
            f = {pos_key("last_step", at["x_name"]): at["x"], "silent_s": last_ts - t_last, "typical_interval_s": typical}
            return [finding("hang_no_progress", at, f"no training progress for {(last_ts - t_last) / 60:.1f} "
                            f"min after {place_at(at)} while other lines keep arriving", f)]
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
        f = {pos_key("last_step", at["x_name"]): at["x"], "lines_after_last_step": lines_after, "typical_lines_per_step": spacing}
        return [finding("hang_no_progress", at, f"no training progress after {place_at(at)}: "
                        f"{lines_after} more lines arrive (steps came every {spacing:g} lines)", f)]
