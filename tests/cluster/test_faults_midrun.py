"""Faults during the run, on namespace hosts: the healthy nodes are never blamed.

- One node dies after joining while another never joins: the waits for them use the budget; a
  stage whose barrier then closes on the deadline is "not run: budget used up" on the healthy
  nodes, never a port matrix against peers that already closed their listeners ("refused" on
  every port, on a healthy node, before).
- A node SIGKILLed during the group probe: the healthy nodes say which node left the group
  ("not completed: node-2 left the group mid-collective"), not "probe raised RuntimeError ...
  report it"; the dead node is named died by rank 0.
"""

from __future__ import annotations

import pytest

from tests.cluster import testbed
from tests.cluster.helpers import Run, cluster_results, failing, write_config
from tests.cluster.testbed import Testbed

OK, WHY = testbed.available()
pytestmark = [pytest.mark.cluster, pytest.mark.skipif(not OK, reason=WHY or "test bed unavailable")]


def test_dead_and_missing_node_blame_no_healthy_node(tmp_path):
    cfg = write_config(tmp_path)
    with Testbed(4) as tb:
        run = Run(tb, 4, cfg, ranks=[0, 1, 2], timeout=16)
        assert run.wait_stderr(2, "joined the rendezvous", 15)
        tb.kill(run.procs[2])
        doc = run.finish()
    assert run.wall_s < 16 + 6, run.wall_s
    states = {m["node"]: m["state"] for m in doc["sections"]["missing_nodes"]}
    # died, or hung when its heartbeat had not lapsed yet as rank 0 gathered: either names it
    assert states["node rank 3"] == "missing" and states["node rank 2"] in ("died", "hung"), states
    healthy = {"node-0", "node-1"}
    assert not [f for f in failing(doc) if f[0] in healthy], failing(doc)
    for r in cluster_results(doc):
        if r["node"] in healthy and r["check"] in ("port-matrix", "shared-paths") and r["status"] != "pass":
            assert r["status"] == "skip" and r["summary"].startswith("not run: budget used up"), r
    print({(r["node"], r["check"]): (r["status"], r["summary"][:100]) for r in cluster_results(doc)
           if r["node"] in healthy})


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
