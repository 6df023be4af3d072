"""The smoke training run is a group probe: in cluster mode it trains across the namespace hosts.

One run of three hosts, with two faults injected for real in the training loop: rank 2's replica
is corrupted after a step (one weight moves, as a bad GPU would do it) and rank 1 steps slowly.
Each is reported by the node it concerns only; the healthy node passes.
"""

from __future__ import annotations

import pytest

from tests.cluster import testbed
from tests.cluster.helpers import Run, failing, write_config
from tests.cluster.testbed import Testbed

OK, WHY = testbed.available()
pytestmark = [pytest.mark.cluster, pytest.mark.skipif(not OK, reason=WHY or "test bed unavailable")]


def _smoke(doc, check):
    return {r["node"]: r for r in doc["results"] if r["probe"] == "smoke-train" and r["check"] == check}


def test_smoke_run_spans_the_hosts_and_blames_the_diverged_and_the_slow_rank(tmp_path):
    cfg = write_config(tmp_path, '\n[smoke]\nsteps = 6\n'
                                 'inject = ["corrupt@2:rank=2", "slow@2:rank=1:factor=12"]\n')
    with Testbed(3) as tb:
        run = Run(tb, 3, cfg, timeout=60, probes=("smoke-train",))
        doc = run.finish()
    loss = _smoke(doc, "loss")
    assert sorted(loss) == ["node-0", "node-1", "node-2"], failing(doc)
    assert all(r["status"] == "pass" and "cluster process group" in r["summary"] for r in loss.values())
    params, steps = _smoke(doc, "params"), _smoke(doc, "step-time")
    print("\nown step times (ms) by rank:", steps["node-0"]["data"])
    assert params["node-2"]["status"] == "fail" and params["node-2"]["runbook"] == "params-diverged"
    assert "rank 2 (node-2)" in params["node-2"]["summary"]
    assert params["node-0"]["status"] == params["node-1"]["status"] == "pass"
    assert steps["node-1"]["status"] == "warn" and steps["node-1"]["runbook"] == "smoke-slow-rank"
    assert steps["node-0"]["status"] == steps["node-2"]["status"] == "pass"
    assert {n for n, _, _ in failing(doc)} == {"node-2"}
    # the group had three ranks: every node's checksum is in the comparison
    assert len(params["node-0"]["data"]["checksums"]) == 3
    assert run.out[0][0] == 1
