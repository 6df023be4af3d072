"""From measured rows to the ``nccl-bench`` document: footer numbers, plateau, straggler,
pass/fail findings.

- *Avg bus bandwidth* is nccl-tests' number: the mean busbw over every row and both columns,
  small messages included (so it depends on the size range; compare it only between runs
  with the same ``-b/-e/-f``).
- *Plateau busbw* is what compares with hardware: the mean, over the largest
  ``plateau_sizes`` sizes, of the better of the two columns at each size.
- A *straggler* is a rank whose own busbw over the plateau rows (from its own time) is below
  ``straggler_fraction`` of the median rank's.

Findings are plain dicts shaped like :class:`llmdiag.result.Result` fields, so the preflight
probe turns them into results and the command into its exit code, from the same logic.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from llmdiag import documents as D
from llmdiag.ncclbench.collectives import busbw_factor
from llmdiag.result import SCHEMA_VERSION, Status

RUNBOOK_LOW = "nccl-low-bandwidth"
RUNBOOK_WRONG = "nccl-wrong-results"
RUNBOOK_STRAGGLER = "straggler-rank"
RUNBOOK_SLOW_LINK = "slow-link"


def cells(row: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [c for c in (row.get("out_of_place"), row.get("in_place")) if c]


def by_collective(rows: list[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        out.setdefault(r["collective"], []).append(r)
    return out


def avg_busbw(rows: list[Mapping[str, Any]]) -> float | None:
    values = [c["busbw"] for r in rows for c in cells(r)]
    return sum(values) / len(values) if values else None


def plateau_rows(rows: list[Mapping[str, Any]], plateau_sizes: int) -> list[Mapping[str, Any]]:
    sizes = sorted({r["size"] for r in rows})[-plateau_sizes:]
    return [r for r in rows if r["size"] in sizes]


def plateau_busbw(rows: list[Mapping[str, Any]], plateau_sizes: int) -> float | None:
    best = [max(c["busbw"] for c in cells(r)) for r in plateau_rows(rows, plateau_sizes) if cells(r)]
    return sum(best) / len(best) if best else None


def wrong_total(rows: list[Mapping[str, Any]]) -> int:
    return sum(int(c.get("wrong") or 0) for r in rows for c in cells(r))


def rank_busbw(rows: list[Mapping[str, Any]], world_size: int) -> list[float]:
    """Each rank's mean busbw over ``rows``, computed from that rank's own times."""
    sums = [0.0] * world_size
    counts = [0] * world_size
    for r in rows:
        factor = busbw_factor(r["collective"], world_size)
        for key in ("out_of_place", "in_place"):
            times = (r.get("rank_time_us") or {}).get(key)
            for rank, t in enumerate(times or ()):
                if t and t > 0:
                    sums[rank] += r["size"] / (t * 1e-6) / 1e9 * factor
                    counts[rank] += 1
    return [s / c if c else 0.0 for s, c in zip(sums, counts)]


def slowest_node(pw: Mapping[str, Any]) -> dict[str, Any] | None:
    """The slowest node by its measured links (pairwise): the per-rank busbw of a collective
    cannot tell, since a synchronous collective makes every rank wait for the slowest link."""
    from llmdiag.ncclbench.pairwise import outliers

    per: dict[str, list[float]] = {}
    for lk in pw.get("links") or ():
        for end in (lk["a"], lk["b"]):
            per.setdefault(end, []).append(lk["gbps"])
    if len(per) < 2:
        return None
    medians = {n: statistics.median(v) for n, v in per.items()}
    node = min(medians, key=lambda n: medians[n])
    median = statistics.median(medians.values())
    ranks = {n["node"]: n["rank"] for n in pw.get("nodes") or ()}
    test = outliers(medians, float(pw.get("low_fraction") or 0.5))
    return {"rank": ranks.get(node), "host": node, "busbw": medians[node], "median_busbw": median,
            "fraction": medians[node] / median if median > 0 else 1.0, "basis": "pairwise links",
            "node_median_gbps": medians, "mad_log10": test["mad_log10"],
            # pairwise/node and pairwise/link findings already name it: no second finding
            "flagged": False}


def straggler(per_rank: list[float], hosts: list[str], fraction: float) -> dict[str, Any] | None:
    """The slowest rank, flagged when its busbw is below ``fraction`` × the median rank's."""
    if len(per_rank) < 2:
        return None
    median = statistics.median(per_rank)
    rank = min(range(len(per_rank)), key=lambda r: per_rank[r])
    ratio = per_rank[rank] / median if median > 0 else 1.0
    return {
        "rank": rank,
        "host": hosts[rank] if rank < len(hosts) else None,
        "busbw": per_rank[rank],
        "median_busbw": median,
        "fraction": ratio,
        "threshold_fraction": fraction,
        "flagged": ratio < fraction,
        "rank_busbw": per_rank,
    }


def _finding(check: str, status: Status, summary: str, *, evidence=(), remediation=None, runbook=None,
             node: str | None = None) -> dict[str, Any]:
    return {"check": check, "status": status.value, "summary": summary, "node": node,
            "evidence": [dict(name=e[0], observed=e[1], expected=e[2], unit=e[3]) for e in evidence],
            "remediation": remediation, "runbook": runbook}


def findings(doc: Mapping[str, Any], expected: float | None, min_fraction: float) -> list[dict[str, Any]]:
    out = []
    for c in doc["collectives"]:
        name, wrong = c["collective"], c["wrong"]
        if wrong:
            out.append(_finding(
                f"{name}/correctness", Status.FAIL, f"{name}: {wrong} wrong element(s) after the collective",
                evidence=[("#wrong", wrong, 0, "elements")], runbook=RUNBOOK_WRONG,
                remediation="Rerun with NCCL_DEBUG=INFO and the failing size only; suspect the GPU/NIC of the "
                            "ranks involved (ECC errors, Xid) and disable P2P/SHM transports one at a time."))
        elif doc["spec"]["check"]:
            out.append(_finding(f"{name}/correctness", Status.PASS, f"{name}: every element correct"))
        plateau = c["plateau_busbw"]
        if expected is not None and plateau is not None:
            floor = min_fraction * expected
            if plateau < floor:
                out.append(_finding(
                    f"{name}/busbw", Status.FAIL,
                    f"{name}: plateau busbw {plateau:.3g} GB/s is below {floor:.3g} GB/s "
                    f"({min_fraction:.0%} of the expected {expected:g} GB/s)",
                    evidence=[("plateau busbw", round(plateau, 3), expected, "GB/s")], runbook=RUNBOOK_LOW,
                    remediation="Run `llmdiag nccl-bench --pairwise` to find the slow node or link, and check "
                                "NCCL_DEBUG=INFO for the transport and interface in use."))
            else:
                out.append(_finding(f"{name}/busbw", Status.PASS,
                                    f"{name}: plateau busbw {plateau:.3g} GB/s (expected {expected:g} GB/s)"))
    s = doc.get("straggler")
    if s and s["flagged"]:
        out.append(_finding(
            "straggler", Status.WARN,
            f"rank {s['rank']} ({s['host']}) reaches {s['busbw']:.3g} GB/s, {s['fraction']:.0%} of the median "
            f"rank's {s['median_busbw']:.3g} GB/s",
            evidence=[("rank busbw", round(s["busbw"], 3), round(s["median_busbw"], 3), "GB/s")],
            runbook=RUNBOOK_STRAGGLER, node=s["host"],
            remediation=f"Check rank {s['rank']}'s host: CPU/GPU clocks and throttling, other processes, its "
                        "NIC; `llmdiag nccl-bench --pairwise` measures its links."))
    pw = doc.get("pairwise")
    if pw:
        # Loopback "links" on one CPU host: worth showing, not worth failing a run over.
        slow_status = Status.WARN if pw.get("loopback") else Status.FAIL
        for n in pw["slow_nodes"]:
            links = ", ".join(f"{lk['peer']} {lk['gbps']:.3g}" for lk in n["links"])
            out.append(_finding(
                "pairwise/node", slow_status,
                f"node {n['node']} is slow on its links: median {n['median_gbps']:.3g} GB/s vs the nodes' median "
                f"{pw['reference_gbps']:.3g} GB/s (links: {links}; outlier below {pw['threshold_gbps']:.3g} GB/s)",
                evidence=[("node median link", round(n["median_gbps"], 4), round(pw["reference_gbps"], 4), "GB/s")],
                runbook=RUNBOOK_SLOW_LINK, node=n["node"],
                remediation=f"Drain {n['node']} or check its NIC: `ethtool`, `ip -s link`, `tc qdisc show`, "
                            "and NCCL_SOCKET_IFNAME / NCCL_IB_HCA on it."))
        for lk in pw["slow_links"]:
            out.append(_finding(
                "pairwise/link", slow_status,
                f"link {lk['a']} <-> {lk['b']} is slow: {lk['gbps']:.3g} GB/s vs the nodes' median "
                f"{pw['reference_gbps']:.3g} GB/s (outlier below {pw['threshold_gbps']:.3g} GB/s; both ends are fine "
                "with other peers)",
                evidence=[("link bandwidth", round(lk["gbps"], 4), round(pw["reference_gbps"], 4), "GB/s")],
                runbook=RUNBOOK_SLOW_LINK, node=lk["a"],
                remediation=f"Check the cable, switch ports and routes between {lk['a']} and {lk['b']}."))
        if not pw["slow_nodes"] and not pw["slow_links"] and len(pw["nodes"]) >= 2:
            out.append(_finding("pairwise", Status.PASS,
                                f"{len(pw['links'])} link(s) measured, none below "
                                f"{pw['threshold_gbps']:.3g} GB/s"))
    return out


#: a partial run's ``stopped.reason`` -> the status of its ``run`` finding: Ctrl-C is the
#: operator's choice (the rows so far are valid), the others mean the collective path broke
STOP_STATUS = {"interrupted": Status.WARN, "timed out": Status.FAIL, "peer left": Status.FAIL, "failed": Status.FAIL}


def stop_finding(stopped: Mapping[str, Any]) -> dict[str, Any]:
    planned = stopped.get("rows_planned")
    rows = f"{stopped['rows_measured']} of {planned} rows" if planned else f"{stopped['rows_measured']} row(s)"
    running = f"; still running: {stopped['measuring']}" if stopped.get("measuring") else ""
    return _finding("run", STOP_STATUS[stopped["reason"]],
                    f"{stopped['reason']} after {rows}{running}: {stopped['detail']}",
                    evidence=[("rows measured", stopped["rows_measured"], planned, "rows")],
                    remediation=None if stopped["reason"] == "interrupted" else
                    "Rerun with the size that was running (-b/-e) and NCCL_DEBUG=INFO; "
                    "`llmdiag nccl-bench --pairwise -e 1M` names a slow or dead node.")


def build_doc(result: Mapping[str, Any], settings: Mapping[str, Any],
              stopped: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``nccl-bench`` document from a run's result and the ``[nccl_bench]`` settings;
    ``stopped`` (:meth:`Progress.stop`) marks a partial run and adds its ``run`` finding."""
    rows = list(result["rows"])
    n = result["world_size"]
    plateau_n = int(settings.get("plateau_sizes", 3))
    colls = []
    for name, crow in by_collective(rows).items():
        colls.append({
            "collective": name,
            "avg_busbw": avg_busbw(crow),
            "plateau_busbw": plateau_busbw(crow, plateau_n),
            "plateau_sizes": sorted({r["size"] for r in plateau_rows(crow, plateau_n)}),
            "wrong": wrong_total(crow),
        })
    plateau_all = [r for crow in by_collective(rows).values() for r in plateau_rows(crow, plateau_n)]
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "command": "nccl-bench",
        "kind": "nccl-bench",
        "status": "pass",
        "world": {k: result.get(k) for k in ("world_size", "nodes", "backend", "device", "torch_version",
                                             "nccl_version", "hosts", "duration_s")},
        "spec": result["spec"],
        "results": rows,
        "collectives": colls,
        "avg_busbw": avg_busbw(rows),
        "plateau_busbw": colls[0]["plateau_busbw"] if colls else None,
        "out_of_bounds": wrong_total(rows),
        "expected_busbw": settings.get("expected_busbw_gbps"),
        "straggler": straggler(rank_busbw(plateau_all, n), list(result.get("hosts") or []),
                               float(settings.get("straggler_fraction", 0.5))) if plateau_all else None,
        "pairwise": result.get("pairwise"),
    }
    pw = result.get("pairwise")
    if pw and len(pw.get("nodes") or ()) >= 2:
        doc["straggler"] = slowest_node(pw) or doc["straggler"]
    doc["findings"] = findings(doc, settings.get("expected_busbw_gbps"), float(settings.get("min_fraction", 0.9)))
    if stopped is not None:
        doc["stopped"] = dict(stopped)
        doc["findings"].insert(0, stop_finding(stopped))
    doc["status"] = Status.worst(Status(f["status"]) for f in doc["findings"]).value
    return D.to_dict(D.NcclBenchDoc.build(doc))
