"""The group probes run one rank per GPU, as the job will (``[cluster] nproc_per_node``, else the
GPU count for NCCL): on CPU hosts with gloo and nproc_per_node = 2, two namespace hosts make a
group of four ranks, two on each host, and the collective benchmark's rows are measured by all
four."""

from __future__ import annotations

import psutil
import pytest

from tests.cluster import testbed
from tests.cluster.helpers import Run, cluster_results, failing, write_config
from tests.cluster.testbed import Testbed

OK, WHY = testbed.available()
pytestmark = [pytest.mark.cluster, pytest.mark.skipif(not OK, reason=WHY or "test bed unavailable")]


def test_two_ranks_per_node_on_two_hosts(tmp_path):
    cfg = write_config(tmp_path, '\n[nccl_bench]\nprobe_max_bytes = "256K"\nprobe_iters = 5\nauto_pairwise = false\n')
    cfg.write_text(cfg.read_text().replace("[cluster]\n", "[cluster]\nnproc_per_node = 2\n"))
    with Testbed(2) as tb:
        run = Run(tb, 2, cfg, timeout=40, probes=("nccl",))
        doc = run.finish()
        # the agents ended their extra ranks: none is left behind
        left = [p.info["cmdline"] for p in psutil.process_iter(["cmdline"])
                if "llmdiag.cluster.groupworker" in " ".join(p.info["cmdline"] or ()) and tb.addr(0) in
                " ".join(p.info["cmdline"] or ())]
    assert not left, left
    assert not failing(doc), failing(doc)
    groups = {r["node"]: r["data"] for r in cluster_results(doc, "process-group")}
    assert {n: (g["backend"], g["ranks_per_node"], g["world_size"], g["first_rank"]) for n, g in groups.items()} == \
        {"node-0": ("gloo", 2, 4, 0), "node-1": ("gloo", 2, 4, 2)}, groups
    assert "started 1 more local rank(s) for the group (ranks 2..3 of 4)" in run.out[1][2], run.out[1][2][-2000:]
    busbw = {r["node"]: r for r in doc["results"] if r["probe"] == "nccl" and r["check"] == "busbw"}
    assert set(busbw) == {"node-0", "node-1"}, doc["results"]
    for r in busbw.values():
        d = r["data"]
        assert d["world_size"] == 4 and "4 rank(s) on 2 node(s)" in r["summary"], r
        # ranks numbered node by node, as torchrun numbers them: two on each host
        assert d["placement"] == ["node-0", "node-0", "node-1", "node-1"], d["placement"]
        sizes = [row["size"] for row in d["rows"] if row["collective"] == "all_reduce"]
        assert sizes == sorted(sizes) and len(sizes) >= 3 and sizes[-1] == 256 * 1024, d["rows"]
        assert all(b is not None and b > 0 for row in d["rows"] for b in row["busbw"]), d["rows"]
