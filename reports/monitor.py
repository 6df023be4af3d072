"""Terminal and Markdown renderers of ``kind: monitor`` (llmdiag monitor's summary report).

Tolerant of missing keys: a document from an older or partial run still renders.
"""

from __future__ import annotations

from typing import Any

from llmdiag.documents import Alert, MonitorDoc, Stat
from llmdiag.reports.base import RenderOptions
from llmdiag.reports.console import captured, make_console, status_text

#: (stats key, column title, format)
_COLUMNS = (
    ("utilization_gpu_pct", "util %", "{:.0f}"),
    ("memory_used_pct", "mem %", "{:.1f}"),
    ("temperature_c", "temp °C", "{:.0f}"),
    ("power_w", "power W", "{:.0f}"),
    ("sm_clock_mhz", "SM MHz", "{:.0f}"),
    ("cpu_pct", "cpu %", "{:.0f}"),
    ("mem_pct", "mem %", "{:.1f}"),
    ("load_1m", "load", "{:.2f}"),
)


def _fmt(fmt: str, v: Any) -> str:
    return "-" if v is None else fmt.format(v)


def _cell(stat: Stat | None, fmt: str) -> str:
    if stat is None or stat.mean is None:
        return "-"
    return f"{_fmt(fmt, stat.mean)} / {_fmt(fmt, stat.max)}"


def headline(d: MonitorDoc) -> str:
    n = d.alerts_total if d.alerts_total is not None else len(d.alerts)
    span = ""
    if d.finished_at and d.started_at:
        span = f" over {d.finished_at - d.started_at:.1f} s"
    node = "?" if d.node is None else d.node
    interval = "?" if d.interval_s is None else d.interval_s
    return f"{node}: {d.samples or 0} sample(s) every {interval} s{span}, {n} alert(s)"


def rows(d: MonitorDoc) -> list[tuple[str, list[tuple[str, str]]]]:
    """(device, [(column, "mean / max")]) for the host and each GPU."""
    out = []
    for dev, stats in d.stats.items():
        cols = [(title, _cell(stats.get(key), fmt)) for key, title, fmt in _COLUMNS if key in stats]
        out.append((dev, cols))
    return out


def _notes(d: MonitorDoc) -> list[str]:
    notes = [str(d.gpu_note or "")]
    if d.stop_reason:
        notes.append(f"stopped: {d.stop_reason}")
    oh = d.overhead
    if oh.round_ms_mean is not None:
        notes.append(f"sampling cost: {oh.round_ms_mean:.1f} ms per round (max {oh.round_ms_max or 0:.1f} ms)"
                     + (f", {oh.cpu_pct_of_one_core:.2f}% of one CPU core" if oh.cpu_pct_of_one_core
                        is not None else ""))
    if d.timeline is not None:
        notes.append(f"timeline: {d.timeline.path} ({d.timeline.rows} rows)")
    return [n for n in notes if n]


def _alert_line(a: Alert) -> str:
    return (f"{str(a.severity or '').upper()} {a.rule} {a.device or ''}: {a.message}"
            + (f" (llmdiag runbook {a.runbook})" if a.runbook else ""))


def terminal(d: MonitorDoc, opts: RenderOptions) -> str:
    from rich.table import Table
    from rich.text import Text

    con = make_console(opts)
    con.print(Text.assemble(status_text(str(d.status or "skip")), " ", Text(headline(d))))
    for n in _notes(d):
        con.print(Text(f"  {n}"))
    table_rows = rows(d)
    if table_rows:
        t = Table(title="mean / max per device", show_lines=False)
        titles = list(dict.fromkeys(title for _, cols in table_rows for title, _ in cols))
        t.add_column("device")
        for title in titles:
            t.add_column(title, justify="right")
        for dev, cols in table_rows:
            by = dict(cols)
            t.add_row(Text(dev), *[Text(by.get(title, "")) for title in titles])
        con.print(t)
    alerts = d.alerts
    if alerts:
        con.print(Text("Alerts:"))
        for a in alerts:
            con.print(Text(f"  {_alert_line(a)}"))
    if len(alerts) < (d.alerts_total or 0):
        con.print(Text(f"  ... and {d.alerts_total - len(alerts)} more (see alerts_by_rule in -f json)"))
    return captured(con)


def markdown(d: MonitorDoc, opts: RenderOptions) -> str:
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    out = [f"# llmdiag monitor: {str(d.status or 'skip').upper()}", "", esc(headline(d)), ""]
    out += [f"- {esc(n)}" for n in _notes(d)]
    table_rows = rows(d)
    if table_rows:
        titles = list(dict.fromkeys(title for _, cols in table_rows for title, _ in cols))
        out += ["", "Mean / max per device:", "", "| device | " + " | ".join(titles) + " |",
                "|---|" + "---:|" * len(titles)]
        for dev, cols in table_rows:
            by = dict(cols)
            out.append(f"| {esc(dev)} | " + " | ".join(by.get(t, "") for t in titles) + " |")
    alerts = d.alerts
    if alerts:
        out += ["", "## Alerts", ""] + [f"- {esc(_alert_line(a))}" for a in alerts]
    return "\n".join(out) + "\n"
