"""The preflight HTML at 4, 64 and 1,000 nodes: ``report merge`` of node reports made from a
real preflight node report (the same results under other node names, a failure injected on
every 97th node through the real ``Result`` type), then the real merge command."""

from __future__ import annotations

import dataclasses
import re
import subprocess

import pytest

from llmdiag.cluster import gather
from llmdiag.reports import html as html_report
from llmdiag.result import ClusterReport, Status
from tests.conftest import cli_env, llmdiag_argv
from tests.reports import realdocs


def failing(i: int) -> bool:
    return i % 97 == 5


def merged_html(tmp_path, n: int) -> str:
    node = ClusterReport.from_dict(realdocs.doc("preflight")).nodes[0]
    for i in range(n):
        name = f"gpu-node-{i:04d}"
        rs = [r.replace(node=name) for r in node.results]
        if failing(i):
            rs[0] = rs[0].replace(status=Status.FAIL, summary=f"injected failure on {name}",
                                  remediation="replace the node", runbook="cluster-node-missing")
        gather.write_node_file(tmp_path, dataclasses.replace(node, node=name, node_rank=i, results=tuple(rs)).to_dict())
    proc = subprocess.run(llmdiag_argv("report", "merge", str(tmp_path), "--nnodes", str(n + 1), "-f", "html"),
                          capture_output=True, text=True, env=cli_env(), timeout=300)
    assert proc.returncode == 1, proc.stderr  # a failure and a missing node
    return proc.stdout


@pytest.mark.parametrize("n", [4, 64, 1000])
def test_matrix_stays_readable(tmp_path, n):
    page = merged_html(tmp_path, n)
    matrix = page.split('id="matrix"')[1].split("</table>")[0]
    rows = re.findall(r"<th class='node'>.*?</th>", matrix)
    bad = [f"gpu-node-{i:04d}" for i in range(n) if failing(i)]
    for name in bad + [f"node rank {n}"]:
        assert name in matrix  # every failing and missing node is in the matrix
    if n <= html_report.MATRIX_ALL_UP_TO:
        assert len(rows) == n + 1
    else:
        assert len(rows) <= html_report.MATRIX_ROWS
        # failures first: the rows of failing and missing nodes come before the others
        first = "".join(rows[:len(bad) + 1])
        assert all(name in first for name in bad)
    assert len(page) < 400_000, f"{len(page)} bytes at {n} nodes"
    # the missing node, and the injected check grouped across all its nodes
    assert page.count("finding fail") == 1 + bool(bad)
