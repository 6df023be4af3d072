"""One budget for the whole cluster run: a group probe that overruns is cut, every node's findings kept.

A host whose egress is shaped to 2 Mbit/s makes the nccl probe's collectives far slower than
``cluster.timeout_s`` allows. The run must still end within the limit (plus a few seconds),
with every node's report at rank 0 (no node blamed as hung) and the nccl probe reported as
timed out, not as a node fault.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.cluster import testbed
from tests.cluster.helpers import PORT, Run, failing
from tests.cluster.testbed import Testbed

OK, WHY = testbed.available(tc=True)
pytestmark = [pytest.mark.cluster, pytest.mark.skipif(not OK, reason=WHY or "test bed unavailable")]

LIMIT = 30


class BudgetRun(Run):
    """Agents with the default probe deadlines (no --timeout): only cluster.timeout_s bounds them."""

    def __init__(self, tb, n, config, probes):
        import time

        from tests.conftest import cli_env

        self.tb, self.timeout = tb, LIMIT
        self.start = time.monotonic()
        self.procs = {}
        for k in range(n):
            argv = [sys.executable, "-m", "llmdiag", "preflight", "-c", str(config), "--nnodes", str(n),
                    "--node-rank", str(k), "--master-addr", tb.addr(0), "--master-port", str(PORT), "-f", "json"]
            for p in probes:
                argv += ["--probe", p]
            self.procs[k] = tb.popen(k, argv, env=cli_env(GLOO_SOCKET_IFNAME="eth0"), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.out = {}
        self.wall_s = None


def test_overrunning_group_probe_is_cut_and_every_node_report_arrives(tmp_path):
    cfg = tmp_path / "llmdiag.toml"
    cfg.write_text(f"""
[network]
port_range = "29500-29503"
connect_timeout_s = 1.0

[cluster]
timeout_s = {LIMIT}
share_wait_s = 2.0

[nccl_bench]
probe_max_bytes = "64M"
probe_iters = 20
auto_pairwise = false
""")
    with Testbed(4) as tb:
        tb.slow_link(2, "2mbit")
        run = BudgetRun(tb, 4, cfg, ["software", "nccl"])
        doc = run.finish(limit=LIMIT + 30)
    print(f"\nnccl overrun: wall {run.wall_s:.1f} s against cluster.timeout_s = {LIMIT}")
    assert run.wall_s < LIMIT + 6, run.wall_s
    assert [n["node"] for n in doc["nodes"]] == ["node-0", "node-1", "node-2", "node-3"], failing(doc)
    assert not doc["missing_nodes"] and not [f for f in failing(doc) if f[1].startswith("node-")]
    cut = [r for r in doc["results"] if r["probe"] == "nccl" and r["check"] == "probe"]
    assert cut and all("timed out after" in r["summary"] and r["runbook"] == "probe-timeout" for r in cut), cut
    # the other probes' findings of every node are kept
    soft = {r["node"] for r in doc["results"] if r["probe"] == "software" and r["check"] == "torch"}
    assert soft == {"node-0", "node-1", "node-2", "node-3"}
    for k in (1, 2, 3):
        assert run.out[k][0] is not None and "node report sent to rank 0" in run.out[k][2]
