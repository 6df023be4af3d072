"""Terminal and Markdown renderers of ``kind: monitor`` (llmdiag monitor's summary report).

Tolerant of missing keys: a document from an older or partial run still renders.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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


def _cell(stat: Mapping[str, Any] | None, fmt: str) -> str:
    if not stat or stat.get("mean") is None:
        return "-"
    return f"{_fmt(fmt, stat.get('mean'))} / {_fmt(fmt, stat.get('max'))}"


def headline(doc: Mapping[str, Any]) -> str:
    n = doc.get("alerts_total", len(doc.get("alerts") or ()))
    span = ""
    if doc.get("finished_at") and doc.get("started_at"):
        span = f" over {doc['finished_at'] - doc['started_at']:.1f} s"
    return (f"{doc.get('node', '?')}: {doc.get('samples', 0)} sample(s) every {doc.get('interval_s', '?')} s{span}, "
            f"{n} alert(s)")


def rows(doc: Mapping[str, Any]) -> list[tuple[str, list[tuple[str, str]]]]:
    """(device, [(column, "mean / max")]) for the host and each GPU."""
    out = []
    for dev, stats in (doc.get("stats") or {}).items():
        cols = [(title, _cell(stats.get(key), fmt)) for key, title, fmt in _COLUMNS if key in stats]
        out.append((dev, cols))
    return out


def _notes(doc: Mapping[str, Any]) -> list[str]:
    notes = [str(doc.get("gpu_note") or "")]
    if doc.get("stop_reason"):
        notes.append(f"stopped: {doc['stop_reason']}")
    oh = doc.get("overhead") or {}
    if oh.get("round_ms_mean") is not None:
        notes.append(f"sampling cost: {oh['round_ms_mean']:.1f} ms per round (max {oh.get('round_ms_max', 0):.1f} ms)"
                     + (f", {oh['cpu_pct_of_one_core']:.2f}% of one CPU core" if oh.get("cpu_pct_of_one_core")
                        is not None else ""))
    if isinstance(doc.get("timeline"), Mapping):
        notes.append(f"timeline: {doc['timeline'].get('path')} ({doc['timeline'].get('rows')} rows)")
    return [n for n in notes if n]


def _alert_line(a: Mapping[str, Any]) -> str:
    return (f"{str(a.get('severity', '')).upper()} {a.get('rule')} {a.get('device') or ''}: {a.get('message')}"
            + (f" (llmdiag runbook {a['runbook']})" if a.get("runbook") else ""))


def terminal(doc: Mapping[str, Any], opts: RenderOptions) -> str:
    from rich.table import Table
    from rich.text import Text

    con = make_console(opts)
    con.print(Text.assemble(status_text(str(doc.get("status", "skip"))), " ", Text(headline(doc))))
    for n in _notes(doc):
        con.print(Text(f"  {n}"))
    table_rows = rows(doc)
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
    alerts = doc.get("alerts") or []
    if alerts:
        con.print(Text("Alerts:"))
        for a in alerts:
            con.print(Text(f"  {_alert_line(a)}"))
    if len(alerts) < doc.get("alerts_total", 0):
        con.print(Text(f"  ... and {doc['alerts_total'] - len(alerts)} more (see alerts_by_rule in -f json)"))
    return captured(con)


def markdown(doc: Mapping[str, Any], opts: RenderOptions) -> str:
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    out = [f"# llmdiag monitor: {str(doc.get('status', 'skip')).upper()}", "", esc(headline(doc)), ""]
    out += [f"- {esc(n)}" for n in _notes(doc)]
    table_rows = rows(doc)
    if table_rows:
        titles = list(dict.fromkeys(title for _, cols in table_rows for title, _ in cols))
        out += ["", "Mean / max per device:", "", "| device | " + " | ".join(titles) + " |",
                "|---|" + "---:|" * len(titles)]
        for dev, cols in table_rows:
            by = dict(cols)
            out.append(f"| {esc(dev)} | " + " | ".join(by.get(t, "") for t in titles) + " |")
    alerts = doc.get("alerts") or []
    if alerts:
        out += ["", "## Alerts", ""] + [f"- {esc(_alert_line(a))}" for a in alerts]
    return "\n".join(out) + "\n"
