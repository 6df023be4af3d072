"""Terminal and Markdown renderers of the cluster health report (``kind: cluster``)."""

from __future__ import annotations

from typing import Any

from llmdiag.documents import Check, ClusterDoc, Evidence, NodeEntry
from llmdiag.reports import cluster_sections as sections
from llmdiag.reports.base import RenderOptions
from llmdiag.reports.console import STATUS_LABEL, captured, make_console, status_text
from llmdiag.vocab import Status


def _fmt_value(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list):
        return ", ".join(_fmt_value(x) for x in v)
    if isinstance(v, dict):
        return ", ".join(f"{k}={_fmt_value(x)}" for k, x in v.items())
    return str(v)


def evidence_line(ev: Evidence) -> str:
    unit = f" {ev.unit}" if ev.unit else ""
    text = f"{ev.name}: {_fmt_value(ev.observed)}{unit}"
    if ev.expected is not None:
        text += f" (expected {_fmt_value(ev.expected)}{unit})"
    return text


def summary_line(doc: ClusterDoc) -> str:
    c = doc.counts or {}
    nodes = len(doc.nodes)
    parts = [f"{c.get(s, 0)} {s}" for s in (Status.PASS, Status.WARN, Status.FAIL, Status.SKIP)]
    line = f"{STATUS_LABEL.get(doc.status, doc.status)}: {', '.join(parts)} on {nodes} node(s)"
    missing = doc.missing_nodes or []
    if missing:
        line += f"; missing: {', '.join(missing)}"
    dur = _duration(doc)
    if dur is not None:
        line += f" in {dur:.1f} s"
    return line


def _duration(doc: ClusterDoc) -> float | None:
    """The run's length on one clock (``duration_s``: rank 0's monotonic clock). A saved report
    from before it existed: the one node's own wall clock; never the wall clocks of several
    nodes subtracted, which a skewed node would stretch to minutes."""
    if isinstance(doc.duration_s, (int, float)):
        return float(doc.duration_s)
    nodes = doc.nodes
    if len(nodes) == 1 and nodes[0].started_at and nodes[0].finished_at:
        return nodes[0].finished_at - nodes[0].started_at
    return None


def _groups(doc: ClusterDoc) -> list[tuple[str, list[Check]]]:
    groups: dict[str, list] = {}
    for n in doc.nodes:
        groups.setdefault(n.node, [])
    cluster: list = []
    for r in doc.results:
        if r.scope == "cluster":
            cluster.append(r)
        else:
            groups.setdefault(r.node, []).append(r)
    out = list(groups.items())
    if cluster:
        out.append(("cluster", cluster))
    return out


def terminal(doc: ClusterDoc, opts: RenderOptions) -> str:
    """One node: its full table. More nodes: what to read in ten seconds — what failed, where
    and the fix (identical findings on several nodes once), one line per node, the cluster
    sections; the full per-node detail is in ``-f json|markdown|html -o FILE``."""
    if len(doc.nodes) > 1:
        return _terminal_summary(doc, opts)
    return _terminal_full(doc, opts)


def _problems(doc: ClusterDoc) -> list[tuple[Check, list[str]]]:
    """Non-pass results, fails first; the same check with the same fix on several nodes is one
    entry naming every node."""
    order = {Status.FAIL: 0, Status.WARN: 1}
    groups: dict[tuple, tuple[Check, list[str]]] = {}
    for r in doc.results:
        if r.status not in order:
            continue
        key = (r.status, r.probe, r.check, r.remediation)
        if key in groups:
            groups[key][1].append(r.node)
        else:
            groups[key] = (r, [r.node])
    return sorted(groups.values(), key=lambda g: order[g[0].status])


def _label(r: Check) -> str:
    return r.probe if r.check == "probe" else f"{r.probe}/{r.check}"


def _node_line(node: NodeEntry, results: list[Check]) -> tuple[str, str, str]:
    counts = {s: sum(r.status == s for r in results) for s in (Status.PASS, Status.WARN, Status.FAIL, Status.SKIP)}
    bad = [_label(r) for r in results if r.status in (Status.FAIL, Status.WARN)]
    text = ", ".join(f"{counts[s]} {s}" for s in counts if counts[s])
    if bad:
        text += ": " + ", ".join(bad[:4]) + (f" and {len(bad) - 4} more" if len(bad) > 4 else "")
    status = Status.worst(s for s in counts if counts[s])
    return status, node.node, text


def _terminal_summary(doc: ClusterDoc, opts: RenderOptions) -> str:
    from rich.table import Table
    from rich.text import Text

    from llmdiag.cluster.compare import node_list

    con = make_console(opts)
    problems = _problems(doc)
    if problems:
        table = Table(title=Text("what failed, where, and the fix", style="bold"), title_justify="left",
                      box=None, pad_edge=False, header_style="bold")
        table.add_column("status", no_wrap=True)
        table.add_column("where", overflow="fold")
        table.add_column("finding", overflow="fold")
        for r, nodes in problems[:PROBLEMS_SHOWN]:
            body = Text(f"{_label(r)}: {r.summary}")
            for e in (r.evidence or [])[:2]:
                body.append("\n  " + evidence_line(e), style="dim")
            if r.remediation:
                body.append("\n  fix: " + r.remediation)
            if r.runbook:
                body.append(f"\n  runbook: llmdiag runbook {r.runbook}", style="dim")
            table.add_row(status_text(r.status), Text(node_list(nodes)), body)
        con.print(table)
        if len(problems) > PROBLEMS_SHOWN:
            con.print(Text(f"... and {len(problems) - PROBLEMS_SHOWN} more findings (see -f json/markdown/html)"))
        con.print()
    nodes = Table(title=Text("nodes", style="bold"), title_justify="left", box=None, pad_edge=False,
                  header_style="bold")
    for col in ("status", "node", "checks"):
        nodes.add_column(col, overflow="fold", no_wrap=col != "checks")
    groups = dict(_groups(doc))
    for n in doc.nodes:
        status, name, text = _node_line(n, groups.get(n.node, []))
        nodes.add_row(status_text(status), Text(name), Text(text))
    con.print(nodes)
    con.print()
    _terminal_tail(doc, con)
    con.print(Text("every node's full results: -f json|markdown|html -o FILE", style="dim"))
    return captured(con)


#: At most this many findings in the terminal summary (the files have all of them).
PROBLEMS_SHOWN = 20


def _terminal_full(doc: ClusterDoc, opts: RenderOptions) -> str:
    from rich.table import Table
    from rich.text import Text

    con = make_console(opts)
    for node, results in _groups(doc):
        title = "cluster-wide checks" if node == "cluster" else f"node {node}"
        table = Table(title=Text(title, style="bold"), title_justify="left", expand=False, show_lines=False,
                      pad_edge=False, box=None, header_style="bold")
        table.add_column("status", no_wrap=True)
        table.add_column("check", no_wrap=True)
        table.add_column("result", overflow="fold")
        for r in results:
            body = Text(r.summary)
            if r.status != Status.PASS:
                for ev in r.evidence or []:
                    body.append("\n  " + evidence_line(ev), style="dim")
                if r.remediation:
                    body.append("\n  fix: " + r.remediation)
                if r.runbook:
                    body.append(f"\n  runbook: llmdiag runbook {r.runbook}", style="dim")
            label = _label(r)
            if node == "cluster" and r.node not in (None, "cluster"):
                label += f" @{r.node}"
            table.add_row(status_text(r.status), Text(label), body)
        con.print(table)
        con.print()
    _terminal_tail(doc, con)
    return captured(con)


def _terminal_sections(doc: ClusterDoc, con) -> None:
    from rich.table import Table
    from rich.text import Text

    def table(title: str, cols: list[str], rows: list[tuple[str, ...]]) -> None:
        t = Table(title=Text(title, style="bold"), title_justify="left", box=None, pad_edge=False,
                  header_style="bold")
        for c in cols:
            t.add_column(c, overflow="fold")
        for r in rows:
            t.add_row(*(Text(x) for x in r))
        con.print(t)
        con.print()

    rows = sections.consistency_rows(doc)
    if rows:
        table("consistency across nodes (odd ones out)", ["fact", "differs on", "majority"], rows)
    head, prow, more = sections.port_rows(doc)
    if prow:
        table(f"port matrix: {head}", ["connection", "outcome", "detail"],
              prow + ([(f"... and {more} more", "", "")] if more else []))
    mrows = sections.missing_rows(doc)
    if mrows:
        table("nodes without a report", ["node", "state", "why"], mrows)


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", "<br>")


def markdown(doc: ClusterDoc, opts: RenderOptions) -> str:
    lines = [f"# llmdiag {doc.command or 'preflight'} report", "", f"**{summary_line(doc)}**", ""]
    missing = doc.missing_nodes or []
    if missing:
        lines += [f"Missing nodes: {', '.join(missing)}", ""]
    lines += _markdown_sections(doc)
    for node, results in _groups(doc):
        lines += [f"## {'Cluster-wide checks' if node == 'cluster' else 'Node ' + node}", ""]
        lines += ["| status | check | result |", "|---|---|---|"]
        for r in results:
            label = _label(r)
            if node == "cluster" and r.node not in (None, "cluster"):
                label += f" @{r.node}"
            lines.append(f"| {STATUS_LABEL.get(r.status, r.status)} | {_md_escape(label)} | {_md_escape(r.summary)} |")
        lines.append("")
        problems = [r for r in results if r.status != Status.PASS]
        if problems:
            lines += ["### Details", ""]
            for r in problems:
                lines.append(f"- **{STATUS_LABEL.get(r.status)} {_label(r)}**: {r.summary}")
                for ev in r.evidence or []:
                    lines.append(f"  - {evidence_line(ev)}")
                if r.remediation:
                    lines.append(f"  - fix: {r.remediation}")
                if r.runbook:
                    lines.append(f"  - runbook: `llmdiag runbook {r.runbook}`")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _md_table(title: str, cols: list[str], rows: list[tuple[str, ...]]) -> list[str]:
    out = [f"## {title}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(_md_escape(x) for x in r) + " |" for r in rows]
    return out + [""]


def _markdown_sections(doc: ClusterDoc) -> list[str]:
    lines: list[str] = []
    rows = sections.consistency_rows(doc)
    if rows:
        lines += _md_table("Consistency across nodes", ["fact", "differs on", "majority"], rows)
    head, prow, more = sections.port_rows(doc)
    if prow:
        lines += _md_table(f"Port matrix: {head}", ["connection", "outcome", "detail"],
                           prow + ([(f"... and {more} more", "", "")] if more else []))
    mrows = sections.missing_rows(doc)
    if mrows:
        lines += _md_table("Nodes without a report", ["node", "state", "why"], mrows)
    return lines


def _terminal_tail(doc: ClusterDoc, con) -> None:
    """Sections, missing nodes and the summary line: the end of both terminal layouts."""
    from rich.text import Text

    _terminal_sections(doc, con)
    missing = doc.missing_nodes or []
    if missing:
        con.print(Text("missing nodes: " + ", ".join(missing), style="bold red"))
    con.print(Text(summary_line(doc), style="bold"))
