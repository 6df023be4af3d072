"""Terminal and Markdown renderers of ``kind: log-analysis`` (llmdiag analyze-log)."""

from __future__ import annotations

from typing import Any

from llmdiag.documents import LogAnalysisDoc, LogFinding, LogMetrics
from llmdiag.reports.base import RenderOptions
from llmdiag.reports.console import captured, make_console

_SEV_STYLE = {"error": "bold red", "warning": "yellow"}
_FACT_SKIP = {"host_oom_killer"}


def _v(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, list):
        shown = ", ".join(_v(x) for x in v[:12])
        return f"[{shown}{', …' if len(v) > 12 else ''}]"
    return str(v)


def _where(f: LogFinding) -> str:
    parts = [f"{f.file}:{f.line}" if f.file else ""]
    if f.rank is not None:
        parts.append(f"rank {f.rank}")
    if f.step is not None:
        parts.append(f"step {f.step}")
    return "  ".join(p for p in parts if p)


def _metrics_line(m: LogMetrics) -> str:
    if not m.num_steps_with_loss:
        return "no training progress lines"
    if m.first_step is not None:
        span = f"steps {_v(m.first_step)}..{_v(m.last_step)}"
    else:
        span = f"epochs {_v(m.first_epoch)}..{_v(m.last_epoch)}"
    s = f"{m.num_steps_with_loss} step(s) with loss, {span}"
    if m.loss_min is not None:
        s += f", loss {_v(m.first_loss)} -> {_v(m.loss_last)} (min {_v(m.loss_min)}, max {_v(m.loss_max)})"
    return s


def summary(doc: LogAnalysisDoc) -> str:
    fs = doc.findings
    errs = sum(f.severity == "error" for f in fs)
    label = {"fail": "FAIL", "warn": "WARN", "pass": "PASS"}.get(doc.status, "?")
    s = f"{label}: {len(fs)} finding(s), {errs} error(s) in {len(doc.files)} file(s)"
    suspects = doc.suspect_ranks or []
    first_report = doc.first_reporting_rank
    first_fail = doc.first_failing_rank
    if suspects:
        # a hang: the rank to drain is the suspect; the first to fail or report is only the first victim
        s += f"; suspect rank(s) {', '.join(map(str, suspects))}"
        if doc.suspect_reason:
            s += f" ({doc.suspect_reason})"
        if first_report is not None and first_report not in suspects:
            s += f"; first reporter rank {first_report}"
        if first_fail is not None and first_fail not in suspects and first_fail != first_report:
            s += f"; first failing rank {first_fail}"
    elif first_fail is not None:
        s += f"; first failing rank {first_fail}"
    return s


def terminal(doc: LogAnalysisDoc, opts: RenderOptions) -> str:
    from rich.text import Text

    con = make_console(opts)
    con.print(Text("training curve: " + _metrics_line(doc.metrics)))
    for p in doc.read.problems[:10]:
        con.print(Text(f"read problem: {p.file}" + (f":{p.line}" if p.line else "") +
                       f": {p.message}", style="dim"))
    for w in doc.warnings:
        con.print(Text(f"warning: {w.message}", style="yellow"))
    for f in doc.findings:
        con.print()
        head = Text(f"{f.severity.upper():<7} ", style=_SEV_STYLE.get(f.severity, ""))
        head.append(f"{f.kind}", style="bold")
        head.append("  " + _where(f), style="dim")
        con.print(head)
        con.print(Text("  " + f.message))
        facts = ", ".join(f"{k}={_v(v)}" for k, v in f.facts.items() if k not in _FACT_SKIP)
        if facts:
            con.print(Text("  facts: " + facts, style="dim"))
        con.print(Text("  cause: " + (f.cause or "")))
        con.print(Text("  next:  " + (f.next_step or "")))
        con.print(Text(f"  runbook: llmdiag runbook {f.runbook}", style="dim"))
    roots = doc.root_causes
    if roots:
        con.print()
        con.print(Text("root-cause candidates:", style="bold"))
        for i, r in enumerate(roots, 1):
            con.print(Text(f"  {i}. {r.kind}" + (f" (rank {r.rank})" if r.rank is not None else "")
                           + f": {r.summary}"))
    con.print()
    con.print(Text(summary(doc), style="bold"))
    return captured(con)


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").replace("<", "&lt;")


def markdown(doc: LogAnalysisDoc, opts: RenderOptions) -> str:
    lines = ["# llmdiag analyze-log report", "", f"**{summary(doc)}**", "",
             f"Training curve: {_md(_metrics_line(doc.metrics))}", ""]
    fs = doc.findings
    if fs:
        lines += ["| severity | kind | where | message | runbook |", "|---|---|---|---|---|"]
        for f in fs:
            lines.append(f"| {f.severity} | {f.kind} | {_md(_where(f))} | {_md(f.message)} | "
                         f"`{f.runbook}` |")
        lines.append("")
        for f in fs:
            lines += [f"## {f.kind} ({_md(_where(f))})", "", _md(f.message), "",
                      f"- cause: {_md(f.cause or '')}", f"- next step: {_md(f.next_step or '')}",
                      f"- runbook: `llmdiag runbook {f.runbook}`"]
            for k, v in f.facts.items():
                lines.append(f"- `{k}`: {_md(_v(v))}")
            lines.append("")
    roots = doc.root_causes
    if roots:
        lines += ["## Root-cause candidates", ""]
        lines += [f"{i}. **{r.kind}**: {_md(r.summary)}" for i, r in enumerate(roots, 1)]
        lines.append("")
    return "\n".join(lines) + "\n"
