"""Tolerant readers of report documents, shared by the HTML, Prometheus and JUnit renderers.

Documents come from other subsystems (and from older llmdiag versions via saved JSON), so
every accessor here accepts missing keys and the few spellings a row may use, and returns
plain Python values. Renderers never index a document directly for anything optional.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

STATUS_CODE = {"pass": 0, "skip": 1, "warn": 2, "fail": 3}
STATUSES = ("pass", "skip", "warn", "fail")
PLACEMENTS = ("out_of_place", "in_place")
_PLACEMENT_ALIASES = {
    "out_of_place": ("out_of_place", "outofplace", "oop", "out"),
    "in_place": ("in_place", "inplace", "ip", "in"),
}
_BENCH_FIELDS = ("time_us", "algbw", "busbw", "wrong")


def number(value: Any) -> float | None:
    """``value`` as a float, or None when it is not a finite-or-nan number (bools excluded)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def finite(value: Any) -> float | None:
    v = number(value)
    return v if v is not None and math.isfinite(v) else None


def status_of(value: Any, default: str = "skip") -> str:
    s = str(value or "").lower()
    return s if s in STATUS_CODE else default


# ---------------------------------------------------------------- cluster


def check_label(r: Mapping[str, Any]) -> str:
    probe, check = str(r.get("probe", "?")), str(r.get("check", "?"))
    return probe if check in ("probe", "") else f"{probe}/{check}"


def node_names(doc: Mapping[str, Any]) -> list[str]:
    """Nodes that reported (in document order), then the missing ones."""
    names: list[str] = []
    for n in doc.get("nodes") or ():
        name = n.get("node") if isinstance(n, Mapping) else n
        if name and name not in names:
            names.append(str(name))
    for r in doc.get("results") or ():
        if r.get("scope", "node") == "node" and r.get("node") and r["node"] not in names:
            names.append(str(r["node"]))
    for m in missing_nodes(doc):
        if m not in names:
            names.append(m)
    return names


def missing_nodes(doc: Mapping[str, Any]) -> list[str]:
    out = list(doc.get("missing_nodes") or ())
    sec = (doc.get("sections") or {}).get("missing_nodes")
    if isinstance(sec, (list, tuple)):
        out += [str(x.get("node") if isinstance(x, Mapping) else x) for x in sec]
    return list(dict.fromkeys(str(x) for x in out))


def results(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [r for r in doc.get("results") or () if isinstance(r, Mapping)]


def matrix(doc: Mapping[str, Any]) -> tuple[list[str], list[str], dict[tuple[str, str], list[Mapping[str, Any]]]]:
    """(nodes, check labels, {(node, label): results}) for the nodes × checks matrix.

    Node-scope results go to their node; cluster-scope results that blame a real node go to
    that node too (they are about it); those about the whole cluster stay out (see
    :func:`cluster_wide`).
    """
    nodes = node_names(doc)
    known = set(nodes)
    checks: list[str] = []
    cells: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in results(doc):
        node = str(r.get("node", ""))
        if node not in known:
            continue
        label = check_label(r)
        if label not in checks:
            checks.append(label)
        cells.setdefault((node, label), []).append(r)
    return nodes, checks, cells


def cluster_wide(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    known = set(node_names(doc))
    return [r for r in results(doc) if r.get("scope") == "cluster" and str(r.get("node", "")) not in known]


def worst(statuses: Iterable[str]) -> str:
    """Same rule as :meth:`llmdiag.result.Status.worst`: skips never make it worse than pass."""
    seen = {status_of(s) for s in statuses}
    for s in ("fail", "warn"):
        if s in seen:
            return s
    return "pass" if seen - {"skip"} or not seen else "skip"


# ---------------------------------------------------------------- nccl-bench


def _placement_fields(row: Mapping[str, Any], placement: str) -> dict[str, float | None]:
    for alias in _PLACEMENT_ALIASES[placement]:
        nested = row.get(alias)
        if isinstance(nested, Mapping):
            return {f: number(nested.get(f)) for f in _BENCH_FIELDS}
    out: dict[str, float | None] = {}
    for f in _BENCH_FIELDS:
        val = None
        for alias in _PLACEMENT_ALIASES[placement]:
            for key in (f"{alias}_{f}", f"{f}_{alias}"):
                if key in row:
                    val = number(row[key])
                    break
            if val is not None:
                break
        out[f] = val
    return out


def bench_rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Rows of an nccl-bench document (or a cluster ``nccl_bench`` section), normalised to
    ``{collective, size_bytes, count, dtype, out_of_place: {...}, in_place: {...}}``."""
    rows = doc.get("results") or doc.get("rows") or ()
    out = []
    for row in rows:
        if not isinstance(row, Mapping):
            continue
        size = number(row.get("size_bytes", row.get("size", row.get("bytes"))))
        out.append({
            "collective": str(row.get("collective") or row.get("op") or doc.get("collective") or "?"),
            "size_bytes": int(size) if size is not None else None,
            "count": row.get("count"),
            "dtype": row.get("dtype") or row.get("type"),
            "out_of_place": _placement_fields(row, "out_of_place"),
            "in_place": _placement_fields(row, "in_place"),
        })
    return out


def per_collective(value: Any, collectives: Iterable[str]) -> dict[str, float]:
    """``plateau_busbw`` / ``avg_busbw`` as {collective: GB/s}, whether the document gives a
    number (one collective), a mapping, or a mapping of mappings with a ``busbw`` key."""
    cols = list(collectives)
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if isinstance(v, Mapping):
                v = v.get("busbw", v.get("value", v.get("gbps")))
            n = finite(v)
            if n is not None:
                out[str(k)] = n
        return out
    n = finite(value)
    if n is None:
        return {}
    return {cols[0] if len(cols) == 1 else "all": n}


def pairs(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Pairwise measurements as ``{a, b, busbw, status}`` (``pairwise`` section, any of its
    usual layouts: a list of rows, or ``{"pairs": [...]}``, or nccl-bench's ``{"links": [...]}``)."""
    sec = doc.get("pairwise")
    if sec is None:
        sec = (doc.get("sections") or {}).get("pairwise")
    if isinstance(sec, Mapping):
        sec = sec.get("pairs") or sec.get("links") or sec.get("results") or sec.get("rows") or ()
    out = []
    for p in sec or ():
        if not isinstance(p, Mapping):
            continue
        a = p.get("a", p.get("src", p.get("node_a")))
        b = p.get("b", p.get("dst", p.get("node_b")))
        if (a is None or b is None) and isinstance(p.get("nodes"), (list, tuple)) and len(p["nodes"]) == 2:
            a, b = p["nodes"]
        if a is None or b is None:
            continue
        bw = p.get("busbw", p.get("busbw_gbps", p.get("gbps", p.get("algbw"))))
        out.append({"a": str(a), "b": str(b), "busbw": finite(bw), "status": p.get("status")})
    return out


# ---------------------------------------------------------------- cluster port matrix


def port_matrix(sec: Any) -> tuple[list[str], list[str], dict[tuple[str, str], Any]]:
    """(sources, destinations, {(src, dst): cell}) from the layouts a port matrix may take:
    ``{src: {dst: cell}}``, ``{"nodes": [...], "matrix": [[cell]]}`` or a list of
    ``{src, dst, port?, status|ok}`` rows. A cell is a status string, a bool or a mapping."""
    cells: dict[tuple[str, str], Any] = {}
    if isinstance(sec, Mapping) and isinstance(sec.get("matrix"), list):
        names = [str(n) for n in sec.get("nodes") or ()]
        dsts = [str(n) for n in sec.get("targets") or names]
        for i, row in enumerate(sec["matrix"]):
            for j, cell in enumerate(row or ()):
                if i < len(names) and j < len(dsts):
                    cells[(names[i], dsts[j])] = cell
    elif isinstance(sec, Mapping) and isinstance(sec.get("rows") or sec.get("pairs"), list):
        return port_matrix(sec.get("rows") or sec.get("pairs"))
    elif isinstance(sec, Mapping):
        for src, row in sec.items():
            if isinstance(row, Mapping):
                for dst, cell in row.items():
                    cells[(str(src), str(dst))] = cell
    elif isinstance(sec, list):
        for row in sec:
            if not isinstance(row, Mapping):
                continue
            src = row.get("src", row.get("from", row.get("source")))
            dst = row.get("dst", row.get("to", row.get("target")))
            if src is None or dst is None:
                continue
            key = (str(src), str(dst))
            cells.setdefault(key, [])
            cells[key].append(row)
    srcs = list(dict.fromkeys(k[0] for k in cells))
    dsts = list(dict.fromkeys(k[1] for k in cells))
    # columns in the order of the rows, so the diagonal is each node with itself
    dsts.sort(key=lambda d: (srcs.index(d) if d in srcs else len(srcs), d))
    return srcs, dsts, cells


def port_cell_state(cell: Any) -> tuple[str, str]:
    """(state, text) of one port-matrix cell: state is ok / refused / timeout / fail / self / unknown."""
    if isinstance(cell, list):
        states = [port_cell_state(c) for c in cell]
        bad = [s for s in states if s[0] not in ("ok", "self")]
        if not bad:
            return (states[0][0] if states else "unknown"), "; ".join(t for _, t in states)
        return bad[0][0], "; ".join(t for _, t in states)
    if isinstance(cell, bool):
        return ("ok", "reachable") if cell else ("fail", "unreachable")
    if cell is None:
        return "unknown", "not measured"
    if isinstance(cell, Mapping):
        port = cell.get("port")
        raw = cell.get("state", cell.get("status", cell.get("result", cell.get("ok"))))
        state, text = port_cell_state(raw)
        detail = cell.get("error") or cell.get("detail") or cell.get("reason")
        rtt = finite(cell.get("rtt_ms", cell.get("latency_ms")))
        bits = [f"port {port}" if port is not None else "", text]
        if rtt is not None:
            bits.append(f"{rtt:.2f} ms")
        if detail:
            bits.append(str(detail))
        return state, " ".join(b for b in bits if b)
    s = str(cell).lower()
    for state, words in (
        ("ok", ("ok", "pass", "open", "reachable", "connected", "up")),
        ("self", ("self", "-", "n/a", "same")),
        ("refused", ("refused", "reset", "closed", "reject", "rejected")),
        ("timeout", ("timeout", "timed out", "drop", "dropped", "filtered", "hang")),
        ("fail", ("fail", "unreachable", "error", "down", "no route", "warn")),
    ):
        if s in words or any(w in s for w in words if len(w) > 3):
            return state, str(cell)
    return "unknown", str(cell)


# ---------------------------------------------------------------- log-analysis


def findings(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [f for f in doc.get("findings") or () if isinstance(f, Mapping)]


def severity_status(sev: Any) -> str:
    """A finding's severity as a check status (fail / warn / pass)."""
    s = str(sev or "").lower()
    if s in ("critical", "error", "fatal", "fail", "high"):
        return "fail"
    if s in ("warning", "warn", "medium", "low"):
        return "warn"
    if s in ("info", "note", "pass"):
        return "pass"
    return "warn"


def steps(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    rows = doc.get("steps") or ()
    if isinstance(rows, Mapping):  # {"columns": [...], "rows": [[...]]}
        cols = list(rows.get("columns") or ())
        rows = [dict(zip(cols, r)) for r in rows.get("rows") or () if isinstance(r, (list, tuple))]
    out = []
    for r in rows:
        if not isinstance(r, Mapping):
            continue
        if number(r.get("step")) is None and number(r.get("iter")) is not None:
            r = {**r, "step": r["iter"]}  # Megatron-style logs count iterations and print no step
        if number(r.get("step")) is not None:
            out.append(r)
    return out


# ---------------------------------------------------------------- memory-estimate

BREAKDOWN_PARTS = ("weights", "gradients", "optimizer_states", "master_weights", "activations", "logits",
                   "overheads")


def breakdown(doc: Mapping[str, Any]) -> dict[str, float]:
    """Bytes per component (the known ones in order, then any others), without ``total``."""
    raw = doc.get("breakdown") or {}
    out: dict[str, float] = {}
    for k in list(BREAKDOWN_PARTS) + [k for k in raw if k not in BREAKDOWN_PARTS]:
        if k == "total" or k not in raw:
            continue
        v = raw[k]
        if isinstance(v, Mapping):  # {"bytes": N, ...} or nested overheads
            v = v.get("bytes", v.get("total", sum(x for x in (finite(y) for y in v.values()) if x is not None)))
        n = finite(v)
        if n is not None:
            out[k] = n
    return out


def breakdown_total(doc: Mapping[str, Any]) -> float | None:
    raw = doc.get("breakdown") or {}
    total = raw.get("total")
    if isinstance(total, Mapping):
        total = total.get("bytes")
    t = finite(total)
    if t is None:
        parts = breakdown(doc)
        return sum(parts.values()) if parts else None
    return t


def gpu_memory_bytes(doc: Mapping[str, Any]) -> float | None:
    g = doc.get("gpu_memory")
    if isinstance(g, Mapping):
        for key in ("usable_bytes", "total_bytes", "bytes", "capacity_bytes", "total"):
            if finite(g.get(key)) is not None:
                return finite(g.get(key))
        return None
    return finite(g)


def verdict(doc: Mapping[str, Any]) -> tuple[str, str]:
    """(short verdict word, explanation) from a string or a mapping verdict."""
    v = doc.get("verdict")
    if isinstance(v, Mapping):
        word = v.get("verdict") or v.get("status") or v.get("result") or ("fits" if v.get("fits") else "")
        return str(word or doc.get("status", "?")), str(v.get("message") or v.get("summary") or v.get("reason") or "")
    return str(v if v is not None else doc.get("status", "?")), ""


def verdict_status(doc: Mapping[str, Any]) -> str:
    word, _ = verdict(doc)
    w = word.lower()
    if w in STATUS_CODE:
        return w
    if any(x in w for x in ("oom", "not fit", "does not", "exceed", "over", "no")):
        return "fail"
    if any(x in w for x in ("tight", "close", "marginal", "risk")):
        return "warn"
    if "fit" in w or w in ("ok", "yes"):
        return "pass"
    return status_of(doc.get("status"), "skip")


def text_items(value: Any) -> list[str]:
    """Suggestions and similar: strings, or mappings with a message-like key."""
    out = []
    for item in value or ():
        if isinstance(item, Mapping):
            text = item.get("message") or item.get("summary") or item.get("text") or item.get("suggestion")
            if text is None:
                text = ", ".join(f"{k}={v}" for k, v in item.items())
            out.append(str(text))
        else:
            out.append(str(item))
    return out
