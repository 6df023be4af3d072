"""Rank 0's terminal report of a cluster is read in ten seconds: the failure, where, the fix, a line per node."""

from __future__ import annotations

from llmdiag.reports.base import RenderOptions, render
from llmdiag.result import ClusterReport, Evidence, NodeReport, Result, Status


def _node(k: int, fail: bool) -> NodeReport:
    res = [Result(probe="software", check=f"c{i}", node=f"node-{k}", status=Status.PASS, summary="fine")
           for i in range(40)]
    if fail:
        res.append(Result(probe="system", check="shm", node=f"node-{k}", status=Status.FAIL,
                          summary="/dev/shm is 64 MiB", evidence=(Evidence("/dev/shm size", 64, 1024, "MiB"),),
                          remediation="Start the container with --shm-size=16g.", runbook="shm-too-small"))
    return NodeReport(node=f"node-{k}", node_rank=k, results=tuple(res), started_at=1.0, finished_at=2.0)


def test_eight_nodes_one_failure_is_a_short_summary():
    doc = ClusterReport(command="preflight", nodes=tuple(_node(k, k in (3, 6)) for k in range(8))).to_dict()
    text = render(doc, "terminal", RenderOptions(width=120, color=False))
    lines = text.splitlines()
    assert len(lines) < 30, text  # not 8 x 40 rows
    # the failure once, on both nodes, with its fix
    assert sum("system/shm: /dev/shm is 64 MiB" in ln for ln in lines) == 1
    row = next(ln for ln in lines if "system/shm: /dev/shm" in ln)
    assert "node-3, node-6" in row and "FAIL" in row
    assert any("fix: Start the container with --shm-size=16g." in ln for ln in lines)
    # one line per node
    for k in range(8):
        assert sum(ln.split()[1:2] == [f"node-{k}"] for ln in lines if ln.strip()) == 1, k
    assert any(ln.startswith("FAIL") and "node-3" in ln and "40 pass, 1 fail: system/shm" in ln for ln in lines)


def test_one_node_keeps_the_full_table():
    doc = ClusterReport(command="preflight", nodes=(_node(0, True),)).to_dict()
    text = render(doc, "terminal", RenderOptions(width=120, color=False))
    assert "software/c39" in text
