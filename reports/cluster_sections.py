"""The cluster sections of a ``kind: cluster`` report as plain rows, shared by terminal and Markdown.

Only what needs attention is listed: consistency diffs (odd nodes and the majority), port
matrix connections that were not open, and missing or dead nodes. Layouts other than the
one ``llmdiag.cluster.merge`` writes (docs/cluster.md) are ignored here, not guessed at.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MAX_ROWS = 50


def _nodes(nodes: list) -> str:
    nodes = [str(n) for n in nodes]
    return ", ".join(nodes) if len(nodes) <= 6 else ", ".join(nodes[:5]) + f" and {len(nodes) - 5} more"


def consistency_rows(doc: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(fact, "nodes: value", "majority value (N nodes)") per outlier group."""
    sec = (doc.get("sections") or {}).get("consistency")
    rows = []
    if not isinstance(sec, list):
        return rows
    for d in sec:
        if not isinstance(d, Mapping) or not isinstance(d.get("outliers"), list):
            continue
        for o in d["outliers"]:
            rows.append((str(d.get("label", d.get("key"))), f"{_nodes(o.get('nodes') or [])}: {_show(o.get('value'))}",
                         f"{_show(d.get('majority'))} ({d.get('majority_count')} nodes)"))
    return rows


def _show(v: Any) -> str:
    return "(none)" if v is None else str(v)


def port_rows(doc: Mapping[str, Any]) -> tuple[str, list[tuple[str, str, str]], int]:
    """(headline, [(src → dst:port, meaning, detail)], rows left out) for connections not open."""
    sec = (doc.get("sections") or {}).get("port_matrix")
    if not isinstance(sec, Mapping) or "problems" not in sec:
        return "", [], 0
    probs = [p for p in sec.get("problems") or () if isinstance(p, Mapping)]
    ports = sec.get("ports") or []
    port_text = f"{ports[0]}-{ports[-1]}" if len(ports) > 1 else (str(ports[0]) if ports else "-")
    head = (f"{sec.get('failed', len(probs))} of {sec.get('tested', '?')} connections not open "
            f"({sec.get('mode', '?')}, ports {port_text})")
    rows = [(f"{p.get('src')} → {p.get('dst')}:{p.get('port')}", str(p.get("meaning", p.get("outcome"))),
             str(p.get("detail") or "")) for p in probs[:MAX_ROWS]]
    return head, rows, max(0, len(probs) - MAX_ROWS) + int(sec.get("truncated") or 0)


def missing_rows(doc: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    sec = (doc.get("sections") or {}).get("missing_nodes")
    if not isinstance(sec, list):
        return []
    return [(str(m.get("name")), str(m.get("state")), str(m.get("detail") or "")) for m in sec
            if isinstance(m, Mapping) and "state" in m]
