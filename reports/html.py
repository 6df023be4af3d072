"""HTML reports: one self-contained file per document, readable offline and from a shared drive.

This module has the shared pieces and the cluster (preflight, merge) and nccl-bench pages;
:mod:`llmdiag.reports.html_training` has the analyze-log, estimate-memory and monitor pages.
Each page puts the status and what needs attention first, then the plots (inline SVG from
:mod:`llmdiag.reports.plots`), then the tables. Documents are read through their types
(:mod:`llmdiag.documents`); layout pieces are in :mod:`llmdiag.reports.htmlkit`; every document
string is escaped, Markdown goes through markdown-it with raw HTML off.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from typing import Any

from llmdiag import documents as D
from llmdiag.reports import cluster_sections as cs
from llmdiag.reports import plots
from llmdiag.reports.base import RenderOptions
from llmdiag.reports.htmlkit import badge, banner, e, fmt, json_block, md_inline, page, runbook_html, table
from llmdiag.vocab import Status

#: above this many nodes the matrix lists only nodes and checks with something other than a pass
MATRIX_ALL_UP_TO = 16
#: and at most this many rows (failures and missing nodes first): the rest are under Needs attention
MATRIX_ROWS = 100


def when_text(t: Any) -> str:
    v = D.number(t)
    if v is None:
        return ""
    return _dt.datetime.fromtimestamp(v, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _evidence_html(evidence: Iterable[D.Evidence]) -> str:
    items = []
    for ev in evidence:
        unit = f" {ev.unit}" if ev.unit else ""
        exp = f" (expected {e(fmt(ev.expected))}{e(unit)})" if ev.expected is not None else ""
        items.append(f"<li>{e(ev.name)}: <b>{e(fmt(ev.observed))}{e(unit)}</b>{exp}</li>")
    return f"<ul class='compact'>{''.join(items)}</ul>" if items else ""


def fix_html(text: str | None) -> str:
    return f'<div class="fix"><b>Fix:</b> {md_inline(text)}</div>' if text else ""


def _names(names: list[str], show: int = 8) -> str:
    names = [n for n in dict.fromkeys(names) if n]
    if len(names) <= show:
        return ", ".join(names)
    return f"{', '.join(names[:show])} and {len(names) - show} more ({len(names)} nodes)"


def _checks_section(checks: list[D.Finding], where) -> str:
    """Failures and warnings in full (grouped when the same check fails alike on many nodes),
    skips as one compact list with their reasons, passes collapsed."""
    out = []
    groups: dict[tuple, list[D.Finding]] = {}
    for c in checks:
        groups.setdefault((D.status_of(c.status), c.label, c.runbook, c.remediation), []).append(c)
    bad = sorted((k for k in groups if k[0] in (Status.FAIL, Status.WARN)), key=lambda k: (k[0] != Status.FAIL, k[1]))
    for key in bad:
        items = groups[key]
        st, label, rb, fix = key
        nodes = _names([where(c) for c in items])
        on = f" on {e(nodes)}" if nodes else ""
        # the same summary and evidence on many nodes is one line naming the nodes
        same: dict[tuple, list[D.Finding]] = {}
        for c in items:
            same.setdefault((c.summary, tuple((ev.name, str(ev.observed), str(ev.expected)) for ev in c.evidence)),
                            []).append(c)
        lines = []
        for cs_ in list(same.values())[:20]:
            who = _names([where(c) for c in cs_])
            prefix = f"<b>{e(who)}</b>: " if who and len(same) > 1 else ""
            lines.append(f"<li>{prefix}{e(cs_[0].summary)}{_evidence_html(cs_[0].evidence)}</li>")
        more = f"<li>… {len(same) - 20} more</li>" if len(same) > 20 else ""
        out.append(f'<div class="finding {st}">{badge(st)} <b>{e(label)}</b>{on}<ul class="compact">{"".join(lines)}'
                   f"{more}</ul>{fix_html(fix)}{runbook_html(rb)}</div>")
    if not bad:
        out.append("<p>Nothing needs attention.</p>")
    skips = [c for c in checks if D.status_of(c.status) is Status.SKIP]
    if skips:
        by: dict[tuple[str, str], list[str]] = {}
        for c in skips:
            by.setdefault((c.label, c.summary), []).append(where(c) or "")
        rows = [[e(label), e(why), e(", ".join(n for n in dict.fromkeys(ns) if n))] for (label, why), ns in by.items()]
        out.append(f"<details><summary>{len(skips)} skipped</summary>"
                   + table(["check", "reason", "where"], rows) + "</details>")
    passes = [c for c in checks if D.status_of(c.status) is Status.PASS]
    if passes:
        by_label: dict[str, list[D.Finding]] = {}
        for c in passes:
            by_label.setdefault(c.label, []).append(c)
        rows = [[e(label), e(_names([where(c) for c in cs_], 4)), e(cs_[0].summary) + (" …" if len(cs_) > 1 else "")]
                for label, cs_ in by_label.items()]
        out.append(f"<details><summary>{len(passes)} passed</summary>" + table(["check", "where", "result"], rows)
                   + "</details>")
    return "".join(out)


# ---------------------------------------------------------------- cluster


def _matrix(doc: D.ClusterDoc) -> str:
    """Nodes × checks, checks grouped by probe. At scale only the interesting rows and columns."""
    nodes = doc.node_names()
    missing = set(doc.missing_nodes)
    cells: dict[tuple[str, str], list[D.Check]] = {}
    labels: list[str] = []
    for r in doc.results:
        if r.node in nodes:
            cells.setdefault((r.node, r.label), []).append(r)
            if r.label not in labels:
                labels.append(r.label)
    labels.sort(key=lambda lb: (lb.split("/")[0], lb))
    status = {k: D.worst(r.status for r in rs) for k, rs in cells.items()}
    shown_nodes, shown_labels, note = nodes, labels, ""
    if len(nodes) > MATRIX_ALL_UP_TO:
        shown_nodes = [n for n in nodes if n in missing or any(status.get((n, lb)) in (Status.FAIL, Status.WARN) for lb in labels)]
        shown_labels = [lb for lb in labels if any(status.get((n, lb)) in (Status.FAIL, Status.WARN) for n in nodes)]
        rank = {Status.FAIL: 0, Status.WARN: 1}
        shown_nodes.sort(key=lambda n: 0 if n in missing else rank.get(D.worst(status.get((n, lb), Status.SKIP)
                                                                                 for lb in labels), 2))
        note = (f"<p class='muted'>{len(nodes)} nodes: showing the {min(len(shown_nodes), MATRIX_ROWS)} worst of the "
                f"{len(shown_nodes)} with a failure, warning or no report, and the {len(shown_labels)} checks that did "
                "not pass everywhere; every other cell passed or was skipped.</p>")
        shown_nodes = shown_nodes[:MATRIX_ROWS]
    if not shown_nodes:
        return note + "<p>Every node passed every check.</p>"
    probes = list(dict.fromkeys(lb.split("/")[0] for lb in shown_labels))
    head1 = "<tr><th rowspan='2'>node</th>" + "".join(
        f"<th colspan='{sum(1 for lb in shown_labels if lb.split('/')[0] == p)}'>{e(p)}</th>" for p in probes) + "</tr>"
    head2 = "<tr>" + "".join(f"<th class='sub'>{e(lb.split('/', 1)[1] if '/' in lb else '·')}</th>"
                             for lb in shown_labels) + "</tr>"
    rows = []
    for n in shown_nodes:
        if n in missing:
            rows.append(f"<tr><th class='node'>{badge('fail')} {e(n)}</th>"
                        f"<td class='cell missing' colspan='{max(1, len(shown_labels))}'>never reported</td></tr>")
            continue
        st = D.worst(status.get((n, lb), Status.SKIP) for lb in labels)
        tds = []
        for lb in shown_labels:
            s = status.get((n, lb))
            if s is None:
                tds.append('<td class="cell none"></td>')
            else:
                tip = "; ".join(r.summary for r in cells[(n, lb)])
                tds.append(f'<td class="cell {s}" title="{e(tip)}"><span>{s.upper()}</span></td>')
        rows.append(f"<tr><th class='node'>{badge(st)} {e(n)}</th>{''.join(tds)}</tr>")
    return (note + f'<div class="scroll"><table class="matrix" id="matrix"><thead>{head1}{head2}</thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div><p class="muted">Hover a cell for the summary; the details '
            "are under Needs attention.</p>")


def _cluster_sections(doc: D.ClusterDoc) -> str:
    out = []
    rows = cs.consistency_rows(doc)
    if rows:
        out.append("<h2>Consistency across nodes</h2>" + table(["fact", "odd nodes", "majority"],
                                                                 [[e(x) for x in r] for r in rows]))
    head, prow, left = cs.port_rows(doc)
    if head:
        out.append(f"<h2>Port reachability</h2><p>{e(head)}</p>")
        if prow:
            out.append(table(["connection", "outcome", "detail"], [[e(x) for x in r] for r in prow]))
        if left:
            out.append(f"<p class='muted'>… {left} more</p>")
    mrows = cs.missing_rows(doc)
    if mrows:
        out.append("<h2>Nodes that did not report</h2>" + table(["node", "state", "detail"], [[e(x) for x in r] for r in mrows]))
    return "".join(out)


def cluster(d: D.ClusterDoc, opts: RenderOptions) -> str:
    nodes = d.node_names()
    failing = [n for n in nodes if n in d.missing_nodes or any(r.status == Status.FAIL and r.node == n for r in d.results)]
    c = d.counts or {}
    headline = f"{len(nodes)} node(s)" + (f", failing: {_names(failing, 6)}" if failing else "")
    lines = [e(", ".join(f"{c.get(s, 0)} {s}" for s in (Status.FAIL, Status.WARN, Status.PASS, Status.SKIP)))]
    if d.missing_nodes:
        lines.append("missing nodes: " + e(", ".join(d.missing_nodes)))
    if when_text(d.created_at):
        lines.append(e(when_text(d.created_at)))
    multi = len(nodes) > 1
    body = [banner(D.status_of(d.status), headline, lines), "<h2>Needs attention</h2>",
            _checks_section(d.results, lambda r: r.node if multi or (r.scope == "cluster") else "")]
    if multi:
        body.append("<h2>Nodes × checks</h2>" + _matrix(d))
    body.append(_cluster_sections(d))
    for k, v in D.to_dict(d.sections).items():
        if k not in ("consistency", "port_matrix", "missing_nodes") and v:
            body.append(json_block(v, f"section {k}"))
    node_rows = [[e(n.node), e(fmt(n.node_rank)), badge(D.status_of(n.status)),
                  e(", ".join(f"{k}={fmt(v)}" for k, v in n.meta.items() if not isinstance(v, (dict, list))))]
                 for n in d.nodes]
    if node_rows:
        body.append(f"<details><summary>{len(node_rows)} node(s): facts</summary>"
                    + table(["node", "rank", "status", "facts"], node_rows) + "</details>")
    return page(f"llmdiag {d.command or 'preflight'} report", "".join(body), d)


# ---------------------------------------------------------------- nccl-bench


def _bench_chart(rows: list[D.BenchRow], coll: str, plateau: float | None, expected: float | None) -> str:
    lines = [plots.Line(p.replace("_", "-"), [r.size for r in rows], [D.number(r.placement(p).busbw) for r in rows],
                        dashed=p == "in_place") for p in ("out_of_place", "in_place")]
    marks = []
    if plateau is not None:
        marks.append(plots.Mark(f"plateau {plateau:,.3g} GB/s", y=plateau, color="#444"))
    if expected is not None:
        marks.append(plots.Mark(f"expected {expected:,.4g} GB/s", y=expected, color="#c62828"))
    ys = [y for ln in lines for y in ln.ys if y] + [m.y for m in marks if m.y]
    logy = bool(ys) and min(ys) > 0 and max(ys) / min(ys) > 50  # an expectation far above the result
    return plots.chart(lines, title=f"{coll}: busbw vs message size", xlabel="message size (bytes)",
                       ylabel="busbw (GB/s)" + (", log scale" if logy else ""), logx=True, logy=logy, marks=marks,
                       xfmt=plots.size_label, y0=not logy, xbase=2)


def _bench_body(d: D.NcclBenchDoc) -> str:
    out = []
    summary = [[e(c.collective), f'<span class="num">{e(fmt(D.number(c.plateau_busbw)))}</span>',
                f'<span class="num">{e(fmt(D.number(c.avg_busbw)))}</span>', e(fmt(c.wrong)),
                e(", ".join(plots.size_label(s) for s in c.plateau_sizes))] for c in d.collectives]
    if summary:
        out.append(table(["collective", "plateau busbw (GB/s)", "avg busbw (GB/s)", "#wrong", "plateau sizes"], summary))
    charts = []
    for c in d.collectives:
        rows = sorted((r for r in d.results if r.collective == c.collective), key=lambda r: r.size)
        charts.append(_bench_chart(rows, c.collective, D.number(c.plateau_busbw), d.expected_busbw))
    out.append(f'<div class="charts">{"".join(charts)}</div>')
    for c in d.collectives:
        trs = []
        for r in (r for r in d.results if r.collective == c.collective):
            o, i = r.placement("out_of_place"), r.placement("in_place")
            trs.append([e(fmt(r.size)), e(fmt(r.count)), e(fmt(r.type)), e(fmt(r.redop)), e(fmt(r.root))]
                       + [f'<span class="num">{e(fmt(D.number(getattr(p, f)) if f != "wrong" else p.wrong))}</span>'
                          for p in (o, i) for f in ("time_us", "algbw", "busbw", "wrong")])
        out.append(f"<details><summary>{e(c.collective)}: nccl-tests table</summary>" + table(
            ["size (B)", "count", "type", "redop", "root", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "#wrong",
             "in-place time (us)", "in-place algbw", "in-place busbw", "in-place #wrong"], trs) + "</details>")
    st = d.straggler
    if st and st.rank_busbw:
        hosts = d.world.hosts if d.world else []
        slow = st.rank if st.flagged else None
        rows = [[e(r), e(hosts[r] if r < len(hosts) else ""), f'<span class="num">{e(fmt(D.number(bw)))}</span>',
                 badge(Status.WARN) if r == slow else ""] for r, bw in enumerate(st.rank_busbw)]
        out.append(f"<h3>Per rank busbw (GB/s, median {e(fmt(D.number(st.median_busbw)))})</h3>"
                   + table(["rank", "host", "busbw", ""], rows)
                   + f"<p class='muted'>A rank below {e(fmt(st.threshold_fraction))} of the median is flagged as "
                   "a straggler.</p>")
    pw = d.pairwise
    if pw and pw.links:
        rows = [[e(lk.a), e(lk.b), f'<span class="num">{e(fmt(D.number(lk.gbps)))}</span>', e(fmt(lk.phase)),
                 "slow" if D.number(lk.gbps) is not None and D.number(pw.threshold_gbps) is not None
                 and D.number(lk.gbps) < D.number(pw.threshold_gbps) else ""]
                for lk in sorted(pw.links, key=lambda lk: D.number(lk.gbps) or 0)]
        out.append(f"<h2>Pairwise busbw ({len(pw.links)} links)</h2>" + table(["a", "b", "GB/s", "phase", ""], rows)
                   + "".join(f"<p class='muted'>{e(n)}</p>" for n in pw.notes))
    return "".join(out)


def nccl_bench(d: D.NcclBenchDoc, opts: RenderOptions) -> str:
    w = d.world
    head = f"nccl-bench on {w.world_size} rank(s)" if w else "nccl-bench"
    lines = []
    if w:
        lines.append(e(f"{fmt(w.nodes)} node(s), backend {fmt(w.backend)} on {fmt(w.device)}, torch "
                       f"{fmt(w.torch_version)}, NCCL {fmt(w.nccl_version)}"))
    # the top-level plateau is the first collective's: with several, name each one's
    nums = [f"{c.collective}: plateau {fmt(D.number(c.plateau_busbw))} GB/s, avg {fmt(D.number(c.avg_busbw))} GB/s"
            for c in d.collectives] or [f"plateau busbw {fmt(D.number(d.plateau_busbw))} GB/s"]
    if d.expected_busbw is not None:
        nums.append(f"expected {fmt(d.expected_busbw)} GB/s")
    lines.append(e(" · ".join(nums)))
    body = [banner(D.status_of(d.status), head, lines), "<h2>Checks</h2>",
            _checks_section(d.findings, lambda c: c.node or ""), "<h2>Bandwidth</h2>", _bench_body(d)]
    if d.spec:
        body.append(json_block(D.to_dict(d.spec), "benchmark settings"))
    return page("llmdiag nccl-bench report", "".join(body), d)


def generic(d: D.GenericDoc, opts: RenderOptions) -> str:
    st = D.status_of(d.status)
    body = banner(st, str(d.command or "report"), [e(when_text(d.created_at))]) + json_block(d.content, "document")
    return page(f"llmdiag {d.command or ''} report", body, d)

