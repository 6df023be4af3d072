"""HTML pages of the training-side documents: analyze-log, estimate-memory and monitor.

Same conventions as :mod:`llmdiag.reports.html` (status first, inline SVG plots, everything
escaped); the shared pieces come from there.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any

from llmdiag import documents as D
from llmdiag.reports import plots
from llmdiag.reports import memory_estimate as memory_text
from llmdiag.reports.base import RenderOptions
from llmdiag.reports.html import fix_html, when_text
from llmdiag.reports.htmlkit import badge, banner, e, fmt, gib, md_inline, page, runbook_html, table
from llmdiag.vocab import AlertSeverity, Status, Verdict


# ---------------------------------------------------------------- log-analysis


def _findings(fs: list[D.LogFinding]) -> str:
    if not fs:
        return "<p>No problem found in the log.</p>"
    order = {Status.FAIL: 0, Status.WARN: 1, Status.PASS: 2}
    out = []
    for f in sorted(fs, key=lambda f: order.get(f.status, 3)):
        meta = " · ".join(x for x in (f.where, f"rank {f.rank}" if f.rank is not None else "",
                                      f"step {f.step}" if f.step is not None else "",
                                      f"{f.count} times" if (f.count or 1) > 1 else "") if x)
        out.append(f'<div class="finding {f.status}">{badge(f.status)} <b>{e(f.kind)}</b> '
                   f'<code>{e(meta)}</code><div>{e(f.message)}</div>'
                   + (f"<div><b>Cause:</b> {e(f.cause)}</div>" if f.cause else "")
                   + (f"<div class='fix'><b>Next step:</b> {md_inline(f.next_step)}</div>" if f.next_step else "")
                   + runbook_html(f.runbook) + "</div>")
    return "".join(out)


def _series_chart(rows: list[D.StepRow], key: str, label: str, marks: list[plots.Mark], *, logy: bool,
                  by_rank: bool, title: str = "", width: int = 560) -> str:
    lines = []
    bad: list[float] = []
    ranks = list(dict.fromkeys(r.rank for r in rows)) if by_rank else [None]
    for i, rank in enumerate(ranks[:8]):
        sel = [r for r in rows if (not by_rank or r.rank == rank) and r.x is not None and getattr(r, key) is not None]
        sel.sort(key=lambda r: r.x)
        xs = [float(r.x) for r in sel]
        ys = [D.number(getattr(r, key)) for r in sel]
        bad += [x for x, r in zip(xs, sel) if D.number(getattr(r, key)) is None]
        color = plots.COLORS[i % len(plots.COLORS)]
        name = f"rank {rank}" if by_rank and rank is not None else label
        if len(xs) > 20:
            lines.append(plots.Line("", xs, ys, color=color, faint=True))
            lines.append(plots.Line(name + " (smoothed)", xs, plots.smooth(ys), color=color))
        else:
            lines.append(plots.Line(name, xs, ys, color=color))
    if logy and not all(y is None or y > 0 for ln in lines for y in ln.ys):
        logy = False
    return plots.chart(lines, title=title or label + (" (log scale)" if logy else ""), xlabel="step", ylabel=label,
                       logy=logy, marks=marks, bad_x=sorted(set(bad)), width=width)


def _ranks_differ(rows: list[D.StepRow], key: str) -> bool:
    """True when two ranks log different values at the same step (each rank's own loss, not
    the all-reduced one every rank prints)."""
    at: dict[Any, set[float]] = {}
    for r in rows:
        v = D.number(getattr(r, key))
        if v is not None:
            at.setdefault(r.x, set()).add(round(v, 6))
    return any(len(vs) > 1 for vs in at.values())


def _spread(rows: list[D.StepRow], key: str) -> float:
    vals = [v for v in (D.number(getattr(r, key)) for r in rows) if v is not None and v > 0]
    return max(vals) / min(vals) if vals else 1.0


def log_analysis(d: D.LogAnalysisDoc, opts: RenderOptions) -> str:
    m = d.metrics
    headline = f"{len(d.findings)} finding(s)"
    if m.first_step is not None:
        headline += f" in steps {fmt(m.first_step)}..{fmt(m.last_step)}"
    lines = [e(", ".join(d.files[:4]) + (f" and {len(d.files) - 4} more" if len(d.files) > 4 else ""))]
    shown = (("loss_min", m.loss_min), ("last_loss", m.last_loss), ("lr_last", m.lr_last))
    key = [f"{k.replace('_', ' ')} {fmt(v)}" for k, v in shown if v is not None]
    if key:
        lines.append(e(" · ".join(key)))
    body = [banner(D.status_of(d.status), headline, lines), "<h2>Findings</h2>", _findings(d.findings)]
    rows = [r for r in d.steps if r.x is not None]
    marks = [plots.Mark(f.kind, x=float(f.step)) for f in d.findings if f.step is not None][:12]
    ranks = {r.rank for r in rows}
    charts = []
    if rows:
        for key_, label in (("loss", "loss"), ("grad_norm", "grad norm")):
            if not any(getattr(r, key_) is not None for r in rows):
                continue
            logy = _spread(rows, key_) > 10
            if len(ranks) > 1 and _ranks_differ(rows, key_):  # small multiples: one panel per rank
                panels = [_series_chart([r for r in rows if r.rank == rk], key_, label, marks, logy=logy, by_rank=False,
                                        title=f"{label}, rank {rk}", width=340) for rk in sorted(ranks, key=str)[:16]]
                charts.append(f"<div class='group'><h3>{e(label)} per rank</h3><div class='charts small'>"
                              f"{''.join(panels)}</div></div>")
            else:
                one = [r for r in rows if r.rank == min(ranks, key=str)] if len(ranks) > 1 else rows
                charts.append(_series_chart(one, key_, label, marks, logy=logy, by_rank=False))
                other = _series_chart(one, key_, label, marks, logy=not logy, by_rank=False)
                if other:
                    charts.append(f"<details><summary>{e(label)} on a {'linear' if logy else 'log'} scale</summary>"
                                  f"{other}</details>")
        for key_, label in (("tokens_per_s", "tokens/s"), ("samples_per_s", "samples/s"), ("tflops", "TFLOP/s"),
                            ("step_time_ms", "step time (ms)"), ("lr", "learning rate")):
            if any(D.number(getattr(r, key_)) is not None for r in rows):
                charts.append(_series_chart(rows, key_, label, marks, logy=False,
                                            by_rank=len(ranks) > 1 and _ranks_differ(rows, key_)))
    if charts:
        body.append("<h2>Training progress</h2><div class='charts'>" + "".join(charts) + "</div>"
                    "<p class='muted'>Faint: raw values; bold: smoothed. Dashed red lines: steps with findings; "
                    "red ×: NaN/Inf values.</p>")
    return page("llmdiag analyze-log report", "".join(body), d)


# ---------------------------------------------------------------- estimate-memory

_PART_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f")
_PLAN_WORDS = (("tp", "tp"), ("pp", "pp"), ("dp_size", "dp"), ("cp", "cp"), ("ep", "ep"), ("zero", "ZeRO"),
               ("micro_batch", "micro batch"), ("seq_len", "seq"), ("precision", ""), ("optimizer", ""),
               ("recompute", "recompute"))


def plan_line(d: D.MemoryEstimateDoc) -> str:
    p = d.plan
    bits = [str((d.model.get("name") if d.model else None) or "model")]
    for k, word in _PLAN_WORDS:
        v = p.get(k)
        if v is None or (k in ("cp", "ep") and v == 1):
            continue
        bits.append(f"{word} {v}".strip())
    if d.plan.get("sequence_parallel"):
        bits.append("sequence parallel")
    if d.plan.get("world_size"):
        bits.append(f"{d.plan.get('world_size')} GPUs")
    return " · ".join(bits)


def _stacked_bar(parts: Mapping[str, float], capacity: float | None, total: float | None) -> str:
    scale = max(x for x in (total or 0, capacity or 0, 1) if x) * 1.05
    segs = "".join(f'<div style="width:{100 * b / scale:.2f}%;background:{c}" title="{e(k)}: {gib(b)}">{e(k)}</div>'
                   for (k, b), c in zip(parts.items(), _PART_COLORS * 2) if b > 0)
    limit = (f'<div class="limit" style="left:{100 * capacity / scale:.2f}%" title="GPU memory {gib(capacity)}"></div>'
             if capacity else "")
    # the limit is positioned inside the bar, so both percentages are of the same box
    return f'<div class="cap"><div class="bar">{segs}{limit}</div></div>'


def _memory_body(d: D.MemoryEstimateDoc) -> str:
    out = [f'<p class="lead">Plan: <b>{e(plan_line(d))}</b></p>', _stacked_bar(d.parts, d.gpu_memory, d.total)]
    if d.gpu_memory:
        out.append(f'<p class="muted">dashed red line: GPU memory {gib(d.gpu_memory)} ({e(d.gpu_memory_source or "")})'
                   f"; stage {fmt(d.worst_stage)} (the fullest)</p>")
    rows = [[e(ln.name), f'<span class="num">{gib(ln.bytes)}</span>', f"<code>{e(ln.formula)}</code>"] for ln in d.lines] \
        or [[e(k), f'<span class="num">{gib(b)}</span>', ""] for k, b in d.parts.items()]
    rows.append(["<b>total</b>", f"<b>{gib(d.total)}</b>", ""])
    out.append(table(["component", "per GPU", "formula"], rows))
    pk = d.peak
    if pk is not None and pk.allocated:
        out.append(f'<p>Peak in <b>{e(pk.phase or "?")}</b>: {gib(pk.allocated)} allocated, '
                   f'{gib(pk.reserved)} reserved by the caching allocator, {gib(pk.device)} on the device</p>')
    if d.memory:
        from llmdiag.reports.memory_estimate import placement

        out.append(f"<p>{e(placement(d))}</p>")
    if d.warnings:
        out.append("<h3>Warnings</h3>" + "".join(f'<div class="finding warn">{badge(Status.WARN)} {e(w)}</div>'
                                                  for w in d.warnings))
    if len(d.stage_totals) > 1:
        out.append("<h3>Per pipeline stage</h3>" + "".join(
            f"<div>stage {e(s)}: {gib(t)}</div>" + _stacked_bar({"total": t}, d.gpu_memory, max(d.stage_totals.values()))
            for s, t in d.stage_totals.items()))
    if d.plan_checks:
        out.append("<h3>Plan checks</h3>" + "".join(
            f'<div class="finding {D.status_of(c.severity, Status.WARN)}">'
            f'{badge(D.status_of(c.severity, Status.WARN))} <b>{e(c.check)}</b>: {e(c.message)}{fix_html(c.fix)}'
            f"{runbook_html(c.runbook)}</div>" for c in d.plan_checks))
    if d.suggestions:
        cap = d.gpu_memory
        out.append("<h3>Plans that fit</h3>" + table(["change", "per GPU", "headroom", "verdict"], [
            [e(s.change), f'<span class="num">{gib(s.total)}</span>',
             f'<span class="num">{gib(cap - s.total) if cap else "-"}</span>', e(s.verdict)] for s in d.suggestions]))
    if memory_text.smallest(d):
        out.append(f"<h3>Fewest GPUs</h3><div>{e(memory_text.smallest(d))}</div>")
    return "".join(out)


def memory_estimate(d: D.MemoryEstimateDoc, opts: RenderOptions) -> str:
    head = f"{d.verdict}: {gib(d.total)} per GPU of {gib(d.gpu_memory)}"
    lines = []
    if d.headroom is not None:
        lines.append(e(f"headroom {gib(d.headroom)}" if d.headroom >= 0 else f"short by {gib(-d.headroom)}"))
    if d.oom_when:
        lines.append(e(f"runs out of memory at: {d.oom_when}"))
    st = D.status_of(d.status)
    body = banner(st, head, lines) + _memory_body(d) + runbook_html(
        "cuda-oom" if d.verdict in (Verdict.TIGHT, Verdict.OUT_OF_MEMORY) else None)
    return page("llmdiag estimate-memory report", body, d)


# ---------------------------------------------------------------- monitor

_GPU_SERIES = (("gpu_util", "util %"), ("gpu_mem", "memory %"), ("gpu_temp", "°C"), ("gpu_power", "power % of limit"))


def _clock(start: float | None, span: float):
    """Wall-clock tick labels (UTC), to the tenth of a second for runs shorter than a minute."""
    if start is None:
        return lambda t: f"{t:g}s"

    def label(t: float) -> str:
        text = _dt.datetime.fromtimestamp(start + t, _dt.timezone.utc).strftime("%H:%M:%S.%f")
        return text[:-5] if span < 60 else text[:-7]
    return label


def monitor(d: D.MonitorDoc, opts: RenderOptions) -> str:
    head = f"{d.samples} sample(s) on {d.node}, {len(d.alerts)} alert(s)"
    lines = [e(d.gpu_note or f"{d.gpu_count} GPU(s)")]
    if d.started_at:
        lines.append(e(f"{when_text(d.started_at)} to {when_text(d.finished_at)}; {d.stop_reason or ''}"))
    body = [banner(D.status_of(d.status), head, lines)]
    if d.alerts:
        body.append("<h2>Alerts</h2>")
        by: dict[tuple[str, str], list[D.Alert]] = {}
        for a in d.alerts:
            by.setdefault((a.rule, a.severity), []).append(a)
        for (rule, sev), al in sorted(by.items(), key=lambda kv: kv[0][1] != AlertSeverity.CRITICAL):
            st = Status.FAIL if sev == AlertSeverity.CRITICAL else Status.WARN
            items = "".join(f"<li><code>{e(when_text(a.time))}</code> {e(a.device or '')}: {e(a.message)}</li>" for a in al[:10])
            body.append(f'<div class="finding {st}">{badge(st)} <b>{e(rule)}</b> ({len(al)})<ul class="compact">{items}'
                        f"</ul>{runbook_html(al[0].runbook)}</div>")
    start = d.started_at
    rel = (lambda t: t - start) if start else (lambda t: t)
    span = max((s.t[-1] for g in d.series.groups().values() for s in g.values() if s.t), default=0.0)
    gpus = list(dict.fromkeys(k for g, _ in _GPU_SERIES for k in d.series.groups().get(g, {})))
    panels = []
    for gpu in gpus:
        lns = [plots.Line(label, s.t, [D.number(v) for v in s.v]) for g, label in _GPU_SERIES
               if (s := d.series.groups().get(g, {}).get(gpu)) is not None]
        marks = [plots.Mark(a.rule, x=rel(a.time), color="#c62828" if a.severity == AlertSeverity.CRITICAL else "#b26a00")
                 for a in d.alerts if a.device == gpu and a.time is not None]
        panels.append(plots.chart(lns, title=gpu, xlabel="time (UTC)", marks=marks, xfmt=_clock(start, span), width=340,
                                  height=180, y0=True))
    if panels:
        body.append("<h2>GPUs</h2><div class='charts small'>" + "".join(panels) + "</div>"
                    "<p class='muted'>Utilisation, memory in use and power draw in % (power of the enforced limit), "
                    "temperature in °C. Dashed lines: alerts on that GPU (red: critical).</p>")
    host = d.series.host
    if host:
        body.append("<h2>Host</h2>" + plots.chart([plots.Line(k, s.t, [D.number(v) for v in s.v]) for k, s in host.items()],
                                                   title="host CPU and memory (%)", xlabel="time (UTC)", xfmt=_clock(start, span),
                                                   y0=True))
    latest = d.latest
    if latest and latest.gpus:
        cols = [("index", "gpu"), ("utilization_gpu_pct", "util %"), ("memory_used_pct", "mem %"), ("temperature_c", "°C"),
                ("power_w", "W"), ("sm_clock_mhz", "SM MHz"), ("ecc_uncorrectable_volatile", "ECC unc."),
                ("xid_count", "Xid"), ("throttle_reasons", "throttle")]
        body.append("<h2>Latest sample</h2>" + table([c[1] for c in cols],
                                                      [[e(fmt(g.get(k))) for k, _ in cols] for g in latest.gpus]))
    return page("llmdiag monitor report", "".join(body), d)
