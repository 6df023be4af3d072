"""One budget for the whole cluster run: a group probe that overruns is cut, every node's findings kept.

A host whose egress is shaped to 2 Mbit/s makes the nccl probe's collectives far slower than
``cluster.timeout_s`` allows. The run must still end within the limit (plus a few seconds),
with every node's report at rank 0 (no node blamed as hung) and the nccl probe reported as
timed out, not as a node fault.
"""

from __future__ import annotations

import pytest

from tests.cluster import testbed
from tests.cluster.helpers import Run, failing
from tests.cluster.testbed import Testbed

OK, WHY = testbed.available(tc=True)
pytestmark = [pytest.mark.cluster, pytest.mark.skipif(not OK, reason=WHY or "test bed unavailable")]

LIMIT = 30


def _config(tmp_path, timeout_s, nccl):
    cfg = tmp_path / "llmdiag.toml"
    cfg.write_text(f"""
[network]
port_range = "29500-29503"
connect_timeout_s = 1.0

[cluster]
timeout_s = {timeout_s}
share_wait_s = 2.0

[nccl_bench]
{nccl}
""")
    return cfg


def test_overrunning_group_probe_is_cut_and_every_node_report_arrives(tmp_path):
    cfg = _config(tmp_path, LIMIT, 'probe_max_bytes = "64M"\nprobe_iters = 20\nauto_pairwise = false')
    with Testbed(4) as tb:
        tb.slow_link(2, "2mbit")
        # no --timeout: only cluster.timeout_s bounds the probes (the nccl probe's own is 180 s)
        run = Run(tb, 4, cfg, timeout=LIMIT, probes=("software", "nccl"), probe_timeout=False)
        doc = run.finish(limit=LIMIT + 30)
    print(f"\nnccl overrun: wall {run.wall_s:.1f} s against cluster.timeout_s = {LIMIT}")
    assert run.wall_s < LIMIT + 6, run.wall_s
    assert [n["node"] for n in doc["nodes"]] == ["node-0", "node-1", "node-2", "node-3"], failing(doc)
    assert not doc["missing_nodes"] and not [f for f in failing(doc) if f[1].startswith("node-")]
    cut = [r for r in doc["results"] if r["probe"] == "nccl" and r["check"] == "probe"]
    # cut while it ran or, on a starved machine where the local probes took the group's share, not
    # started: either way the budget's finding (probe-timeout), never a node fault
    assert cut and all(("timed out after" in r["summary"] or "was used up" in r["summary"])
                       and r["runbook"] == "probe-timeout" for r in cut), \
        [(r["node"], r["summary"], r["runbook"]) for r in cut]
    # the other probes' findings of every node are kept (on a starved node the torch check may say its
    # import did not finish within the local probes' share: a finding, where the whole probe timed out before)
    soft = {r["node"] for r in doc["results"] if r["probe"] == "software" and r["check"] == "torch"}
    assert soft == {"node-0", "node-1", "node-2", "node-3"}, [(r["node"], r["probe"], r["check"], r["status"], r["summary"][:150]) for r in doc["results"] if r["node"] not in soft]
    for k in (1, 2, 3):
        assert run.out[k][0] is not None and "node report sent to rank 0" in run.out[k][2]


def _slow_node_config(tmp_path, extra=""):
    return _config(tmp_path, 90, f'probe_max_bytes = "1M"\nprobe_iters = 3\npairwise_iters = 3\n{extra}')


def _slow_node_run(tmp_path, extra=""):
    with Testbed(4) as tb:
        tb.slow_link(2, "40mbit")  # far more than 20x below a veth pair's bandwidth
        run = Run(tb, 4, _slow_node_config(tmp_path, extra), timeout=90, probes=("nccl",), probe_timeout=False)
        doc = run.finish()
    print(f"\nslow node: wall {run.wall_s:.1f} s")
    return run, doc


def test_slow_node_found_without_a_threshold_and_only_it_fails(tmp_path):
    run, doc = _slow_node_run(tmp_path)
    fails = failing(doc)
    assert fails and {n for n, _, _ in fails} == {"node-2"}, fails
    node = [r for r in doc["results"] if r["check"] == "pairwise/node"]
    assert [r["node"] for r in node] == ["node-2"] and "median" in node[0]["summary"], node
    assert [nd["node"] for nd in doc["nodes"]] == ["node-0", "node-1", "node-2", "node-3"]
    data = [r["data"] for r in doc["results"] if r["probe"] == "nccl" and r["node"] == "node-0"][0]
    assert data["pairwise"]["slow_nodes"][0]["node"] == "node-2"


def test_slow_node_with_expected_busbw_fails_only_the_slow_node(tmp_path):
    run, doc = _slow_node_run(tmp_path, "expected_busbw_gbps = 1000.0")
    fails = failing(doc)
    pw = [r["data"]["pairwise"] for r in doc["results"] if r["probe"] == "nccl" and r["node"] == "node-0"][0]
    why = ([(lk["a"], lk["b"], lk["phase"], round(lk["gbps"], 4)) for lk in pw["links"]], pw["slow_nodes"],
           pw["slow_links"], pw["threshold_gbps"])
    assert {n for n, _, _ in fails} == {"node-2"}, (fails, why)
    assert ("node-2", "all_reduce/busbw", "nccl-low-bandwidth") in fails
