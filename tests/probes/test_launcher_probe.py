"""Launcher probe on real environment dicts of broken and correct launch scripts."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from llmdiag.result import Status
from llmdiag.probes.launcher import LauncherProbe
from tests.conftest import cli_env
from tests.probes.nodeutil import assert_actionable, by_check, context

GOOD = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "NNODES": "2", "NODE_RANK": "1",
        "NPROC_PER_NODE": "4", "WORLD_SIZE": "8"}


def run(env, config=None):
    results = list(LauncherProbe().run(context(env=env, config=config)))
    assert_actionable(results)
    return by_check(results)


def test_no_launcher_is_a_single_node_run():
    r = run({"PATH": "/usr/bin"})
    assert list(r) == ["variables"] and r["variables"].status is Status.PASS
    assert "not launched as part of a job" in r["variables"].summary


def test_coherent_variables_pass():
    r = run(GOOD)
    assert {c: x.status.value for c, x in r.items()} == {"variables": "pass", "master-addr": "pass", "config": "pass"}
    assert r["variables"].data["world_size"] == 8


def test_broken_launch_script_every_problem_named():
    env = dict(GOOD, NODE_RANK="2", MASTER_PORT="70000", WORLD_SIZE="6")
    r = run(env)["variables"]
    assert r.status is Status.FAIL and r.runbook == "launcher-variables"
    problems = [e.observed for e in r.evidence]
    assert "NODE_RANK=2 must be < NNODES=2" in problems
    assert "MASTER_PORT=70000 is out of range (accepted: 1..65535)" in problems
    assert "WORLD_SIZE=6 != NNODES(2) * NPROC_PER_NODE(4) = 8" in problems


def test_torchrun_and_slurm_variables():
    torchrun = {"TORCHELASTIC_RUN_ID": "j1", "RANK": "9", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
                "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2", "MASTER_ADDR": "localhost", "MASTER_PORT": "29500"}
    r = run(torchrun)["variables"]
    assert r.status is Status.FAIL and "RANK=9 must be < WORLD_SIZE=8" in r.summary
    slurm = {"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_NNODES": "2", "SLURM_NODEID": "1", "SLURM_LOCALID": "1",
             "SLURM_NTASKS_PER_NODE": "2", "MASTER_ADDR": "localhost", "MASTER_PORT": "29500"}
    assert run(slurm)["variables"].status is Status.PASS


def test_config_disagreement():
    r = run(GOOD, config={"cluster": {"nodes": 4, "nproc_per_node": 8, "master_port": 29500}})["config"]
    assert r.status is Status.FAIL
    assert {(e.name, e.observed, e.expected) for e in r.evidence} == {
        ("[cluster] nodes vs NNODES", 2, 4), ("[cluster] nproc_per_node vs NPROC_PER_NODE", 4, 8)}


def test_node_zero_must_be_the_master():
    # Resolving an address literal sends no packet; a loopback master is always accepted.
    r = run(dict(GOOD, NODE_RANK="0", MASTER_ADDR="127.0.0.1"))
    assert r["master-addr"].status is Status.PASS
    import psutil

    addrs = {a.address for v in psutil.net_if_addrs().values() for a in v}
    other = next(a for a in ("192.0.2.10", "198.51.100.7") if a not in addrs)  # documentation ranges, no traffic
    r = run(dict(GOOD, NODE_RANK="0", MASTER_ADDR=other))
    assert r["master-addr"].status is Status.WARN and "not one of its addresses" in r["master-addr"].summary


CHILD = """
import json, sys
from llmdiag.context import Context
from llmdiag.probes.launcher import LauncherProbe
env = json.loads(sys.argv[1])
print(json.dumps([r.to_dict() for r in LauncherProbe().run(Context.create(env=env))]))
"""


@pytest.mark.skipif(shutil.which("unshare") is None, reason="unshare (util-linux) is not installed")
def test_unresolvable_master_addr_in_an_isolated_network_namespace():
    """DNS lookups fail fast in a fresh network namespace: no packet leaves the machine."""
    env = dict(GOOD, MASTER_ADDR="node-17.cluster.example")
    out = subprocess.run(["unshare", "-n", sys.executable, "-c", CHILD, json.dumps(env)], capture_output=True,
                         text=True, timeout=30, env=cli_env())
    if out.returncode != 0 and "unshare" in out.stderr:
        pytest.skip(f"cannot create a network namespace: {out.stderr.strip()}")
    r = {x["check"]: x for x in json.loads(out.stdout)}["master-addr"]
    assert r["status"] == "fail" and "does not resolve" in r["summary"]
    assert "getent hosts node-17.cluster.example" in r["remediation"]
