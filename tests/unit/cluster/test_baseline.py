"""A cluster judged against itself: --save-baseline, then --baseline names what regressed."""

from __future__ import annotations

import json
import subprocess
import sys

from llmdiag.cluster import baseline
from llmdiag.result import Status
from tests.conftest import cli_env


def _preflight(tmp_path, *args, **env):
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    argv = [sys.executable, "-m", "llmdiag", "preflight", "--probe", "software", "--probe", "filesystem",
            "--path", str(data), "-f", "json", *args]
    return subprocess.run(argv, env=cli_env(**env), capture_output=True, text=True, timeout=120)


def test_save_then_compare_names_a_changed_torch_version(tmp_path):
    base = tmp_path / "base"
    p = _preflight(tmp_path, "--save-baseline", str(base))
    assert p.returncode == 0, p.stderr
    saved = json.loads((base / "baseline.json").read_text())
    (node,) = saved["nodes"].values()
    assert node["versions"]["torch"] and node["fs"][str(tmp_path / "data")]["write_mb_s"] > 0
    # same node, same versions: the comparison passes
    same = json.loads(_preflight(tmp_path, "--baseline", str(base)).stdout)
    assert [r["status"] for r in same["results"] if r["probe"] == "baseline"] == ["pass"]
    # a torch that changed since (another torch first on PYTHONPATH)
    fake = tmp_path / "fake"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text("__version__ = '9.9.9'\nclass version:\n    cuda = None\n    hip = None\n")
    p = _preflight(tmp_path, "--baseline", str(base), PYTHONPATH=f"{fake}:{cli_env()['PYTHONPATH']}")
    doc = json.loads(p.stdout)
    changed = [r for r in doc["results"] if r["check"] == "baseline:torch"]
    assert len(changed) == 1 and changed[0]["status"] == "warn", doc["results"]
    assert f"torch {node['versions']['torch']} -> 9.9.9 since the baseline" in changed[0]["summary"]


def test_missing_baseline_is_a_usage_error(tmp_path):
    p = _preflight(tmp_path, "--baseline", str(tmp_path / "nope"))
    assert p.returncode == 2 and "no baseline.json there" in p.stderr and "Traceback" not in p.stderr


def _report(*nodes):
    from llmdiag.result import ClusterReport, NodeReport

    return ClusterReport(command="preflight", nodes=tuple(NodeReport.from_dict(n) for n in nodes))


def _node(name, busbw, link, write):
    res = [
        {"probe": "nccl", "check": "all_reduce/busbw", "status": "pass",
         "data": {"plateau_busbw": busbw, "pairwise": {"links": [{"a": name, "b": "x", "gbps": link}]}}},
        {"probe": "filesystem", "check": "path:/data", "status": "pass", "data": {"write_mb_s": write, "read_mb_s": 500.0}},
        {"probe": "software", "check": "torch", "status": "pass", "data": {"torch": "2.13.0"}}]
    return {"node": name, "results": [dict(r, node=name, summary="measured") for r in res]}


def test_busbw_and_throughput_regressions_name_the_node_and_both_numbers():
    then = baseline.extract(_report(_node("node-0", 10.0, 5.0, 400.0), _node("node-1", 10.0, 5.0, 400.0)))
    now = _report(_node("node-0", 9.5, 4.8, 380.0), _node("node-1", 10.0, 1.0, 40.0), _node("node-9", 1, 1, 1))
    res = {(r.node, r.check): r for r in baseline.compare(then, now)}
    assert ("node-0", "baseline:link_gbps") not in res  # within the noise
    link = res[("node-1", "baseline:link_gbps")]
    assert link.status is Status.FAIL and "1 GB/s, 20% of the baseline's 5 GB/s" in link.summary
    assert res[("node-1", "baseline:fs:/data")].status is Status.WARN
    assert res[("node-9", "baseline:node")].status is Status.SKIP
