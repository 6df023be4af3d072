"""A cluster judged against itself: save a healthy run's per-node numbers, compare later runs.

``preflight --save-baseline DIR`` writes ``DIR/baseline.json``: per node, the versions the
software/gpu probes found, the nccl probe's plateau busbw and the node's median pairwise link,
and each path's write/read throughput. ``preflight --baseline DIR`` compares this run's
numbers with it and names each regression with both numbers:

- a version that changed since the baseline: warn (an upgrade may be intended, but it is the
  first suspect when a job got slower or fails);
- busbw (plateau or the node's links) below ``BUSBW_FRACTION`` of its baseline: fail;
- filesystem write/read throughput below ``FS_FRACTION`` of its baseline: warn (storage is
  shared and noisy, so only a large drop is named).

Nodes are matched by name; a node new since the baseline, or one missing now, is said so.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmdiag.cluster import facts
from llmdiag.result import ClusterReport, Evidence, Result, Status

FILE = "baseline.json"
BUSBW_FRACTION = 0.7
FS_FRACTION = 0.3
VERSION = 1


def node_numbers(node: Mapping[str, Any]) -> dict[str, Any]:
    """One node report dict → {"versions": {...}, "busbw": x, "link_gbps": y, "fs": {path: {...}}}."""
    results = node.get("results") or []
    versions = facts.probe_facts(results)
    out: dict[str, Any] = {"versions": versions, "fs": {}}
    for r in results:
        data = r.get("data") or {}
        if r.get("status") not in ("pass", "warn"):
            continue  # a failed or timed-out measurement is no baseline
        if r.get("probe") == "nccl" and data.get("plateau_busbw") is not None:
            out["busbw"] = data["plateau_busbw"]
            pw = data.get("pairwise") or {}
            medians = _node_medians(pw)
            if node.get("node") in medians:
                out["link_gbps"] = medians[node["node"]]
        if r.get("probe") == "filesystem" and "write_mb_s" in data:
            path = r.get("check", "").partition(":")[2]
            out["fs"][path] = {k: data[k] for k in ("write_mb_s", "read_mb_s") if data.get(k) is not None}
    return out


def _node_medians(pw: Mapping[str, Any]) -> dict[str, float]:
    import statistics

    per: dict[str, list[float]] = {}
    for lk in pw.get("links") or ():
        for end in (lk["a"], lk["b"]):
            per.setdefault(end, []).append(lk["gbps"])
    return {n: statistics.median(v) for n, v in per.items()}


def extract(report: ClusterReport) -> dict[str, Any]:
    """The baseline document of a report."""
    return {"version": VERSION, "created_at": time.time(),
            "nodes": {n.node: node_numbers(n.to_dict()) for n in report.nodes}}


def save(directory: str | Path, report: ClusterReport) -> Path:
    from llmdiag.util.files import write_atomic

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    target = d / FILE
    write_atomic(target, json.dumps(extract(report), indent=1, sort_keys=True))
    return target


def load(directory: str | Path) -> dict[str, Any]:
    """The saved baseline; a UsageError naming the problem when there is none or it is unreadable."""
    from llmdiag.errors import UsageError

    p = Path(directory) / FILE
    try:
        doc = json.loads(p.read_text())
    except FileNotFoundError:
        raise UsageError(f"--baseline {directory}: no {FILE} there (save one with --save-baseline DIR)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"--baseline {directory}: {FILE} is not readable: {exc}") from None
    if not isinstance(doc, dict) or doc.get("version") != VERSION or not isinstance(doc.get("nodes"), dict):
        raise UsageError(f"--baseline {directory}: {FILE} is not an llmdiag baseline (version {VERSION})")
    return doc


def _res(check: str, node: str, status: Status, summary: str, evidence=(), remediation=None, runbook=None) -> Result:
    return Result(probe="baseline", check=check, node=node, status=status, summary=summary,
                  evidence=tuple(Evidence(*e) for e in evidence), remediation=remediation, runbook=runbook)


def compare(baseline: Mapping[str, Any], report: ClusterReport) -> list[Result]:
    """Regressions of ``report`` against ``baseline``, one result per finding, plus a summary."""
    now = extract(report)["nodes"]
    then = baseline["nodes"]
    out: list[Result] = []
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(baseline.get("created_at") or 0))
    for node, cur in now.items():
        old = then.get(node)
        if old is None:
            out.append(_res("baseline:node", node, Status.SKIP, f"{node} is not in the baseline of {when}: "
                            "nothing to compare", runbook="check-skipped"))
            continue
        for key, was in sorted((old.get("versions") or {}).items()):
            new = (cur.get("versions") or {}).get(key, was)
            if new != was:
                out.append(_res(f"baseline:{key}", node, Status.WARN, f"{node}: {key} {was} -> {new} since the "
                                f"baseline of {when}", evidence=[(key, new, was, "")], runbook="cluster-version-mismatch",
                                remediation="If the change was not intended, reinstall the baseline's version; "
                                            "if it was, save a new baseline (--save-baseline)."))
        for key, label in (("busbw", "plateau busbw"), ("link_gbps", "median pairwise link")):
            was, new = old.get(key), cur.get(key)
            if was and new is not None and new < BUSBW_FRACTION * was:
                out.append(_res(f"baseline:{key}", node, Status.FAIL,
                                f"{node}: {label} {new:.3g} GB/s, {new / was:.0%} of the baseline's {was:.3g} GB/s "
                                f"({when})", evidence=[(label, round(new, 4), round(was, 4), "GB/s")],
                                runbook="nccl-low-bandwidth",
                                remediation="Run `llmdiag nccl-bench --pairwise` to find the slow link, and compare "
                                            "NCCL_DEBUG=INFO transports with the baseline run's."))
        for path, nums in sorted((cur.get("fs") or {}).items()):
            base = (old.get("fs") or {}).get(path) or {}
            for key in ("write_mb_s", "read_mb_s"):
                was, new = base.get(key), nums.get(key)
                if was and new is not None and new < FS_FRACTION * was:
                    out.append(_res(f"baseline:fs:{path}", node, Status.WARN,
                                    f"{node}: {path} {key.split('_')[0]} {new:.0f} MiB/s, {new / was:.0%} of the "
                                    f"baseline's {was:.0f} MiB/s ({when})",
                                    evidence=[(key, round(new, 1), round(was, 1), "MiB/s")], runbook="path-slow",
                                    remediation=f"Check the storage behind {path} (iostat -x 1, the NFS/Lustre server "
                                                "load) against the time of the baseline."))
    for node in sorted(set(then) - set(now)):
        out.append(_res("baseline:node", node, Status.SKIP, f"{node} was in the baseline of {when} but has no report "
                        "now", runbook="check-skipped"))
    bad = [r for r in out if r.status in (Status.WARN, Status.FAIL)]
    if not bad:
        out.append(_res("baseline", "cluster", Status.PASS, f"{len(now)} node(s) match the baseline of {when} "
                        f"(versions; busbw within {BUSBW_FRACTION:.0%}, throughput within {FS_FRACTION:.0%})"))
    return out
