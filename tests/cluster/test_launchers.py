"""Cluster preflight started the ways users launch training: torchrun, and plain variables.

torchrun runs two workers per host; only local rank 0 of each host is the node's agent, and
the agents connect to the store torchrun's elastic agent already hosts on MASTER_PORT. With
plain ``NNODES`` / ``NODE_RANK`` / ``MASTER_ADDR`` / ``MASTER_PORT`` nothing else is needed.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.cluster import testbed
from tests.cluster.helpers import PORT, failing, write_config
from tests.cluster.testbed import Testbed
from tests.conftest import cli_env

OK, WHY = testbed.available()
pytestmark = [pytest.mark.cluster, pytest.mark.skipif(not OK, reason=WHY or "test bed unavailable")]


def _finish(procs, limit):
    out = {}
    for k, p in procs.items():
        o, e = p.communicate(timeout=limit)
        out[k] = (p.returncode, o, e)
    return out


def test_torchrun_two_workers_per_node_one_agent_each(tmp_path):
    cfg = write_config(tmp_path)
    n = 3
    with Testbed(n) as tb:
        procs = {}
        for k in range(n):
            argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(n), "--node-rank", str(k),
                    "--nproc-per-node", "2", "--master-addr", tb.addr(0), "--master-port", str(PORT),
                    "-m", "llmdiag", "preflight", "-c", str(cfg), "--probe", "launcher", "--timeout", "30",
                    "-f", "json", "-o", str(tmp_path / f"node{k}.json")]
            procs[k] = tb.popen(k, argv, env=cli_env(GLOO_SOCKET_IFNAME="eth0"), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        out = _finish(procs, 90)
    for k, (rc, _, err) in out.items():
        assert rc == 0, f"host {k}: {err[-2000:]}"
        assert "only local rank 0 runs the node's agent" in err
    doc = json.loads((tmp_path / "node0.json").read_text())
    assert doc["kind"] == "cluster" and doc["status"] == "pass", failing(doc)
    assert [nd["node"] for nd in doc["nodes"]] == ["node-0", "node-1", "node-2"]
    assert {nd["meta"]["world"]["launcher"] for nd in doc["nodes"]} == {"torchrun"}
    assert doc["sections"]["port_matrix"]["tested"] > 0 and not doc["sections"]["port_matrix"]["problems"]


def test_plain_environment_variables(tmp_path):
    cfg = write_config(tmp_path)
    n = 3
    with Testbed(n) as tb:
        procs = {}
        for k in range(n):
            env = cli_env(GLOO_SOCKET_IFNAME="eth0", NNODES=str(n), NODE_RANK=str(k), MASTER_ADDR=tb.addr(0),
                          MASTER_PORT=str(PORT))
            argv = [sys.executable, "-m", "llmdiag", "preflight", "-c", str(cfg), "--probe", "system", "--timeout", "20",
                    "-f", "json"]
            procs[k] = tb.popen(k, argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out = _finish(procs, 60)
    rc, o, e = out[0]
    doc = json.loads(o)
    assert doc["kind"] == "cluster" and [nd["node"] for nd in doc["nodes"]] == ["node-0", "node-1", "node-2"], e
    assert not [f for f in failing(doc) if f[1].startswith(("rendezvous", "node-", "port-matrix"))], failing(doc)
    # the other nodes print their own node report
    assert json.loads(out[1][1])["nodes"][0]["node"] == "node-1"
