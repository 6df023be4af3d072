"""Cluster preflight across namespace hosts: every injected fault on the right node, port and path.

Each test builds its own 3-4 host test bed, starts one real agent per host (a real c10d
store, real sockets, iptables rules, bind mounts) and reads rank 0's JSON report.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.cluster import testbed
from tests.cluster.helpers import PORT, Run, cluster_results, failing, write_config
from tests.cluster.testbed import Testbed
from tests.conftest import cli_env

OK, WHY = testbed.available(iptables=True)
pytestmark = [pytest.mark.cluster, pytest.mark.skipif(not OK, reason=WHY or "test bed unavailable")]


def _runbooks_exist(doc):
    from llmdiag.runbooks import ids as runbook_ids

    ids = set(runbook_ids())
    for r in doc["results"]:
        if r["status"] != "pass":
            assert r["runbook"] in ids, r


def test_healthy_cluster_all_pass_and_merge_from_files_is_the_same(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "data.bin").write_bytes(b"x" * 100)
    reports = tmp_path / "reports"
    cfg = write_config(tmp_path)
    with Testbed(3) as tb:
        run = Run(tb, 3, cfg, "--shared-path", str(shared), "--node-report-dir", str(reports))
        doc = run.finish()
    assert doc["status"] == "pass", failing(doc)
    assert all(rc == 0 for rc, _, _ in run.out.values())
    assert [n["node"] for n in doc["nodes"]] == ["node-0", "node-1", "node-2"]
    checks = {r["check"] for r in cluster_results(doc)}
    assert {"rendezvous", "consistency", "clock-skew", "port-matrix", f"path:{shared}"} <= checks
    pm = doc["sections"]["port_matrix"]
    assert pm["tested"] > 0 and pm["tested"] == pm["open"] and pm["problems"] == []
    assert doc["sections"]["shared_fs"][str(shared)]["nodes"]["node-2"]["token_seen"] is True
    assert not list(shared.glob(".llmdiag-share-*")), "token files must be removed"
    assert run.wall_s < run.timeout + 5
    merged = subprocess.run([sys.executable, "-m", "llmdiag", "report", "merge", str(reports), "-f", "json"],
                            env=cli_env(), capture_output=True, text=True, timeout=60)
    assert merged.returncode == 0, merged.stderr
    m = json.loads(merged.stdout)
    key = lambda d: sorted((r["node"], r["check"], r["status"]) for r in d["results"])  # noqa: E731
    assert key(m) == key(doc)
    assert m["sections"]["consistency"] == doc["sections"]["consistency"] == []


def test_firewall_drop_and_reject_named_on_the_right_node_and_port(tmp_path):
    cfg = write_config(tmp_path)
    with Testbed(3) as tb:
        tb.drop_port(1, 29502)
        tb.reject_port(2, 29503)
        run = Run(tb, 3, cfg)
        doc = run.finish()
    assert run.out[0][0] == 1
    pm = {(r["node"]): r for r in cluster_results(doc, "port-matrix")}
    assert set(pm) == {"node-1", "node-2"}
    assert pm["node-1"]["status"] == "fail" and pm["node-1"]["runbook"] == "cluster-firewall-drop"
    assert "node-1:29502 timed out (dropped by a firewall?)" in pm["node-1"]["summary"]
    assert pm["node-2"]["runbook"] == "cluster-port-refused"
    assert "node-2:29503 refused" in pm["node-2"]["summary"]
    probs = doc["sections"]["port_matrix"]["problems"]
    assert {(p["dst"], p["port"], p["outcome"]) for p in probs} == {("node-1", 29502, "timeout"),
                                                                      ("node-2", 29503, "refused")}
    assert {p["src"] for p in probs if p["dst"] == "node-1"} == {"node-0", "node-2"}
    # every tested pair with its worst outcome: the HTML heat map's cells
    pairs = {(p["src"], p["dst"]): p["outcome"] for p in doc["sections"]["port_matrix"]["pairs"]}
    assert pairs[("node-0", "node-1")] == "timeout" and pairs[("node-0", "node-2")] == "refused"
    assert pairs[("node-1", "node-0")] == "open" and len(pairs) == 6
    _runbooks_exist(doc)


def test_node_never_started_is_named_missing_and_run_is_bounded(tmp_path):
    cfg = write_config(tmp_path)
    with Testbed(4) as tb:
        run = Run(tb, 4, cfg, ranks=[0, 1, 2], timeout=16)
        doc = run.finish()
    assert run.wall_s < 16 + 6, run.wall_s
    assert doc["missing_nodes"] == ["node rank 3"]
    miss = cluster_results(doc, "node-missing")
    assert len(miss) == 1 and miss[0]["node"] == "node rank 3" and miss[0]["runbook"] == "cluster-node-missing"
    assert doc["sections"]["missing_nodes"][0]["state"] == "missing"
    # the three present nodes still checked each other
    assert doc["sections"]["port_matrix"]["tested"] > 0 and not doc["sections"]["port_matrix"]["problems"]


def test_node_killed_mid_run_is_reported_died(tmp_path):
    slow = tmp_path / "slow"
    slow.mkdir()
    cfg = write_config(tmp_path, '\n[[filesystem.paths]]\npath = "%s"\nshared = true\n' % slow)
    with Testbed(3) as tb:
        run = Run(tb, 3, cfg, timeout=20)
        assert run.wait_stderr(2, "joined the rendezvous", 15)
        tb.kill(run.procs[2])
        doc = run.finish()
    assert run.wall_s < 20 + 6
    died = cluster_results(doc, "node-died")
    assert [d["node"] for d in died] == ["node rank 2"], failing(doc)
    assert "died" in died[0]["summary"] and died[0]["runbook"] == "cluster-node-died"
    assert doc["sections"]["missing_nodes"][0]["state"] == "died"
    assert not list(slow.glob(".llmdiag-share-*"))


def test_rendezvous_dropped_for_one_node_then_report_merge(tmp_path):
    cfg = write_config(tmp_path)
    reports = tmp_path / "reports"
    with Testbed(3) as tb:
        tb.drop_port(0, PORT, src=2)
        run = Run(tb, 3, cfg, "--node-report-dir", str(reports), timeout=16)
        # node 2 says at once (not after the whole wait) what its rendezvous does
        assert run.wait_stderr(2, "no answer: packets dropped", 10)
        doc = run.finish()
    assert run.wall_s < 16 + 6
    assert doc["missing_nodes"] == ["node rank 2"]
    own = run.doc(2)
    reach = [r for r in own["results"] if r["check"] == "rendezvous-reach"][0]
    assert reach["status"] == "fail" and reach["runbook"] == "cluster-rendezvous-unreachable"
    assert "timed out (dropped by a firewall?)" in reach["summary"] and tb.addr(0) in reach["summary"]
    detail = [e for e in reach["evidence"] if e["name"] == "detail"][0]["observed"]
    assert detail.startswith("tried ") and "times over" in detail, detail  # the whole wait, not one try
    assert run.out[2][0] == 1
    assert "node report sent to rank 0" not in run.out[2][2] and "rank 0 was not reached" in run.out[2][2]
    merged = subprocess.run([sys.executable, "-m", "llmdiag", "report", "merge", str(reports), "-f", "json"],
                            env=cli_env(), capture_output=True, text=True, timeout=60)
    m = json.loads(merged.stdout)
    assert merged.returncode == 1 and m["missing_nodes"] == []
    assert ("node-2", "rendezvous-reach", "cluster-rendezvous-unreachable") in failing(m)


def test_paths_mtu_and_variables_differ_on_one_node_each(tmp_path):
    shared, local = tmp_path / "shared", tmp_path / "local"
    shared.mkdir()
    local.mkdir()
    (shared / "a.txt").write_text("same")
    (local / "a.txt").write_text("same")  # same name and size: only the token test can tell
    parent, other = tmp_path / "data", tmp_path / "empty"
    (parent / "tokens").mkdir(parents=True)
    other.mkdir()
    cfg = write_config(tmp_path, f'\n[[filesystem.paths]]\npath = "{shared}"\nshared = true\n'
                                 f'\n[[filesystem.paths]]\npath = "{parent / "tokens"}"\nwritable = false\n')
    with Testbed(4) as tb:
        tb.set_mtu(1, 1400)
        run = Run(tb, 4, cfg, binds={2: {str(shared): str(local)}, 3: {str(parent): str(other)}},
                  env={1: {"NCCL_IB_DISABLE": "1"}}, timeout=30)
        doc = run.finish()
    fails = failing(doc)
    assert ("node-1", "consistency:mtu", "mtu-mismatch") in fails
    mtu = cluster_results(doc, "consistency:mtu")[0]
    assert mtu["summary"] == "node-1: MTU of the job interface 1400, 3 other nodes: 1500"
    env = cluster_results(doc, "consistency:env:NCCL_IB_DISABLE")[0]
    assert env["node"] == "node-1" and env["status"] == "warn" and env["runbook"] == "cluster-env-mismatch"
    assert ("node-2", f"path:{shared}:shared", "cluster-fs-not-shared") in fails
    assert ("node-3", f"path:{parent / 'tokens'}", "cluster-path-missing-on-node") in fails
    nodes_failing = {n for n, _, _ in fails}
    assert "node-0" not in nodes_failing
    assert not list(shared.glob(".llmdiag-share-*")) and not list(local.glob(".llmdiag-share-*"))
    _runbooks_exist(doc)


def test_process_group_service_runs_group_probes_across_nodes(tmp_path):
    """ctx.services["process_group"]: the nccl probe's collective spans the three hosts."""
    cfg = write_config(tmp_path, '\n[nccl_bench]\nprobe_max_bytes = "64K"\nprobe_iters = 2\nauto_pairwise = false\n')
    with Testbed(3) as tb:
        run = Run(tb, 3, cfg, "--probe", "nccl", timeout=30)
        doc = run.finish()
    assert doc["status"] == "pass", failing(doc)
    nccl = [r for r in doc["results"] if r["probe"] == "nccl" and r["check"] == "all_reduce/correctness"]
    assert sorted(r["node"] for r in nccl) == ["node-0", "node-1", "node-2"]
    assert all("cluster process group: gloo, 3 rank(s)" in r["summary"] for r in nccl)
    # CPU hosts: the group is gloo, and the report says why (not what an NCCL job would measure)
    pg = [r for r in doc["results"] if r["probe"] == "cluster" and r["check"] == "process-group"]
    assert len(pg) == 3 and all("measure gloo" in r["summary"] and "no node has a GPU" in r["summary"] for r in pg)


def test_a_host_name_mapped_to_the_loopback_fails_on_its_node_only(tmp_path):
    """Debian's ``127.0.1.1 HOST`` line on one node: without GLOO_SOCKET_IFNAME gloo binds and advertises the
    loopback there, and the other nodes dial themselves. node-1's /etc/hosts maps its name to 127.0.1.1; node-2's
    maps its name to its own eth0 address (no GLOO_SOCKET_IFNAME either: fine); node-0 sets GLOO_SOCKET_IFNAME."""
    cfg = write_config(tmp_path)
    before = set(Path(tempfile.gettempdir()).glob("llmdiag-*"))
    with Testbed(3) as tb:
        hosts = {}
        for k, addr in ((1, "127.0.1.1"), (2, tb.addr(2))):
            f = tmp_path / f"hosts{k}"
            f.write_text(f"127.0.0.1 localhost\n{addr} {tb.hostname(k)}\n")
            hosts[k] = {"/etc/hosts": str(f)}
        run = Run(tb, 3, cfg, binds=hosts, env={1: {"GLOO_SOCKET_IFNAME": ""}, 2: {"GLOO_SOCKET_IFNAME": ""}},
                  probes=("network",), timeout=30)
        doc = run.finish()
    checks = {r["node"]: r for r in doc["results"] if r["probe"] == "network" and r["check"] == "hostname"}
    assert set(checks) == {"node-0", "node-1", "node-2"}, checks
    assert checks["node-1"]["status"] == "fail" and "127.0.1.1" in checks["node-1"]["summary"], checks
    assert checks["node-1"]["runbook"] == "hostname-loopback"
    assert checks["node-2"]["status"] == "pass" and tb.addr(2) in checks["node-2"]["summary"], checks["node-2"]
    assert checks["node-0"]["status"] == "pass" and "GLOO_SOCKET_IFNAME=eth0" in checks["node-0"]["summary"]
    assert {n for n, _, _ in failing(doc)} == {"node-1"}, failing(doc)
    _runbooks_exist(doc)
    # the agents leave without the interpreter's teardown (cluster_mode._leave): their private temp dirs go too
    assert set(Path(tempfile.gettempdir()).glob("llmdiag-*")) <= before
