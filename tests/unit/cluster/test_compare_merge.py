"""Majority / odd-one-out logic, and the cluster report built from node report dicts."""

from __future__ import annotations

import json
import subprocess
import sys

from llmdiag.cluster.compare import FactSpec, diff_facts, majority, node_list
from llmdiag.cluster.gather import read_node_files, write_node_file
from llmdiag.cluster.merge import build_report
from llmdiag.result import NodeReport, Result, Status
from tests.conftest import cli_env


def test_majority_names_the_odd_one_out():
    values = {f"node-{i}": "2.5.1+cu124" for i in range(16)}
    values["node-7"] = "2.4.0+cu121"
    order = [f"node-{i}" for i in range(16)]
    [d] = diff_facts({n: {"torch": v} for n, v in values.items()}, [FactSpec("torch", "torch")], order)
    assert d.majority == "2.5.1+cu124" and len(d.majority_nodes) == 15
    assert d.sentence(*d.outliers[0]) == "node-7: torch 2.4.0+cu121, 15 other nodes: 2.5.1+cu124"


def test_tie_goes_to_rank_0_and_unhashable_values_compare():
    top, nodes, rest = majority({"b": 1, "a": 2}, ["a", "b"])
    assert top == 2 and nodes == ["a"] and rest == [(1, ["b"])]
    top, _, rest = majority({"a": [1, 2], "b": [1, 2], "c": [3]}, ["a", "b", "c"])
    assert top == [1, 2] and rest == [([3], ["c"])]


def test_not_collected_is_left_out_but_none_takes_part():
    facts = {"a": {"torch": "2.5"}, "b": {"torch": "2.5"}, "c": {}, "d": {"torch": None}}
    [d] = diff_facts(facts, [FactSpec("torch", "torch")], list(facts))
    assert d.outlier_nodes() == ["d"] and d.sentence(None, ["d"]).startswith("d: torch (none)")
    assert diff_facts({"a": {"x": 1}}, [FactSpec("x", "x")], ["a"]) == []  # one node: nothing to compare


def test_node_list_is_short_at_scale():
    assert node_list(["a", "b"]) == "a, b"
    assert node_list([f"n{i}" for i in range(100)]) == "n0, n1, n2, n3, n4 and 95 more"


def _node(rank, *, torch="2.5.1", mtu=1500, env=None, matrix=None, clock=None, paths=None, name=None):
    res = (Result(probe="software", check="torch", node=name or f"node-{rank}", status=Status.PASS, summary="t",
                  data={"torch": torch, "python": "3.11.7"}),)
    facts = {"probes": {"torch": torch, "python": "3.11.7"}, "env": env or {}, "network": {"mtu": mtu, "interface": "eth0"},
             "paths": paths or {}}
    meta = {"world": {"nnodes": 4, "node_rank": rank, "hosts": []}, "facts": facts,
            "clock": clock or {"skew_ms": 0.0, "rtt_ms": 0.1},
            "matrix": matrix or {"ports": [29500], "mode": "ring + 2 sampled peers", "tested": 3, "open": 3,
                                 "problems": []}}
    return NodeReport(node=name or f"node-{rank}", node_rank=rank, results=res, meta=meta).to_dict()


def test_build_report_versions_env_mtu_clock_ports_missing():
    bad_matrix = {"ports": [29500, 29501], "mode": "all pairs", "tested": 3, "open": 1, "problems": [
        {"src_rank": 0, "dst_rank": 2, "port": 29501, "outcome": "timeout", "detail": "no answer"},
        {"src_rank": 0, "dst_rank": 1, "port": 29501, "outcome": "busy", "detail": "in use"}]}
    docs = [_node(0, matrix=bad_matrix), _node(1, env={"NCCL_IB_DISABLE": "1"}),
            _node(2, torch="2.4.0", clock={"skew_ms": -2500.0, "rtt_ms": 0.4}, mtu=9000)]
    rep = build_report(docs, lost={3: "died: no heartbeat for 4 s"}, skew_warn_ms=100)
    d = rep.to_dict()
    assert d["status"] == "fail" and d["missing_nodes"] == ["node rank 3"]
    by = {(r["check"], r["node"]): r for r in d["results"] if r["scope"] == "cluster"}
    assert by[("consistency:torch", "node-2")]["summary"] == "node-2: torch 2.4.0, 2 other nodes: 2.5.1"
    assert by[("consistency:mtu", "node-2")]["runbook"] == "mtu-mismatch"
    env = by[("consistency:env:NCCL_IB_DISABLE", "node-1")]
    assert env["status"] == "warn" and "2 other nodes: (unset)" in env["summary"]
    clock = by[("clock-skew", "node-2")]
    assert clock["status"] == "warn" and "2500 ms behind" in clock["summary"]
    pm = by[("port-matrix", "node-2")]
    assert pm["status"] == "fail" and pm["runbook"] == "cluster-firewall-drop"
    assert "node-0 → node-2:29501 timed out (dropped by a firewall?)" in pm["summary"]
    assert by[("port-matrix", "node-1")]["status"] == "warn" and by[("port-matrix", "node-1")]["runbook"] == "port-in-use"
    assert by[("node-died", "node rank 3")]["runbook"] == "cluster-node-died"
    assert d["sections"]["missing_nodes"][0]["state"] == "died"
    assert [c["key"] for c in d["sections"]["consistency"]] == ["torch", "mtu", "env:NCCL_IB_DISABLE"]
    assert d["sections"]["port_matrix"]["failed"] == 2


def test_shared_path_checks():
    ok = {"exists": True, "fstype": "nfs4", "source": "srv:/export", "mount_root": "/", "writable": True,
          "fingerprint": {"digest": "abc"}, "shared": True, "must_write": True, "token_seen": True}
    local = dict(ok, fstype="ext4", source="/dev/sda1", fingerprint={"digest": "zzz"}, token_seen=False,
                 token_waited_s=5.0)
    docs = [_node(0, paths={"/ckpt": ok, "/data": {"exists": True, "shared": False}}),
            _node(1, paths={"/ckpt": ok, "/data": {"exists": False, "shared": False}}),
            _node(2, paths={"/ckpt": local, "/data": {"exists": True, "shared": False}})]
    d = build_report(docs, nnodes=3).to_dict()
    fails = {(r["check"], r["node"], r["runbook"]) for r in d["results"] if r["status"] == "fail"}
    assert ("path:/data", "node-1", "cluster-path-missing-on-node") in fails
    assert ("path:/ckpt:shared", "node-2", "cluster-fs-not-shared") in fails
    assert ("path:/ckpt:fstype", "node-2", "cluster-fs-not-shared") in fails
    assert ("path:/ckpt:fingerprint", "node-2", "cluster-fs-not-shared") in fails
    assert not any(n == "node-0" for _, n, _ in fails)


def test_duplicate_hostnames_get_rank_suffix_and_healthy_is_pass():
    d = build_report([_node(0, name="c"), _node(1, name="c")], nnodes=2).to_dict()
    assert [n["node"] for n in d["nodes"]] == ["c#0", "c#1"]
    assert d["status"] == "pass"


def test_node_files_atomic_and_report_merge_cli(tmp_path):
    for doc in (_node(0), _node(1), _node(2, torch="2.4.0")):
        write_node_file(tmp_path, doc)
    (tmp_path / "junk.json").write_text("{not json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junk.json", "node-00000.json", "node-00001.json",
                                                          "node-00002.json"]
    docs, problems = read_node_files(tmp_path)
    assert len(docs) == 3 and problems and "junk.json" in problems[0]
    p = subprocess.run([sys.executable, "-m", "llmdiag", "report", "merge", str(tmp_path), "-f", "json"],
                       capture_output=True, text=True, env=cli_env(), timeout=60)
    assert p.returncode == 1, p.stderr
    m = json.loads(p.stdout)
    assert m["command"] == "report merge" and m["missing_nodes"] == ["node rank 3"]
    assert any(r["check"] == "consistency:torch" and r["node"] == "node-2" for r in m["results"])
    md = subprocess.run([sys.executable, "-m", "llmdiag", "report", "merge", str(tmp_path), "-f", "markdown"],
                        capture_output=True, text=True, env=cli_env(), timeout=60).stdout
    assert "## Consistency across nodes" in md and "node-2: 2.4.0" in md
    term = subprocess.run([sys.executable, "-m", "llmdiag", "report", "merge", str(tmp_path), "--width", "120"],
                          capture_output=True, text=True, env=cli_env(), timeout=60).stdout
    assert "consistency across nodes" in term and "nodes without a report" in term
    empty = tmp_path / "empty"
    empty.mkdir()
    p = subprocess.run([sys.executable, "-m", "llmdiag", "report", "merge", str(empty)], capture_output=True, text=True,
                       env=cli_env(), timeout=60)
    assert p.returncode == 2 and "no node report files" in p.stderr


def _matrix(rank, peers, problems, ports=(29500, 29501, 29502)):
    return {"ports": list(ports), "mode": "all pairs", "peers": peers, "tested": len(peers) * len(ports),
            "open": len(peers) * len(ports) - len(problems),
            "problems": [{"src_rank": rank, "dst_rank": d, "port": p, "outcome": "timeout", "detail": "no answer"}
                         for d, p in problems]}


def _cluster(d):
    return {(r["check"], r["node"]): r for r in d["results"] if r["scope"] == "cluster"}


def test_a_node_that_cannot_connect_out_is_blamed_not_each_receiver():
    """node-2's own egress drops port 29502: every connect it makes there fails, every other node reaches every
    port; the sending side is named (before: each of the three healthy receivers was told to check its firewall)."""
    docs = [_node(k, matrix=_matrix(k, [j for j in range(4) if j != k],
                                    [(j, 29502) for j in range(4) if j != k] if k == 2 else [])) for k in range(4)]
    by = _cluster(build_report(docs, nnodes=4).to_dict())
    assert [node for check, node in by if check == "port-matrix"] == ["node-2"], by
    assert by[("port-matrix", "node-2")]["status"] == "fail"
    assert "cannot connect out" in by[("port-matrix", "node-2")]["summary"]


def test_one_lost_connect_on_a_lossy_link_is_a_warning_on_that_link():
    """One connect of node-2 to node-1:29501 timed out (twice, with the probe's retry) while node-2 reached node-1's
    other ports and the other nodes reached node-1:29501: a lossy link, named with both ends, not a firewall FAIL
    on node-1."""
    docs = [_node(k, matrix=_matrix(k, [j for j in range(4) if j != k], [(1, 29501)] if k == 2 else []))
            for k in range(4)]
    by = _cluster(build_report(docs, nnodes=4).to_dict())
    pm = {node: r for (check, node), r in by.items() if check == "port-matrix"}
    assert list(pm) == ["node-2"] and pm["node-2"]["status"] == "warn", pm
    assert "node-2 ↔ node-1" in pm["node-2"]["summary"]


def test_a_port_dropped_on_one_node_from_every_peer_stays_that_nodes_failure():
    docs = [_node(k, matrix=_matrix(k, [j for j in range(3) if j != k], [(1, 29502)] if k != 1 else []))
            for k in range(3)]
    by = _cluster(build_report(docs, nnodes=3).to_dict())
    pm = {node: r["status"] for (check, node), r in by.items() if check == "port-matrix"}
    assert pm == {"node-1": "fail"}, pm


def test_launch_checks_name_a_duplicated_rank_and_the_odd_node_count():
    from llmdiag.cluster.merge import launch_checks

    def claim(node, rank, nnodes=4, pid=1):
        return {"node": node, "rank": rank, "nnodes": nnodes, "master_port": 29500, "pid": pid, "address": node}

    dup = launch_checks([claim("node-0", 0), claim("node-1", 1), claim("node-2", 1), claim("node-3", 3)], 4)
    assert sorted(r.node for r in dup) == ["node-1", "node-2"]
    assert all(r.check == "node-rank" and "claimed by both node-1 and node-2" in r.summary and "[2]" in r.summary
               for r in dup)
    odd = launch_checks([claim("node-0", 0), claim("node-1", 1), claim("node-2", 2), claim("node-3", 3, nnodes=5)], 4)
    assert [(r.node, r.check) for r in odd] == [("node-3", "launcher-variables")] and "NNODES=5" in odd[0].summary
    # rank 0 is the odd one: the majority says 4
    root = launch_checks([claim("node-0", 0, nnodes=3), claim("node-1", 1), claim("node-2", 2), claim("node-3", 3)], 3)
    assert [(r.node, r.check) for r in root] == [("node-0", "launcher-variables")] and "NNODES=3" in root[0].summary
    assert launch_checks([claim(f"node-{k}", k) for k in range(4)], 4) == []
