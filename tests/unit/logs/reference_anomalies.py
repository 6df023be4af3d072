"""The full-series anomaly rules as they were before streaming (reference for the tests).

Copied from diag/logs/table.py and diag/logs/anomalies.py at 17f01ef: every step kept in
typed arrays, every rule run over the whole series at the end. tests/unit/logs/test_streaming.py
checks that the streaming detectors of diag/logs/series.py find exactly the same.
"""

from __future__ import annotations

import math
import statistics
from array import array
from collections.abc import Sequence

from llmdiag.logs.config import Settings
from llmdiag.logs.detectors import STEP_TIME_FLOOR_MS
from llmdiag.logs.window import GRAD_HISTORY, SHORT_LOSS_RATIO, short_grad_ratio, step_noise

#: float columns of the table (NaN = not printed)
FLOAT_COLS = ("loss", "lr", "grad_norm", "loss_scale", "step_time_ms", "tokens_per_s", "samples_per_s",
              "tflops", "mfu_pct", "memory_gib", "epoch", "skipped", "nan_iters", "ts")
INT_COLS = ("step", "iter", "rank", "line", "file", "has_loss", "has_grad_norm")
_NONE = -(2**62)


class StepTable:
    def __init__(self) -> None:
        self.f = {c: array("d") for c in FLOAT_COLS}
        self.i = {c: array("q") for c in INT_COLS}
        self.files: list[str] = []
        self._file_ids: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.i["line"])

    def add(self, rec: dict, file: str, line: int, rank: int | None, ts: float | None) -> int:
        fid = self._file_ids.setdefault(file, len(self.files))
        if fid == len(self.files):
            self.files.append(file)
        for c in FLOAT_COLS:
            v = ts if c == "ts" else rec.get(c)
            self.f[c].append(math.nan if v is None else float(v))
        for c, v in (("step", rec.get("step")), ("iter", rec.get("iter")), ("rank", rank), ("line", line),
                     ("file", fid), ("has_loss", int("loss" in rec)), ("has_grad_norm", int("grad_norm" in rec))):
            self.i[c].append(_NONE if v is None else int(v))
        return len(self) - 1

    def get(self, col: str, idx: int):
        if col in self.f:
            v = self.f[col][idx]
            if col in ("loss", "grad_norm"):  # a printed NaN stays NaN; an absent value is None
                return v if self.i["has_" + col][idx] else None
            return None if math.isnan(v) else v
        v = self.i[col][idx]
        if col == "file":
            return self.files[v]
        return None if v == _NONE else v

    def row(self, idx: int) -> dict:
        r = {c: self.get(c, idx) for c in ("step", "iter", "rank")}
        for c in FLOAT_COLS:
            r[c] = self.get(c, idx)
        r["line"], r["file"] = self.get("line", idx), self.get("file", idx)
        return r

    def indices(self, rank: int | None) -> list[int]:
        want = _NONE if rank is None else rank
        col = self.i["rank"]
        return [k for k in range(len(col)) if col[k] == want]

    def ranks(self) -> list[int | None]:
        seen = sorted(set(self.i["rank"]))
        return [None if r == _NONE else r for r in seen]


def _x(t: StepTable, k: int) -> tuple[str, float | int | None]:
    for col in ("step", "iter"):
        v = t.get(col, k)
        if v is not None:
            return col, v
    return "epoch", t.get("epoch", k)


def _where(t: StepTable, k: int) -> dict:
    col, v = _x(t, k)
    return {"x_name": col, "x": v, "line": t.get("line", k), "file": t.get("file", k), "rank": t.get("rank", k),
            "step": t.get("step", k) if t.get("step", k) is not None else t.get("iter", k), "ts": t.get("ts", k)}


def _finding(kind: str, t: StepTable, k: int, message: str, facts: dict) -> dict:
    d = _where(t, k)
    d.update(kind=kind, message=message, facts=facts)
    return d


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def nan_values(t: StepTable, idx: Sequence[int]) -> list[dict]:
    out = []
    nan_loss = [k for k in idx if (v := t.get("loss", k)) is not None and not math.isfinite(v)]
    nan_loss += [k for k in idx if (t.get("nan_iters", k) or 0) > 0 and k not in nan_loss]
    if nan_loss:
        first = min(nan_loss)
        finite = [k for k in idx if k < first and (v := t.get("loss", k)) is not None and math.isfinite(v)]
        steps = [_x(t, k)[1] for k in sorted(nan_loss)]
        f = {"nan_first_step": _x(t, first)[1], "nan_steps": steps[:100], "nan_count": len(steps), "value": "nan"}
        if finite:
            f["last_finite_step"] = _x(t, finite[-1])[1]
            f["last_finite_loss"] = t.get("loss", finite[-1])
        out.append(_finding("nan_loss", t, first, f"loss is NaN/Inf from {_x(t, first)[0]} {steps[0]} "
                            f"({len(steps)} record(s))", f))
    nan_gn = [k for k in idx if (v := t.get("grad_norm", k)) is not None and not math.isfinite(v)]
    if nan_gn:
        k = nan_gn[0]
        out.append(_finding("nan_grad_norm", t, k, f"grad norm is NaN/Inf at {_x(t, k)[0]} {_x(t, k)[1]}",
                            {"nan_grad_norm_first_step": _x(t, k)[1], "nan_count": len(nan_gn), "value": "nan"}))
    zeros = [k for k in idx if t.get("loss", k) == 0.0]
    if zeros:
        k = zeros[0]
        out.append(_finding("zero_loss", t, k, f"loss is exactly 0 in {len(zeros)} record(s) from "
                            f"{_x(t, k)[0]} {_x(t, k)[1]} (steps skipped or the loss masked out)",
                            {"zero_loss_first_step": _x(t, k)[1], "zero_loss_records": len(zeros), "value": 0.0}))
    return out


def _robust(values: list[float]) -> tuple[float, float]:
    med = statistics.median(values)
    mad = statistics.median([abs(v - med) for v in values])
    return med, 1.4826 * mad


def loss_spikes(t: StepTable, idx: Sequence[int], s: Settings) -> list[dict]:
    pts = [(k, v) for k in idx if (v := t.get("loss", k)) is not None and math.isfinite(v)]
    out: list[dict] = []
    window: list[float] = []
    i = 0
    while i < len(pts):
        k, v = pts[i]
        if len(window) >= 1:
            med, sigma = _robust(window[-s.window:])
            thr = med + max(s.spike_spread_k * sigma, s.spike_min_rel * abs(med), s.spike_min_abs,
                            step_noise(window, med, s.spike_spread_k))
            if len(window) < 3:  # a few records only: a jump of SHORT_LOSS_RATIO times the baseline
                thr = med + max(s.spike_min_abs, (SHORT_LOSS_RATIO - 1) * abs(med),
                                step_noise(window, med, s.spike_spread_k))
            if v > thr:
                j = i
                while j + 1 < len(pts) and pts[j + 1][1] > med + (thr - med) / 2:
                    j += 1
                seg = pts[i:j + 1]
                km, vm = max(seg, key=lambda p: p[1])
                recovered = j + 1 < len(pts)
                before = pts[i - 1][0]
                scales = [t.get("loss_scale", kk) for kk, _ in seg]
                scales = [x for x in scales if x is not None]
                f = {"spike_first_step": _x(t, k)[1], "max_loss": vm, "max_loss_step": _x(t, km)[1], "value": vm,
                     "baseline": med, "baseline_loss": pts[i - 1][1], "ratio": vm / med if med else None,
                     "recovered": recovered}
                if t.get("loss_scale", before) is not None:
                    f["loss_scale_before"] = t.get("loss_scale", before)
                if scales:
                    f["loss_scale_min"] = min(scales)
                began = "" if km == k else f", rising from {_x(t, k)[0]} {_x(t, k)[1]}"
                out.append(_finding("loss_spike", t, k, f"loss spikes to {_fmt(vm)} at {_x(t, km)[0]} "
                                    f"{_x(t, km)[1]} (baseline {_fmt(med)}, {f'x{vm / med:.2f}' if med else 'x inf'}"
                                    f"{began})" + ("; recovered" if recovered else "; did not recover"), f))
                i = j + 1
                continue
        window.append(v)
        i += 1
    return out


def grad_norm_jumps(t: StepTable, idx: Sequence[int], s: Settings, spikes: list[dict]) -> list[dict]:
    pts = [(k, v) for k in idx if (v := t.get("grad_norm", k)) is not None and math.isfinite(v) and v > 0]
    spike_lines = {f["line"] for f in spikes}
    jumps = []
    for i in range(1, len(pts)):
        base = [v for _, v in pts[max(0, i - s.window):i]]
        med = statistics.median(base)
        k, v = pts[i]
        need = float(short_grad_ratio(i, s.grad_spike_ratio, s.grad_explosion_ratio))
        if med > 0 and v / med >= need:
            jumps.append((k, v, med, i))
        elif (med > 0 and i < GRAD_HISTORY and s.grad_explosion_ratio <= v / med and i + 1 < len(pts)
              and v / pts[i + 1][1] >= s.grad_explosion_ratio):
            jumps.append((k, v, med, i))  # a short history's one-record peak: the next record falls back as far
    if not jumps:
        return []
    first = jumps[0]
    med = first[2]
    km, vm = max(((k, v) for k, v, _, _ in jumps), key=lambda p: p[1])
    ratio = vm / med
    kind = "grad_norm_explosion" if ratio >= s.grad_explosion_ratio else "grad_norm_spike"
    if kind == "grad_norm_spike" and any(t.get("line", k) in spike_lines for k, *_ in jumps):
        return []  # the loss spike already tells this story
    x = _x(t, km)
    f = {"max_grad_norm": vm, f"max_grad_norm_{x[0]}": x[1], "baseline_grad_norm": med, "baseline": med,
         "value": vm, "ratio": ratio, "first_step": _x(t, first[0])[1], "records": len(jumps)}
    return [_finding(kind, t, first[0], f"grad norm jumps to {_fmt(vm)} at {x[0]} {x[1]} "
                     f"(x{ratio:.1f} the rolling median {_fmt(med)})", f)]


def _speed(t: StepTable, k: int) -> float | None:
    for col in ("tokens_per_s", "samples_per_s", "tflops"):
        v = t.get(col, k)
        if v is not None and v > 0:
            return v
    st = t.get("step_time_ms", k)
    return 1000.0 / max(st, STEP_TIME_FLOOR_MS) if st else None


def throughput_drop(t: StepTable, idx: Sequence[int], s: Settings) -> list[dict]:
    pts = [(k, v) for k in idx[1:] if (v := _speed(t, k)) is not None]  # the first record includes compile time
    for i in range(5, len(pts)):
        base = statistics.median([v for _, v in pts[max(0, i - s.window):i]])
        run = pts[i:i + s.drop_min_records]
        if len(run) < s.drop_min_records or any(v >= s.drop_fraction * base for _, v in run):
            continue
        j = i
        while j < len(pts) and pts[j][1] < s.drop_fraction * base:
            j += 1
        low = statistics.median([v for _, v in pts[i:j]])
        k = pts[i][0]
        f = {"first_step": _x(t, k)[1], "value": low, "baseline": base, "ratio": low / base,
             "recovered": j < len(pts), "slow_records": j - i}
        return [_finding("throughput_drop", t, k, f"throughput falls to {low / base:.0%} of its baseline from "
                         f"{_x(t, k)[0]} {_x(t, k)[1]} for {j - i} record(s)", f)]
    return []


def loss_scale_collapse(t: StepTable, idx: Sequence[int], s: Settings) -> dict | None:
    scales = [(k, v) for k in idx if (v := t.get("loss_scale", k)) is not None and v > 0]
    skipped = [k for k in idx if (t.get("skipped", k) or 0) > 0]
    if not scales and not skipped:
        return None
    facts: dict = {}
    if scales:
        top = max(v for _, v in scales)
        low = min(v for _, v in scales)
        facts.update(loss_scale_first=scales[0][1], loss_scale_last=scales[-1][1], loss_scale_min=low)
        if top / low < s.scale_collapse_factor and not skipped:
            return None
    if skipped:
        facts["skipped_iterations"] = sum(t.get("skipped", k) or 0 for k in skipped)
    k = skipped[0] if skipped else min(scales, key=lambda p: p[1])[0]
    out = _finding("grad_overflow", t, k, "fp16 overflow: " + (
        f"{facts.get('skipped_iterations', 0):g} skipped iteration(s)" if skipped else
        f"loss scale collapsed to {facts['loss_scale_min']:g}"), facts)
    if len(idx) >= 3 and len(skipped) == len(idx):  # every record skipped: nothing trains (issue 22)
        facts["all_steps_skipped"] = True
        out["severity"] = "error"
        out["message"] += f"; every one of the {len(idx)} records skipped its step(s): nothing was trained"
    return out


def silent_tail(t: StepTable, idx: Sequence[int], lines_after: int) -> list[dict]:
    """Without timestamps: the log goes on for many lines after the last step (a hang)."""
    if len(idx) < 5:
        return []
    lines = [t.get("line", k) for k in idx]
    spacing = statistics.median(b - a for a, b in zip(lines, lines[1:]) if b > a) if len(lines) > 1 else 1
    if lines_after < 50 or lines_after < 20 * spacing:
        return []
    k = idx[-1]
    f = {"last_step": _x(t, k)[1], "lines_after_last_step": lines_after, "typical_lines_per_step": spacing}
    return [_finding("hang_no_progress", t, k, f"no training progress after {_x(t, k)[0]} {_x(t, k)[1]}: "
                     f"{lines_after} more lines arrive (steps came every {spacing:g} lines)", f)]


def stalls(t: StepTable, idx: Sequence[int], s: Settings, last_ts: float | None, noise_after: bool) -> list[dict]:
    ts = [(k, v) for k in idx if (v := t.get("ts", k)) is not None]
    if len(ts) < 2:
        return []
    gaps = []
    for (k0, a), (k1, b) in zip(ts, ts[1:]):
        x0, x1 = _x(t, k0)[1], _x(t, k1)[1]
        steps = (x1 - x0) if isinstance(x0, (int, float)) and isinstance(x1, (int, float)) and x1 > x0 else 1
        gaps.append(((b - a) / max(steps, 1), b - a))
    typical = statistics.median(g for g, _ in gaps) if gaps else 0
    limit = max(s.hang_minutes * 60.0, 10 * typical)
    k_last, t_last = ts[-1]
    if last_ts is not None and noise_after and last_ts - t_last > limit:
        f = {"last_step": _x(t, k_last)[1], "silent_s": last_ts - t_last, "typical_interval_s": typical}
        return [_finding("hang_no_progress", t, k_last, f"no training progress for {(last_ts - t_last) / 60:.1f} "
                         f"min after {_x(t, k_last)[0]} {_x(t, k_last)[1]} while other lines keep arriving", f)]
    return []
