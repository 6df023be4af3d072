"""The node probes through the real CLI: `python -m llmdiag preflight` as a subprocess."""

from __future__ import annotations

import json
import subprocess

from tests.conftest import cli_env, llmdiag_argv


def preflight(*args: str, **env: str):
    return subprocess.run(llmdiag_argv("preflight", "-f", "json", *args), capture_output=True, text=True,
                          timeout=60, env=cli_env(**env))


def test_broken_launch_variables_fail_the_run():
    out = preflight("--probe", "launcher", MASTER_ADDR="127.0.0.1", NNODES="2", NODE_RANK="3",
                    NPROC_PER_NODE="4", WORLD_SIZE="8")
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    (r,) = [x for x in doc["results"] if x["check"] == "variables"]
    assert r["status"] == "fail" and "NODE_RANK=3 must be < NNODES=2" in r["summary"]


def test_all_node_probes_report_on_this_machine():
    out = preflight("--probe", "software", "--probe", "system", "--probe", "gpu", "--probe", "launcher")
    assert out.returncode in (0, 1), out.stderr
    doc = json.loads(out.stdout)
    probes = {r["probe"] for r in doc["results"]}
    assert probes == {"software", "system", "gpu", "launcher"}
    assert not [r for r in doc["results"] if r["check"] == "probe" and r["status"] == "fail"]
    for r in doc["results"]:
        assert r["status"] == "pass" or r["runbook"], r
