"""Faults during the run, on namespace hosts: the healthy nodes are never blamed.

- One node dies after joining while another never joins: the wait for the missing node uses most
  of the budget, the dead node is known dead at once (its connection to rank 0 closed) and is
  waited for by no stage, so the shared paths and the port matrix still run among the live
  nodes (before: a port matrix against peers that had closed their listeners, "refused" on every
  port of a healthy node; then "not run" for both while each stage waited for its heartbeat).
- A node SIGKILLed during the group probe: the healthy nodes say which node left the group
  ("not completed: node-2 left the group mid-collective"), not "probe raised RuntimeError ...
  report it"; the dead node is named died by rank 0.
- A host cut off mid-run (its link down, or a firewall that drops all it receives: power or
  network lost, so no FIN or RST ever comes):
  rank 0's presence connection to it runs TCP keepalive sized from the budget, so it is named
  gone within seconds (before: only when its heartbeat lapsed, 10 s), and the stages run among
  the live nodes.
"""

from __future__ import annotations

import time

import pytest

from tests.cluster import testbed
from tests.cluster.helpers import Run, cluster_results, failing, write_config
from tests.cluster.testbed import Testbed

OK, WHY = testbed.available()
pytestmark = [pytest.mark.cluster, pytest.mark.skipif(not OK, reason=WHY or "test bed unavailable")]


def test_dead_and_missing_node_blame_no_healthy_node(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    cfg = write_config(tmp_path, '\n[[filesystem.paths]]\npath = "%s"\nshared = true\n' % shared)
    with Testbed(4) as tb:
        run = Run(tb, 4, cfg, ranks=[0, 1, 2], timeout=16)
        assert run.wait_stderr(2, "joined the rendezvous", 15)
        tb.kill(run.procs[2])
        doc = run.finish()
    assert run.wall_s < 16 + 6, run.wall_s
    states = {m["node"]: m["state"] for m in doc["sections"]["missing_nodes"]}
    # node 2's process died: its connection to rank 0 closed at once, so it is "died" (not "hung"
    # while its heartbeat had not lapsed yet), and no stage waits for it
    assert states == {"node rank 2": "died", "node rank 3": "missing"}, states
    healthy = {"node-0", "node-1"}
    assert not [f for f in failing(doc) if f[0] in healthy], failing(doc)
    # the missing node's wait used most of the budget; the stages still ran among the live nodes
    not_run = [(r["node"], r["check"], r["summary"]) for r in cluster_results(doc) if r["status"] == "skip"
               and r["check"] in ("port-matrix", "shared-paths")]
    assert not not_run, not_run
    matrix = doc["sections"]["port_matrix"]
    assert matrix.get("tested", 0) > 0 and not matrix["problems"], matrix
    assert [r for r in cluster_results(doc, "port-matrix") if r["status"] == "pass"], cluster_results(doc)
    seen = doc["sections"]["shared_fs"][str(shared)]["nodes"]
    assert {n for n, f in seen.items() if f.get("token_seen")} == healthy, seen
    assert not list(shared.glob(".llmdiag-share-*"))


def test_node_killed_in_the_group_probe_is_the_peer_that_left(tmp_path):
    cfg = write_config(tmp_path, '\n[nccl_bench]\nprobe_max_bytes = "16M"\nprobe_iters = 30\nauto_pairwise = false\n')
    with Testbed(3) as tb:
        run = Run(tb, 3, cfg, timeout=30, probes=("nccl",))
        assert run.wait_stderr(2, "running the group probe nccl", 25)
        tb.kill(run.procs[2])
        doc = run.finish()
    assert run.wall_s < 30 + 6, run.wall_s
    states = {m["node"]: m["state"] for m in doc["sections"]["missing_nodes"]}
    assert list(states) == ["node rank 2"] and states["node rank 2"] in ("died", "hung"), states
    nccl = [r for r in doc["results"] if r["probe"] == "nccl" and r["node"] in ("node-0", "node-1")]
    assert not [r for r in nccl if "probe raised" in r["summary"] or r["status"] == "fail"], nccl
    left = [r for r in nccl if r["check"] == "group"]
    assert sorted(r["node"] for r in left) == ["node-0", "node-1"], nccl
    assert all("node-2 left the group" in r["summary"] and r["status"] == "skip" for r in left), left


@pytest.mark.parametrize("cut", ["link down", "firewall drops everything"])
def test_host_cut_off_mid_run_is_named_within_the_keepalive_window(tmp_path, cut):
    if cut.startswith("firewall") and not testbed.available(iptables=True)[0]:
        pytest.skip(testbed.available(iptables=True)[1])
    cfg = write_config(tmp_path)
    with Testbed(4) as tb:
        # node 3 never starts: rank 0 waits for it most of the budget, so the cut lands mid-run
        run = Run(tb, 4, cfg, ranks=[0, 1, 2], timeout=20)
        assert run.wait_stderr(2, "joined the rendezvous", 15)
        if cut == "link down":
            tb.link_down(2)
        else:
            tb.drop_all(2)
        cut = time.monotonic()
        # the window is 3 s for a 20 s budget; the heartbeat alone would take 10 s and log nothing
        assert run.wait_stderr(0, "host stopped answering", 12), run.__dict__.get("early_stderr")
        named_after = time.monotonic() - cut
        doc = run.finish()
    assert named_after < 8.0, named_after
    # rank 0 ends within the budget; so does the cut-off node, which learnt rank 0 is gone the same
    # way and stopped waiting on a store that could not answer
    assert run.ended[0] < 20 + 6 and run.ended[2] < 20 + 6, run.ended
    own = [r for r in run.doc(2)["results"] if r["check"] == "rank0-lost"]
    assert own and own[0]["status"] == "fail" and "keepalive" in own[0]["summary"], run.doc(2)["results"]
    missing = {m["node"]: m for m in doc["sections"]["missing_nodes"]}
    assert {n: m["state"] for n, m in missing.items()} == {"node rank 2": "died", "node rank 3": "missing"}, missing
    gone = [r["summary"] for r in doc["results"] if r["check"] == "node-died"]
    assert gone and "keepalive" in gone[0], doc["results"]
    assert not [f for f in failing(doc) if f[0] in ("node-0", "node-1")], failing(doc)
    not_run = [(r["node"], r["check"]) for r in cluster_results(doc) if r["status"] == "skip"]
    assert not not_run, not_run


def test_two_nodes_that_cannot_reach_each_other_end_within_the_budget_with_the_group_probe(tmp_path):
    """Host 2 drops everything from host 1 (a partition between two non-root nodes) and the nccl group probe
    runs: gloo's full-mesh connect does not keep to its timeout there (about 40 s against 8 s), so the join is
    given up at the group timeout in a thread of its own; the run ends within the budget, the two ends of the
    link are named by the port matrix, no group probe runs on a group that never formed, and nodes 0 and 3
    are not blamed (before: 49 s and more in a 30 s budget, both nodes "hung" and the matrix lost)."""
    cfg = write_config(tmp_path, '\n[nccl_bench]\nprobe_max_bytes = "64K"\nprobe_iters = 2\n')
    with Testbed(4) as tb:
        tb.drop_from(2, 1)
        run = Run(tb, 4, cfg, timeout=30, probes=("software", "network", "nccl"))
        doc = run.finish(limit=30 + 20)
    assert run.wall_s < 30 + 6, run.wall_s
    blamed = {node for node, _check, _rb in failing(doc)}
    assert blamed and blamed <= {"node-1", "node-2"}, failing(doc)
    ports = {r["node"] for r in cluster_results(doc, "port-matrix") if r["status"] == "fail"}
    assert ports == {"node-1", "node-2"}, cluster_results(doc, "port-matrix")
    assert not doc["missing_nodes"], doc["missing_nodes"]
