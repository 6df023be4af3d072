"""HTML reports: one self-contained file per document, readable offline and from a shared drive.

``llmdiag.reports.html.<kind>(doc, opts)`` for every kind (see :mod:`llmdiag.reports.base`). Layout pieces are
in :mod:`llmdiag.reports.htmlkit`, plots in :mod:`llmdiag.reports.plots`; every document string is escaped.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any

from llmdiag.reports import docview as dv
from llmdiag.reports.base import RenderOptions
from llmdiag.reports.htmlkit import badge, banner, e, fmt, gib, img, json_block, page, runbook_html, table

_STATE_TEXT = {"ok": "ok", "refused": "refused", "timeout": "dropped", "fail": "fail", "self": "·", "unknown": "?"}


def _when(doc: Mapping[str, Any]) -> str:
    t = dv.finite(doc.get("created_at"))
    if t is None:
        return ""
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _evidence_html(r: Mapping[str, Any]) -> str:
    items = []
    for ev in r.get("evidence") or ():
        if isinstance(ev, Mapping):
            unit = f" {ev.get('unit')}" if ev.get("unit") else ""
            exp = f" (expected {e(fmt(ev.get('expected')))}{e(unit)})" if ev.get("expected") is not None else ""
            items.append(f"<li>{e(ev.get('name'))}: <b>{e(fmt(ev.get('observed')))}{e(unit)}</b>{exp}</li>")
    return f"<ul>{''.join(items)}</ul>" if items else ""


def _result_detail(r: Mapping[str, Any]) -> str:
    out = [f"<div>{badge(dv.status_of(r.get('status')))} <b>{e(dv.check_label(r))}</b> on {e(r.get('node'))}</div>",
           f"<div>{e(r.get('summary'))}</div>", _evidence_html(r)]
    if r.get("remediation"):
        out.append(f"<div><b>Fix:</b> {e(r['remediation'])}</div>")
    if r.get("runbook"):
        out.append(f'<div class="muted">runbook: <code>llmdiag runbook {e(r["runbook"])}</code></div>')
    return "".join(out)


# ---------------------------------------------------------------- cluster


def _matrix(doc: Mapping[str, Any]) -> str:
    nodes, checks, cells = dv.matrix(doc)
    missing = set(dv.missing_nodes(doc))
    if not nodes:
        return "<p class='muted'>No node reported.</p>"
    head = "<tr><th>node</th>" + "".join(f'<th class="check">{e(c)}</th>' for c in checks) + "</tr>"
    rows = []
    for node in nodes:
        node_rs = [r for c in checks for r in cells.get((node, c), [])]
        st = "fail" if node in missing else dv.worst(r.get("status") for r in node_rs)
        tds = [f'<th class="node">{badge(st)} {e(node)}</th>']
        for c in checks:
            rs = cells.get((node, c))
            if node in missing:
                tds.append('<td class="cell missing" title="node never reported">missing</td>')
            elif not rs:
                tds.append('<td class="cell none" title="not run on this node"></td>')
            else:
                s = dv.worst(r.get("status") for r in rs)
                tip = "; ".join(str(r.get("summary", "")) for r in rs)
                detail = "".join(_result_detail(r) for r in rs)
                tds.append(f'<td class="cell {s}" title="{e(tip)}" data-node="{e(node)}" data-check="{e(c)}" '
                           f'data-status="{s}"><details><summary>{s.upper()}</summary>'
                           f'<div class="pop">{detail}</div></details></td>')
        rows.append(f'<tr data-node="{e(node)}" data-status="{st}">' + "".join(tds) + "</tr>")
    return (f'<table class="matrix" id="matrix"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'
            '<p class="muted">Click a cell for evidence and the fix; hover for the summary.</p>')


def _grouped_findings(rs: list[Mapping[str, Any]]) -> str:
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in rs:
        st = dv.status_of(r.get("status"))
        if st == "pass":
            continue
        key = (st, dv.check_label(r), r.get("runbook"), r.get("remediation"))
        groups.setdefault(key, []).append(r)
    order = {"fail": 0, "warn": 1, "skip": 2}
    out = []
    for (st, label, rb, fix), items in sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], 3), kv[0][1])):
        nodes = ", ".join(dict.fromkeys(str(r.get("node")) for r in items))
        lines = "".join(f"<li><b>{e(r.get('node'))}</b>: {e(r.get('summary'))}{_evidence_html(r)}</li>" for r in items)
        fix_html = f"<div><b>Fix:</b> {e(fix)}</div>" if fix else ""
        out.append(f'<div class="finding {st}">{badge(st)} <b>{e(label)}</b> on {e(nodes)}'
                   f"<ul>{lines}</ul>{fix_html}{runbook_html(rb) if st != 'skip' else ''}</div>")
    return "".join(out) or "<p>Nothing to fix.</p>"


def _consistency(sec: Any) -> str:
    if not sec:
        return ""
    if isinstance(sec, list) and all(isinstance(x, Mapping) for x in sec):
        cols = list(dict.fromkeys(k for x in sec for k in x))
        rows = [[e(fmt(x.get(c))) for c in cols] for x in sec]
        return "<h2>Consistency across nodes</h2>" + table(cols, rows, "consistency")
    return "<h2>Consistency across nodes</h2>" + json_block(sec, "differences")


def _port_heatmap(sec: Any) -> str:
    if not sec:
        return ""
    srcs, dsts, cells = dv.port_matrix(sec)
    if not cells:
        return "<h2>Port reachability</h2>" + json_block(sec, "port matrix")
    head = "<tr><th>from \\ to</th>" + "".join(f"<th>{e(d)}</th>" for d in dsts) + "</tr>"
    rows = []
    for s in srcs:
        tds = []
        for d in dsts:
            if (s, d) not in cells:
                tds.append('<td class="self" title="same node"></td>' if s == d else
                           '<td class="unknown" title="not measured"></td>')
                continue
            state, text = dv.port_cell_state(cells[(s, d)])
            tds.append(f'<td class="{state}" title="{e(s)} → {e(d)}: {e(text)}">{_STATE_TEXT[state]}</td>')
        rows.append(f"<tr><th>{e(s)}</th>{''.join(tds)}</tr>")
    legend = ('<p class="muted">green: reachable · orange: refused (nothing listening / reset) · '
              "red: dropped (firewall, timeout) · yellow: unknown</p>")
    return f'<h2>Port reachability</h2><table class="heat" id="ports">{head}{"".join(rows)}</table>{legend}'


def _summary_lines(doc: Mapping[str, Any]) -> list[str]:
    c = doc.get("counts") or {}
    lines = [e(", ".join(f"{c.get(s, 0)} {s}" for s in ("pass", "warn", "fail", "skip")))]
    missing = dv.missing_nodes(doc)
    if missing:
        lines.append("missing nodes: " + e(", ".join(missing)))
    when = _when(doc)
    if when:
        lines.append(e(when))
    return lines


def cluster(doc: Mapping[str, Any], opts: RenderOptions) -> str:
    nodes = dv.node_names(doc)
    status = dv.status_of(doc.get("status"))
    failing = [n for n in nodes if n in dv.missing_nodes(doc)
               or any(r.get("status") == "fail" and r.get("node") == n for r in dv.results(doc))]
    headline = f"{len(nodes)} node(s)" + (f", failing: {', '.join(failing)}" if failing else "")
    body = [banner(status, headline, _summary_lines(doc)), "<h2>Nodes × checks</h2>", _matrix(doc)]
    wide = dv.cluster_wide(doc)
    if wide:
        body.append("<h2>Cluster-wide checks</h2>")
        body.append(table(["status", "check", "result"],
                          [[badge(dv.status_of(r.get("status"))), e(dv.check_label(r)),
                            e(r.get("summary")) + _evidence_html(r)] for r in wide]))
    secs = doc.get("sections") or {}
    body.append(_consistency(secs.get("consistency")))
    body.append(_port_heatmap(secs.get("port_matrix")))
    if isinstance(secs.get("nccl_bench"), Mapping):
        body.append("<h2>Collective bandwidth</h2>" + _bench_body(secs["nccl_bench"]))
    if isinstance(secs.get("memory"), Mapping):
        body.append("<h2>Memory plan</h2>" + _memory_body(secs["memory"]))
    body.append("<h2>Findings</h2>" + _grouped_findings(dv.results(doc)))
    known = {"consistency", "port_matrix", "nccl_bench", "memory", "missing_nodes"}
    for k, v in secs.items():
        if k not in known:
            body.append(f"<h2>{e(k)}</h2>" + json_block(v, k))
    node_rows = [[e(n.get("node")), e(fmt(n.get("node_rank"))), badge(dv.status_of(n.get("status"))), e(fmt(n.get("meta")))]
                 for n in doc.get("nodes") or () if isinstance(n, Mapping)]
    if node_rows:
        body.append("<h2>Nodes</h2>" + table(["node", "rank", "status", "facts"], node_rows))
    return page(f"llmdiag {doc.get('command', 'preflight')} report", "".join(body), doc)


# ---------------------------------------------------------------- nccl-bench


def _bench_body(doc: Mapping[str, Any]) -> str:
    from llmdiag.reports import plots

    rows = dv.bench_rows(doc)
    cols = list(dict.fromkeys(r["collective"] for r in rows))
    plateau = dv.per_collective(doc.get("plateau_busbw"), cols)
    avg = dv.per_collective(doc.get("avg_busbw"), cols)
    out = []
    summary = [[e(c), e(fmt(plateau.get(c))), e(fmt(avg.get(c)))] for c in cols]
    if summary:
        out.append(table(["collective", "plateau busbw (GB/s)", "avg busbw (GB/s)"], summary))
    if cols and plots.missing():
        out.append(f'<p class="muted">{e(plots.missing())}</p>')
    for c in cols:
        crow = [r for r in rows if r["collective"] == c]
        out.append(img(plots.bandwidth(crow, c, plateau.get(c)), f"busbw vs size for {c}"))
    for c in cols:
        trs = []
        for r in (r for r in rows if r["collective"] == c):
            o, i = r["out_of_place"], r["in_place"]
            trs.append([e(fmt(r["size_bytes"])), e(fmt(r["count"])), e(fmt(r["dtype"]))]
                       + [e(fmt(p.get(f))) for p in (o, i) for f in ("time_us", "algbw", "busbw", "wrong")])
        out.append(f"<details><summary>{e(c)}: table</summary>" + table(
            ["size (B)", "count", "type", "time (us)", "algbw", "busbw", "#wrong",
             "time (us) in-place", "algbw in-place", "busbw in-place", "#wrong in-place"], trs) + "</details>")
    ps = dv.pairs(doc)
    if ps:
        names = list(dict.fromkeys([p["a"] for p in ps] + [p["b"] for p in ps]))
        best = max((p["busbw"] for p in ps if p["busbw"] is not None), default=None)
        grid = {}
        for p in ps:
            grid[(p["a"], p["b"])] = grid[(p["b"], p["a"])] = p
        head = "<tr><th></th>" + "".join(f"<th>{e(n)}</th>" for n in names) + "</tr>"
        trs = []
        for a in names:
            tds = []
            for b in names:
                p = grid.get((a, b))
                if p is None or p["busbw"] is None or not best:
                    tds.append('<td class="self"></td>')
                    continue
                frac = max(0.0, min(1.0, p["busbw"] / best))
                tds.append(f'<td style="background:hsl({int(120 * frac)},60%,70%)" title="{e(a)} ↔ {e(b)}: '
                           f'{p["busbw"]:.3g} GB/s">{p["busbw"]:.3g}</td>')
            trs.append(f"<tr><th>{e(a)}</th>{''.join(tds)}</tr>")
        out.append(f'<h3>Pairwise busbw (GB/s)</h3><table class="heat">{head}{"".join(trs)}</table>'
                   '<p class="muted">Colour relative to the best pair: red pairs share the slow node or link.</p>')
    return "".join(out)


def nccl_bench(doc: Mapping[str, Any], opts: RenderOptions) -> str:
    status = dv.status_of(doc.get("status"))
    headline = f"nccl-bench on {doc.get('world_size', '?')} rank(s)"
    body = banner(status, headline, [e(_when(doc))]) + _bench_body(doc) + _findings_list(doc) + json_block(
        {k: v for k, v in doc.items() if k not in ("results",)}, "all fields")
    return page("llmdiag nccl-bench report", body, doc)


# ---------------------------------------------------------------- log-analysis


def _findings_list(doc: Mapping[str, Any]) -> str:
    fs = dv.findings(doc)
    if not fs:
        return ""
    out = ["<h2>Findings</h2>"]
    for f in fs:
        st = dv.severity_status(f.get("severity"))
        where = ":".join(str(x) for x in (f.get("file"), f.get("line")) if x is not None)
        meta = " · ".join(x for x in (f"rank {f['rank']}" if f.get("rank") is not None else "",
                                      f"step {f['step']}" if f.get("step") is not None else "", where) if x)
        facts = f.get("facts") or {}
        out.append(
            f'<div class="finding {st}">{badge(st)} <b>{e(f.get("kind", "finding"))}</b> '
            f'<span class="muted">{e(meta)}</span><pre>{e(f.get("message"))}</pre>'
            + (f"<div><b>Cause:</b> {e(f['cause'])}</div>" if f.get("cause") else "")
            + (f"<div><b>Next step:</b> {e(f['next_step'])}</div>" if f.get("next_step") else "")
            + (f"<div class='muted'>facts: {e(fmt(facts))}</div>" if facts else "")
            + runbook_html(f.get("runbook")) + "</div>")
    return "".join(out)


def log_analysis(doc: Mapping[str, Any], opts: RenderOptions) -> str:
    from llmdiag.reports import plots

    status = dv.status_of(doc.get("status"))
    fs = dv.findings(doc)
    m = doc.get("metrics") or {}
    headline = f"{len(fs)} finding(s) in steps {fmt(m.get('first_step'))}..{fmt(m.get('last_step'))}"
    body = [banner(status, headline, [e(_when(doc))])]
    causes = doc.get("root_causes") or []
    if causes:
        body.append("<h2>Root cause</h2><ul>" + "".join(f"<li>{e(t)}</li>" for t in dv.text_items(causes)) + "</ul>")
    curve = plots.training_curves(dv.steps(doc), fs)
    if plots.missing() and dv.steps(doc):
        body.append(f'<h2>Loss and gradient norm</h2><p class="muted">{e(plots.missing())}</p>')
    if curve:
        body.append("<h2>Loss and gradient norm</h2>" + img(curve, "loss and grad norm per step")
                    + '<p class="muted">Dotted red lines: steps with findings; red crosses: NaN/Inf values.</p>')
    body.append(_findings_list(doc))
    if m:
        body.append("<h2>Metrics</h2>" + table(["metric", "value"], [[e(k), e(fmt(v))] for k, v in m.items()]))
    return page("llmdiag analyze-log report", "".join(body), doc)


# ---------------------------------------------------------------- memory-estimate

_PART_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f")


def _memory_body(doc: Mapping[str, Any]) -> str:
    parts = dv.breakdown(doc)
    total = dv.breakdown_total(doc)
    gpu = dv.gpu_memory_bytes(doc)
    scale = max(x for x in (total or 0, gpu or 0, 1) if x)
    bar = "".join(f'<div style="width:{100 * b / scale:.2f}%;background:{c}" title="{e(k)}: {gib(b)}">{e(k)}</div>'
                  for (k, b), c in zip(parts.items(), _PART_COLORS * 2))
    out = [f'<div class="bar">{bar}</div>']
    if gpu:
        out.append(f'<p class="muted">bar width = {gib(scale)}; GPU memory {gib(gpu)}'
                   f"{' (' + e((doc.get('gpu_memory') or {}).get('name')) + ')' if isinstance(doc.get('gpu_memory'), Mapping) and doc['gpu_memory'].get('name') else ''}</p>")
    rows = [[e(k), f'<span class="num">{gib(b)}</span>'] for k, b in parts.items()]
    rows.append(["<b>total</b>", f"<b>{gib(total)}</b>"])
    out.append(table(["component", "per GPU"], rows))
    sugg = dv.text_items(doc.get("suggestions"))
    if sugg:
        out.append("<h3>Suggestions</h3><ul>" + "".join(f"<li>{e(s)}</li>" for s in sugg) + "</ul>")
    checks = [c for c in doc.get("plan_checks") or () if isinstance(c, Mapping)]
    if checks:
        out.append("<h3>Plan checks</h3>" + table(["status", "check", "result"], [
            [badge(dv.status_of(c.get("status"), "pass")), e(c.get("check") or c.get("name")),
             e(c.get("summary") or c.get("message"))] for c in checks]))
    return "".join(out)


def memory_estimate(doc: Mapping[str, Any], opts: RenderOptions) -> str:
    word, why = dv.verdict(doc)
    st = dv.verdict_status(doc)
    head = f"{word}: {gib(dv.breakdown_total(doc))} per GPU of {gib(dv.gpu_memory_bytes(doc))}"
    body = banner(st, head, [e(why)] if why else []) + _memory_body(doc) + runbook_html("cuda-oom" if st != "pass" else None)
    return page("llmdiag estimate-memory report", body, doc)


# ---------------------------------------------------------------- monitor


def monitor(doc: Mapping[str, Any], opts: RenderOptions) -> str:
    from llmdiag.reports import plots

    alerts = [a for a in doc.get("alerts") or () if isinstance(a, Mapping)]
    st = dv.status_of(doc.get("status"))
    head = f"{doc.get('samples', 0)} sample(s) on {doc.get('node', '?')}, {len(alerts)} alert(s)"
    lines = [e(doc.get("gpu_note") or f"{doc.get('gpu_count', 0)} GPU(s)")]
    body = [banner(st, head, lines)]
    series = doc.get("series") or {}
    if series and plots.missing():
        body.append(f'<p class="muted">{e(plots.missing())}</p>')
    for key, title, unit in (("gpu_util", "GPU utilisation", "%"), ("gpu_mem", "GPU memory used", "%"),
                             ("gpu_temp", "GPU temperature", "°C"), ("host", "Host CPU and memory", "%")):
        if isinstance(series.get(key), Mapping):
            body.append(img(plots.timeline(series[key], title, unit), title))
    if alerts:
        body.append("<h2>Alerts</h2>")
        for a in alerts:
            sev = "fail" if a.get("severity") == "critical" else "warn"
            body.append(f'<div class="finding {sev}">{badge(sev)} <b>{e(a.get("rule"))}</b> '
                        f'{e(a.get("device") or "")} — {e(a.get("message"))}{runbook_html(a.get("runbook"))}</div>')
    body.append(json_block(doc.get("latest") or {}, "latest sample"))
    return page("llmdiag monitor report", "".join(body), doc)


def generic(doc: Mapping[str, Any], opts: RenderOptions) -> str:
    st = dv.status_of(doc.get("status"))
    body = banner(st, str(doc.get("command", "report")), [e(_when(doc))]) + json_block(
        doc, "document")
    return page(f"llmdiag {doc.get('command', '')} report", body, doc)
