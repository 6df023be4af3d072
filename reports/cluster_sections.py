"""The cluster sections of a ``kind: cluster`` report as plain rows, shared by terminal and Markdown.

Only what needs attention is listed: consistency diffs (odd nodes and the majority), port
matrix connections that were not open, and missing or dead nodes. Layouts other than the
one ``llmdiag.cluster.merge`` writes (docs/cluster.md) are ignored here, not guessed at.
"""

from __future__ import annotations

from typing import Any

from llmdiag import documents as D

MAX_ROWS = 50


def _nodes(nodes: list) -> str:
    nodes = [str(n) for n in nodes]
    return ", ".join(nodes) if len(nodes) <= 6 else ", ".join(nodes[:5]) + f" and {len(nodes) - 5} more"


def consistency_rows(doc: D.ClusterDoc) -> list[tuple[str, str, str]]:
    """(fact, "nodes: value", "majority value (N nodes)") per outlier group."""
    sec = doc.sections.consistency
    rows = []
    if not isinstance(sec, list):
        return rows
    for d in sec:
        if not isinstance(d, D.ConsistencyDiff) or not isinstance(d.outliers, list):
            continue
        for o in d.outliers:
            rows.append((str(d.key if d.label is None else d.label), f"{_nodes(o.nodes or [])}: {_show(o.value)}",
                         f"{_show(d.majority)} ({d.majority_count} nodes)"))
    return rows


def _show(v: Any) -> str:
    return "(none)" if v is None else str(v)


def port_rows(doc: D.ClusterDoc) -> tuple[str, list[tuple[str, str, str]], int]:
    """(headline, [(src → dst:port, meaning, detail)], rows left out) for connections not open."""
    sec = doc.sections.port_matrix
    if not isinstance(sec, D.PortMatrix) or sec.problems is None:
        return "", [], 0
    probs = [p for p in sec.problems if isinstance(p, D.PortProblem)]
    ports = sec.ports or []
    port_text = f"{ports[0]}-{ports[-1]}" if len(ports) > 1 else (str(ports[0]) if ports else "-")
    failed = len(probs) if sec.failed is None else sec.failed
    head = (f"{failed} of {'?' if sec.tested is None else sec.tested} connections not open "
            f"({'?' if sec.mode is None else sec.mode}, ports {port_text})")
    rows = [(f"{p.src} → {p.dst}:{p.port}", str(p.outcome if p.meaning is None else p.meaning),
             str(p.detail or "")) for p in probs[:MAX_ROWS]]
    return head, rows, max(0, len(probs) - MAX_ROWS) + int(sec.truncated or 0)


def missing_rows(doc: D.ClusterDoc) -> list[tuple[str, str, str]]:
    sec = doc.sections.missing_nodes
    if not isinstance(sec, list):
        return []
    return [(str(m.name), str(m.state), str(m.detail or "")) for m in sec
            if isinstance(m, D.MissingNode) and m.state is not None]
