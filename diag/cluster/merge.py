"""The cluster report from node reports: rank 0 at the end of a run, or ``report merge DIR``.

Both paths call :func:`build_report` with node report dicts, so a report merged from files
is the same report rank 0 would have printed. Cluster-wide results (``scope: cluster``) name
the node they blame; ``sections`` carries the structured parts renderers show as tables:
``consistency``, ``clock``, ``shared_fs``, ``port_matrix``, ``missing_nodes``
(docs/cluster.md documents the layout).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from llmdiag.cluster import clock, compare, facts, reach
from llmdiag.cluster.compare import node_list
from llmdiag.cluster.world import expected_name
from llmdiag.result import ClusterReport, Evidence, NodeReport, Result, Status

PROBLEM_ROWS_MAX = 1000  # the report lists at most this many failed connections (counts stay exact)
PAIRS_MAX_NODES = 64  # up to this many nodes the report lists every tested pair (for the heat map)
BUSY_OUTCOME = "busy"


def _res(check: str, node: str, status: str, summary: str, *, evidence=(), remediation=None, runbook=None,
         data=None) -> Result:
    ev = tuple(e if isinstance(e, Evidence) else Evidence(*e) for e in evidence)
    return Result(probe="cluster", check=check, node=node, status=Status(status), summary=summary, evidence=ev,
                  remediation=remediation, runbook=runbook, data=data or {})


def unique_names(docs: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    """node rank → report name; two nodes with one hostname (containers) get ``#rank``."""
    names: dict[int, str] = {}
    seen: dict[str, int] = {}
    for d in docs:
        seen[d["node"]] = seen.get(d["node"], 0) + 1
    for i, d in enumerate(docs):
        r = d.get("node_rank")
        r = i if r is None else r
        names[r] = d["node"] if seen[d["node"]] == 1 else f"{d['node']}#{r}"
    return names


def build_report(docs: Sequence[Mapping[str, Any]], *, nnodes: int | None = None,
                 lost: Mapping[int, str] | None = None, hosts: Sequence[str] = (),
                 skew_warn_ms: float = 100.0, extra_results: Sequence[Result] = (),
                 extra_sections: Mapping[str, Any] | None = None, command: str = "preflight",
                 strict: bool = False, duration_s: float | None = None) -> ClusterReport:
    """Aggregate node report dicts (``NodeReport.to_dict()`` with cluster ``meta``).

    ``lost`` holds what rank 0 knows about nodes without a report: rank → "never joined ...",
    "died: ...", "hung: ...". ``hosts`` names expected nodes by rank (hostfile, Slurm).
    ``duration_s`` is the run's length on rank 0's monotonic clock; by default (``report
    merge``) rank 0's node report's own ``meta.elapsed_s``, else none: wall clocks of different
    nodes are never subtracted.
    """
    docs = sorted(docs, key=lambda d: (d.get("node_rank") is None, d.get("node_rank") or 0))
    names = unique_names(docs)
    nodes = []
    for d in docs:
        r = d.get("node_rank")
        nr = NodeReport.from_dict(d)
        name = names[r if r is not None else docs.index(d)]
        if name != nr.node:
            nr = NodeReport(node=name, node_rank=nr.node_rank, started_at=nr.started_at, finished_at=nr.finished_at,
                            meta=nr.meta, results=tuple(x.replace(node=name) for x in nr.results))
        nodes.append(nr)
    if nnodes is None:
        nnodes = max([int((d.get("meta") or {}).get("world", {}).get("nnodes") or 0) for d in docs] + [len(docs)])
    if not hosts:
        for d in docs:
            hosts = (d.get("meta") or {}).get("world", {}).get("hosts") or hosts
    order = [names[r] for r in sorted(names)]
    by_name = {n.node: n for n in nodes}
    results: list[Result] = list(extra_results)
    sections: dict[str, Any] = {}

    missing_names, missing_rows = _missing(nnodes, names, lost or {}, hosts, results)
    sections["missing_nodes"] = missing_rows
    sections["consistency"] = _consistency(by_name, order, results)
    sections["clock"] = _clock(by_name, order, skew_warn_ms, results)
    sections["shared_fs"] = _shared_fs(by_name, order, results)
    sections["port_matrix"] = _port_matrix(by_name, names, results)
    nodes = _proven_shared(nodes, sections["shared_fs"])
    sections.update(extra_sections or {})
    if duration_s is None:
        duration_s = run_elapsed(docs)
    return ClusterReport(command=command, nodes=tuple(nodes), cluster_results=tuple(results),
                         missing_nodes=tuple(missing_names), sections=sections, strict=strict, duration_s=duration_s)


def _isolated_timeouts(problems: Sequence[Mapping[str, Any]], nports: int) -> list[Mapping[str, Any]]:
    """Timeouts that are the only failure between their two nodes, on a port every other node reached, with
    other ports tested between them: a lost packet (even after the retry), not a rule that drops a port."""
    if nports < 2:
        return []
    per_pair: dict[tuple[str, str], int] = {}
    per_port: dict[tuple[str, int], int] = {}
    for p in problems:
        per_pair[(p["src"], p["dst"])] = per_pair.get((p["src"], p["dst"]), 0) + 1
        per_port[(p["dst"], p["port"])] = per_port.get((p["dst"], p["port"]), 0) + 1
    return [p for p in problems if p["outcome"] == "timeout" and per_pair[(p["src"], p["dst"])] == 1
            and per_port[(p["dst"], p["port"])] == 1]


def _egress_culprits(problems: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Sources whose connections fail to two or more nodes that no other source fails to reach: the fault is
    on the sending side (an egress rule), not on each receiver. src → its failed rows."""
    by_src: dict[str, list[Mapping[str, Any]]] = {}
    srcs_of: dict[str, set[str]] = {}
    for p in problems:
        if p["outcome"] == "busy":
            continue
        by_src.setdefault(p["src"], []).append(p)
        srcs_of.setdefault(p["dst"], set()).add(p["src"])
    return {s: rows for s, rows in by_src.items()
            if len({p["dst"] for p in rows}) >= 2 and all(srcs_of[p["dst"]] == {s} for p in rows)}


def launch_checks(claims: Sequence[Mapping[str, Any]], nnodes: int) -> list[Result]:
    """What the nodes' launchers told them, compared (rendezvous claims: node, rank, node count, master port):
    a node rank claimed by two nodes, a node count or master port that differs from the other nodes' (rank 0
    included: the odd one is whichever differs from the rest), a rank outside the node count."""
    out: list[Result] = []
    first: dict[int, Mapping[str, Any]] = {}
    for c in claims:
        r = c.get("rank")
        if not isinstance(r, int):
            continue
        held = first.setdefault(r, c)
        if held is not c and (held.get("node"), held.get("pid")) != (c.get("node"), c.get("pid")):
            # which of the two was given the wrong rank, the claims cannot tell: both are named, on both nodes
            gap = [k for k in range(nnodes) if k not in {x.get("rank") for x in claims}]
            why = (f"node rank {r} was claimed by both {held.get('node')} and {c.get('node')} (the second left the "
                   f"run)" + (f"; node rank(s) {gap} never joined: one of the two was meant to be that" if gap else ""))
            for node in (held.get("node"), c.get("node")):
                out.append(Result(
                    probe="cluster", check="node-rank", node=str(node), status=Status.FAIL, summary=why,
                    remediation="Give every node its own NODE_RANK (0 .. NNODES-1).", runbook="launcher-variables",
                    data={"node_rank": r, "claimed_by": [held.get("node"), c.get("node")], "never_joined": gap}))
    for key, what, flag in (("nnodes", "node count", "NNODES"), ("master_port", "master port", "MASTER_PORT")):
        values = Counter(c.get(key) for c in first.values() if c.get(key) is not None)
        if len(values) < 2:
            continue
        (common, n), = values.most_common(1)
        if n * 2 <= len(first):
            common = nnodes if key == "nnodes" else common  # no majority: rank 0's
        for r, c in sorted(first.items()):
            if c.get(key) not in (None, common):
                out.append(Result(
                    probe="cluster", check="launcher-variables", node=str(c.get("node")), status=Status.FAIL,
                    summary=f"{c.get('node')} (node rank {r}) was launched with {flag}={c.get(key)}, the other "
                            f"nodes with {common}: its {what} differs from the job's",
                    remediation=f"Set the same {flag} on every node.", runbook="launcher-variables",
                    data={key: c.get(key), "common": common}))
    for r, c in sorted(first.items()):
        if r >= nnodes and c.get("nnodes") == nnodes:
            out.append(Result(
                probe="cluster", check="node-rank", node=str(c.get("node")), status=Status.FAIL,
                summary=f"{c.get('node')} was started as node rank {r}, outside the {nnodes} nodes (0 .. {nnodes - 1})",
                remediation="Node ranks run from 0 to NNODES-1.", runbook="launcher-variables",
                data={"node_rank": r, "nnodes": nnodes}))
    return out


def run_elapsed(docs: Sequence[Mapping[str, Any]]) -> float | None:
    """The run's length from the node reports: rank 0's own monotonic ``meta.elapsed_s``, or the
    one node's when there is only one (one clock either way); None otherwise."""
    root = [d for d in docs if d.get("node_rank") == 0] or (list(docs) if len(docs) == 1 else [])
    value = ((root[0].get("meta") or {}).get("elapsed_s") if root else None)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


def _short(host: str) -> str:
    return host.rpartition("@")[2].split(".")[0].lower()


def _missing_hosts(missing: Sequence[int], names: Mapping[int, str], hosts: Sequence[str]) -> dict[int, str]:
    """rank → the host a missing node has, from the node list (hostfile, Slurm) by rank.

    The list's order is the ranks' only where the launcher assigned ranks in list order (a
    hostfile, srun); torchrun's dynamic rendezvous does not. When a reporting node's name sits
    at another rank's place in the list, the hosts no node reported from are the missing ones
    (one host: that one; more: "one of ...")."""
    if not hosts or not missing:
        return {}
    listed = [_short(h) for h in hosts]
    seen = {r: _short(n.split("#")[0]) for r, n in names.items()}
    misplaced = any(s in listed and (r >= len(listed) or listed[r] != s) for r, s in seen.items())
    if not misplaced:
        return {r: hosts[r] for r in missing if r < len(hosts)}
    unreported = [h for h, s in zip(hosts, listed) if s not in set(seen.values())]
    if not unreported:
        return {}
    if len(unreported) == 1 and len(missing) == 1:
        return {missing[0]: unreported[0]}
    some = ", ".join(unreported[:5]) + (f" and {len(unreported) - 5} more" if len(unreported) > 5 else "")
    return {r: f"one of {some}" for r in missing}


def _missing(nnodes, names, lost, hosts, results) -> tuple[list[str], list[dict]]:
    out, rows = [], []
    absent = [r for r in range(nnodes) if r not in names]
    host_of = _missing_hosts(absent, names, hosts)
    for r in absent:
        label = expected_name(r, host=host_of.get(r))
        why = lost.get(r) or "no node report (it never joined, or its file is missing)"
        state = "died" if why.startswith("died") else "hung" if why.startswith("hung") else "missing"
        out.append(label)
        host = host_of.get(r)
        rows.append({"node_rank": r, "name": label, "node": label, "state": state, "detail": why,
                     "host": None if host is None or host.startswith("one of") else host})
        if state == "missing":
            results.append(_res("node-missing", label, "fail", f"{label} is missing: {why}", runbook="cluster-node-missing",
                                evidence=[("node report", None, "received", "")],
                                remediation="Check that the agent started there (scheduler, ssh, container) and can "
                                            "reach MASTER_ADDR:MASTER_PORT; its own report (--node-report-dir) says why."))
        else:
            results.append(_res("node-died", label, "fail", f"{label} joined, then {why}", runbook="cluster-node-died",
                                evidence=[("state", state, "finished", "")],
                                remediation="Look at that node: dmesg -T | tail (OOM killer, Xid), the agent's stderr, "
                                            "and whether the host rebooted."))
    return out, rows


def _consistency(by_name, order, results) -> list[dict]:
    flat = {name: facts.flatten((n.meta or {}).get("facts") or {}) for name, n in by_name.items()
            if (n.meta or {}).get("facts")}
    env_keys = sorted({k for f in flat.values() for k in f if k.startswith("env:")})
    for f in flat.values():
        for k in env_keys:
            f.setdefault(k, "(unset)")
    specs = facts.SPECS + [facts.env_spec(k[4:]) for k in env_keys]
    diffs = compare.diff_facts(flat, specs, order)
    for diff in diffs:
        for value, nodes in diff.outliers:
            results.append(_res(
                f"consistency:{diff.spec.key}", node_list(nodes), diff.spec.status, diff.sentence(value, nodes),
                evidence=[(diff.spec.label, compare.show(value), compare.show(diff.majority), "")],
                remediation=diff.spec.remediation, runbook=diff.spec.runbook,
                data={"key": diff.spec.key, "value": value, "majority": diff.majority, "nodes": list(nodes)}))
    if len(flat) >= 2:
        differing = {d.spec.key for d in diffs}
        same = sorted(k for k in set().union(*flat.values()) if k not in differing)
        if not diffs:
            results.append(_res("consistency", "cluster", "pass",
                                f"{len(same)} facts identical on all {len(flat)} nodes (versions, GPUs, variables, MTU)"))
    return [d.to_dict() for d in diffs]


def _clock(by_name, order, warn_ms, results) -> dict[str, Any]:
    """Skew judged against the median of every node's offset (clock.judge), not against rank 0."""
    table = {}
    for name in order:
        n = by_name.get(name)
        c = ((n.meta or {}).get("clock") if n else None) or {}
        if c:
            table[name] = c
    skews = {n: float(c["skew_ms"]) for n, c in table.items() if isinstance(c.get("skew_ms"), (int, float))}
    verdict = clock.judge(skews, warn_ms)
    rtts = [float(c.get("rtt_ms") or 0.0) for n, c in table.items() if n in skews and not c.get("reference")]
    centre_err = statistics.median(rtts) / 2 if rtts else 0.0  # the median is read through those round trips
    fix = "Enable time sync on every node: timedatectl; chronyc tracking (or ntpq -p)."

    def err(name: str) -> float:
        return float(table[name].get("rtt_ms") or 0.0) / 2 + centre_err

    if verdict.split:
        names = [n for n, _ in verdict.off]
        spread = max(skews[n] for n in names) - min(skews[n] for n in names)
        results.append(_res("clock-skew", node_list(names), "warn",
                            f"clocks of {node_list(names)} are up to {spread:.0f} ms apart and no majority of the "
                            f"{len(skews)} nodes agrees on the time: which clock is wrong cannot be told from here",
                            evidence=[(f"{n} clock vs rank 0's", round(skews[n], 1), f"within ±{warn_ms:g}", "ms")
                                      for n in names][:20], remediation=fix, runbook="cluster-clock-skew"))
    else:
        for name, off in verdict.off:
            results.append(_res("clock-skew", name, "warn",
                                f"{name}'s clock is {abs(off):.0f} ms {'ahead of' if off > 0 else 'behind'} the "
                                f"median of the {len(skews)} nodes' clocks (±{err(name):.1f} ms)",
                                evidence=[("offset from the median", round(off, 1), f"within ±{warn_ms:g}", "ms")],
                                remediation=fix, runbook="cluster-clock-skew"))
    if skews and not verdict.off:
        worst = max(abs(verdict.offset(v)) for v in skews.values())
        results.append(_res("clock-skew", "cluster", "pass",
                            f"clocks within {worst:.1f} ms of the median on {len(skews)} nodes (limit ±{warn_ms:g} ms)"))
    return {"warn_ms": warn_ms, "centre_ms": round(verdict.centre_ms, 3), "nodes": {
        n: dict(c, offset_ms=round(verdict.offset(skews[n]), 3)) if n in skews else c for n, c in table.items()}}


def _shared_fs(by_name, order, results) -> dict[str, Any]:
    per_path: dict[str, dict[str, dict]] = {}
    config: dict[str, dict] = {}
    for name in order:
        n = by_name.get(name)
        for path, f in (((n.meta or {}).get("facts") or {}).get("paths") or {}).items() if n else ():
            per_path.setdefault(path, {})[name] = f
            config.setdefault(path, {"shared": f.get("shared", False), "writable": f.get("must_write", False)})
    out: dict[str, Any] = {}
    for path, rows in per_path.items():
        problems: list[str] = []
        shared = config[path]["shared"]
        absent = [n for n, f in rows.items() if f.get("exists") is False]
        hung = [n for n, f in rows.items() if f.get("exists") is None]
        if absent:
            present = len(rows) - len(absent) - len(hung)
            problems.append("missing")
            results.append(_res(f"path:{path}", node_list(absent), "fail",
                                f"{path} does not exist on {node_list(absent)} ({present} other nodes have it)",
                                evidence=[("exists", False, True, "")], runbook="cluster-path-missing-on-node",
                                remediation=f"Create or mount {path} on {node_list(absent)} (findmnt {path} on a good node "
                                            "shows what to mount)."))
        if hung:
            problems.append("hung")
            results.append(_res(f"path:{path}", node_list(hung), "fail", f"{path} did not answer on {node_list(hung)}: "
                                f"{rows[hung[0]].get('error', 'no answer')}", runbook="path-hung",
                                remediation=f"Check the mount on those nodes: findmnt {path}; dmesg | tail."))
        live = {n: f for n, f in rows.items() if f.get("exists")}
        if config[path]["writable"]:
            ro = [n for n, f in live.items() if f.get("writable") is False]
            if ro:
                problems.append("not-writable")
                results.append(_res(f"path:{path}", node_list(ro), "fail", f"{path} is not writable on {node_list(ro)}",
                                    evidence=[("writable", False, True, "")], runbook="path-not-writable",
                                    remediation=f"Fix permissions or the mount options there: ls -ld {path}; findmnt {path}"))
        if shared and len(live) >= 2:
            _shared_checks(path, live, order, problems, results)
        if not problems:
            what = "shared: same filesystem, contents and token seen" if shared else "present"
            results.append(_res(f"path:{path}", "cluster", "pass", f"{path}: {what} on all {len(rows)} nodes"))
        out[path] = {"shared": shared, "problems": problems,
                     "nodes": {n: {k: f.get(k) for k in ("exists", "fstype", "source", "mount_root", "writable",
                                                         "token_seen")} | {"fingerprint": (f.get("fingerprint") or {}).get("digest")}
                               for n, f in rows.items()}}
    return out


def _proven_shared(nodes: list[NodeReport], shared_fs: Mapping[str, Any]) -> list[NodeReport]:
    """A path every node saw rank 0's token in IS shared: the node-local "should be shared but is
    on a local filesystem type" guess (a bind mount, an unknown FUSE type) is superseded."""
    import os

    proven = {p for p, sec in shared_fs.items() if sec.get("shared") and not sec.get("problems")
              and len(sec.get("nodes") or {}) >= 2
              and all(v.get("token_seen") for v in sec["nodes"].values())}
    if not proven:
        return nodes
    out = []
    for n in nodes:
        res = []
        for r in n.results:
            path = r.check[len("path:"):-len(":shared")] if r.check.startswith("path:") and r.check.endswith(":shared") \
                else None
            if r.probe == "filesystem" and r.status is Status.WARN and path and os.path.abspath(path) in proven:
                r = r.replace(status=Status.PASS, remediation=None, runbook=None,
                              summary=f"{r.summary}, but rank 0's token file appeared on every node: shared in fact")
            res.append(r)
        out.append(NodeReport(node=n.node, node_rank=n.node_rank, started_at=n.started_at, finished_at=n.finished_at,
                              meta=n.meta, results=tuple(res)))
    return out


def _shared_checks(path, live, order, problems, results) -> None:
    fix = (f"Mount the same shared filesystem at {path} on every node (compare `findmnt {path}` across nodes); "
           "a local directory there gives each node its own copy.")
    vals = {n: {"fstype": f.get("fstype"), "source": f.get("source"), "mount_root": f.get("mount_root"),
                "fingerprint": (f.get("fingerprint") or {}).get("digest")} for n, f in live.items()}
    labels = {"fstype": "filesystem type", "source": "mount source", "mount_root": "mount root",
              "fingerprint": "content fingerprint"}
    specs = [compare.FactSpec(k, f"{path} {labels[k]}", "fail", "cluster-fs-not-shared", fix) for k in labels]
    for diff in compare.diff_facts(vals, specs, order):
        problems.append(f"different-{diff.spec.key}")
        for value, nodes in diff.outliers:
            results.append(_res(f"path:{path}:{diff.spec.key}", node_list(nodes), "fail", diff.sentence(value, nodes),
                                evidence=[(diff.spec.label, compare.show(value), compare.show(diff.majority), "")],
                                remediation=fix, runbook="cluster-fs-not-shared"))
    unseen = [n for n, f in live.items() if f.get("token_seen") is False]
    if unseen:
        problems.append("not-shared")
        waited = next((live[n].get("token_waited_s") for n in unseen), None)
        results.append(_res(f"path:{path}:shared", node_list(unseen), "fail",
                            f"{path} is not shared with rank 0 on {node_list(unseen)}: rank 0's token file did not "
                            f"appear there within {waited or '?'} s", evidence=[("token file seen", False, True, "")],
                            remediation=fix, runbook="cluster-fs-not-shared"))


def _port_matrix(by_name, names, results) -> dict[str, Any]:
    rank_name = dict(names)
    tested = opened = 0
    problems: list[dict] = []
    info: dict[str, Any] = {}
    for name, n in by_name.items():
        m = (n.meta or {}).get("matrix") or {}
        if not m:
            continue
        info = info or {k: m.get(k) for k in ("ports", "mode")}
        tested += int(m.get("tested") or 0)
        opened += int(m.get("open") or 0)
        for row in m.get("problems") or ():
            problems.append(dict(row, src=rank_name.get(row["src_rank"], f"rank {row['src_rank']}"),
                                 dst=rank_name.get(row["dst_rank"], f"rank {row['dst_rank']}"),
                                 meaning=reach.MEANING.get(row["outcome"], row["outcome"]),
                                 status=reach.MEANING.get(row["outcome"], row["outcome"])))
    if not info:
        return {}
    groups: dict[str, dict[tuple[int, str], list[str]]] = {}
    egress = _egress_culprits(problems)
    # (only where another node tested the same port and reached it)
    testers: dict[str, set[str]] = {}
    for name, n in by_name.items():
        for peer in ((n.meta or {}).get("matrix") or {}).get("peers") or ():
            testers.setdefault(rank_name.get(peer, f"rank {peer}"), set()).add(name)
    lossy = [p for p in _isolated_timeouts(problems, len(info.get("ports") or ()))
             if testers.get(p["dst"], set()) - {p["src"]}]
    for p in lossy:
        results.append(_res("port-matrix", p["src"], "warn",
                            f"{p['src']} → {p['dst']}:{p['port']} timed out twice while every other port between them "
                            f"and every other node's connect to that port opened: packets are lost on the link "
                            f"{p['src']} ↔ {p['dst']}, not dropped by a firewall",
                            evidence=[(f"{p['src']} → {p['dst']}:{p['port']}", p["outcome"], "open", "")],
                            remediation=f"Look for loss between {p['src']} and {p['dst']}: `ip -s link` error and drop "
                                        "counters on both, `ping -c 100 -i 0.2` between them, the switch port.",
                            runbook="slow-link"))
    for p in problems:
        if (p["src"] in egress and p["outcome"] != "busy") or any(p is q for q in lossy):
            continue
        groups.setdefault(p["dst"], {}).setdefault((p["port"], p["outcome"]), []).append(p["src"])
    for src, rows in sorted(egress.items()):
        dsts = sorted({p["dst"] for p in rows})
        ports = sorted({p["port"] for p in rows})
        results.append(_res("port-matrix", src, "fail",
                            f"{src} cannot connect out: {src} → {node_list(dsts)} on port(s) {_ports_text(ports)} "
                            f"{reach.MEANING.get(rows[0]['outcome'], rows[0]['outcome'])}, while the other nodes "
                            "reach them: its own outgoing traffic is blocked",
                            evidence=[(f"{src} → {p['dst']}:{p['port']}", p["outcome"], "open", "") for p in rows][:20],
                            remediation=f"Check the OUTPUT chain and egress rules on {src} (`iptables -S OUTPUT`, "
                                        f"`nft list ruleset`) and any security group for traffic leaving it.",
                            runbook=reach.RUNBOOK.get(rows[0]["outcome"], "cluster-port-refused")))
    for dst, g in sorted(groups.items()):
        lines = []
        worst = None
        for (port, outcome), srcs in sorted(g.items()):
            if outcome == "busy":
                lines.append(f"{dst}:{port} in use by another program (llmdiag could not listen there)")
            else:
                lines.append(f"{node_list(srcs)} → {dst}:{port} {reach.MEANING.get(outcome, outcome)}")
                worst = worst or outcome
        only_busy = worst is None
        runbook = "port-in-use" if only_busy else reach.RUNBOOK.get(worst, "cluster-port-refused")
        fix = (f"Free the port on {dst} (ss -ltnp) or move the job's port range." if only_busy else
               f"Open the job's ports on {dst}: check `iptables -S`/`nft list ruleset` there and any security group "
               f"between the nodes; test with `nc -vz {dst} PORT` from a peer.")
        results.append(_res("port-matrix", dst, "warn" if only_busy else "fail",
                            "; ".join(lines[:3]) + (f"; and {len(lines) - 3} more" if len(lines) > 3 else ""),
                            evidence=[(f"{node_list(srcs)} → {dst}:{port}", o, "open", "") for (port, o), srcs in sorted(g.items())][:20],
                            remediation=fix, runbook=runbook))
    pairs = _pairs(by_name, names, problems) if len(by_name) <= PAIRS_MAX_NODES else []
    if not problems and tested:
        results.append(_res("port-matrix", "cluster", "pass",
                            f"all {tested} connections open between {len(by_name)} nodes ({info.get('mode')}, "
                            f"ports {_ports_text(info.get('ports'))})"))
    return dict(info, tested=tested, open=opened, failed=len(problems), problems=problems[:PROBLEM_ROWS_MAX],
                truncated=max(0, len(problems) - PROBLEM_ROWS_MAX), pairs=pairs)


_SEVERITY = {reach.OPEN: 0, BUSY_OUTCOME: 1, reach.REFUSED: 2, reach.FOREIGN: 2, reach.ERROR: 3,
             reach.UNRESOLVED: 3, reach.NO_ROUTE: 3, reach.TIMEOUT: 4}


def _pairs(by_name, names, problems) -> list[dict]:
    """Every tested (src, dst) pair with its worst outcome over the ports: the heat map's cells."""
    worst: dict[tuple[str, str], str] = {}
    for name, n in by_name.items():
        m = (n.meta or {}).get("matrix") or {}
        for peer in m.get("peers") or ():
            worst[(name, names.get(peer, f"rank {peer}"))] = reach.OPEN
    for p in problems:
        key = (p["src"], p["dst"])
        if _SEVERITY.get(p["outcome"], 3) > _SEVERITY.get(worst.get(key, reach.OPEN), 0):
            worst[key] = p["outcome"]
    return [{"src": a, "dst": b, "outcome": o, "status": reach.MEANING.get(o, o)}
            for (a, b), o in sorted(worst.items())]


def _ports_text(ports) -> str:
    ports = list(ports or ())
    if len(ports) > 4:
        return f"{ports[0]}-{ports[-1]} ({len(ports)} tested)"
    return ", ".join(str(p) for p in ports)
