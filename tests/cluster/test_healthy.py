"""A healthy 4-host cluster with the FULL default probe set must pass, under every launcher.

Nothing here is narrowed with ``--probe``: every built-in probe runs on every host (ports,
launcher, filesystem with its throughput test on a shared path, the group nccl probe over
the cluster process group). The config has a ``[cluster]`` section that does not set
``master_port`` while the job uses another port (the README's own example). Wall times are
printed (``-s`` shows them).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.cluster import testbed
from tests.cluster.helpers import failing
from tests.cluster.testbed import Testbed
from tests.conftest import cli_env

OK, WHY = testbed.available()
pytestmark = [pytest.mark.cluster, pytest.mark.skipif(not OK, reason=WHY or "test bed unavailable")]

N = 4
PORT = 29611
TIMEOUT = 150


def _config(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "data.bin").write_bytes(b"x" * 4096)
    cfg = tmp_path / "llmdiag.toml"
    cfg.write_text(f"""
[network]
port_range = "{PORT}-{PORT + 3}"
connect_timeout_s = 1.0

[cluster]
timeout_s = {TIMEOUT}
share_wait_s = 3.0

[thresholds]
# this machine's hard open-files limit is 20000 and cannot be raised here
nofile_min = 16384

[[filesystem.paths]]
path = "{shared}"
shared = true
""")
    return cfg, shared


def _run(tb, argvs, envs, limit, binds=None):
    t0 = time.monotonic()
    procs = {k: tb.popen(k, argvs[k], env=envs[k], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         binds=binds)
             for k in argvs}
    out = {}
    for k, p in procs.items():
        try:
            o, e = p.communicate(timeout=max(1, limit - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            tb.kill(p)
            o, e = p.communicate()
        out[k] = (p.returncode, o, e)
    return out, time.monotonic() - t0


def _machine_fact(r):
    """The one true warning of this test machine: 2 CPU cores for 2 ranks per node (torchrun case)."""
    return r["probe"] == "system" and r["check"] == "cpu" and r["status"] == "warn" and "2 usable CPU cores" in r["summary"]


def _check_all_pass(doc, out, shared, wall, label):
    print(f"\n{label}: {N} hosts, full default probe set, wall {wall:.1f} s")
    assert doc["kind"] == "cluster", doc
    assert [nd["node"] for nd in doc["nodes"]] == [f"node-{k}" for k in range(N)], (
        doc["sections"].get("missing_nodes"), {k: e[-1500:] for k, (_, _, e) in out.items()})
    bad = [(r["node"], r["probe"], r["check"], r["status"], r["summary"]) for r in doc["results"]
           if r["status"] not in ("pass", "skip") and not _machine_fact(r)]
    assert not bad, bad
    assert doc["status"] in ("pass", "warn") and not failing(doc), failing(doc)
    assert all(rc == 0 for rc, _, _ in out.values()), {k: (rc, e[-1500:]) for k, (rc, _, e) in out.items() if rc}
    probes = {r["probe"] for r in doc["results"] if r["status"] == "pass"}
    assert {"software", "launcher", "system", "network", "ports", "filesystem", "nccl", "cluster"} <= probes, probes
    ports = [r for r in doc["results"] if r["probe"] == "ports" and r["check"] == "master_port"]
    assert len(ports) == N
    # the shared path's own temp files (throughput test, token) never make nodes differ, and are gone
    assert not [p for p in shared.iterdir() if p.name.startswith(".llmdiag-")]
    assert wall < TIMEOUT + 10


def test_healthy_cluster_plain_variables_full_default_probes(tmp_path):
    cfg, shared = _config(tmp_path)
    with Testbed(N) as tb:
        argvs = {k: [sys.executable, "-m", "llmdiag", "preflight", "-c", str(cfg), "-f", "json"] for k in range(N)}
        envs = {k: cli_env(GLOO_SOCKET_IFNAME="eth0", NNODES=str(N), NODE_RANK=str(k), MASTER_ADDR=tb.addr(0),
                           MASTER_PORT=str(PORT)) for k in range(N)}
        out, wall = _run(tb, argvs, envs, TIMEOUT + 30)
    rc, o, e = out[0]
    try:
        doc = json.loads(o)
    except json.JSONDecodeError:
        raise AssertionError(f"rank 0 printed no JSON (rc={rc}): {e[-3000:]}") from None
    _check_all_pass(doc, out, shared, wall, "plain variables")


def test_healthy_cluster_torchrun_full_default_probes(tmp_path):
    cfg, shared = _config(tmp_path)
    with Testbed(N) as tb:
        argvs = {k: [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(N), "--node-rank", str(k),
                     "--nproc-per-node", "2", "--master-addr", tb.addr(0), "--master-port", str(PORT),
                     "-m", "llmdiag", "preflight", "-c", str(cfg), "-f", "json",
                     "-o", str(tmp_path / f"node{k}.json")] for k in range(N)}
        envs = {k: cli_env(GLOO_SOCKET_IFNAME="eth0") for k in range(N)}
        out, wall = _run(tb, argvs, envs, TIMEOUT + 40)
    for k, (rc, _, err) in out.items():
        # one agent per node: local rank 1 does no node checks (no second report, no second throughput test)
        assert err.count("only local rank 0 runs the node") == 1, f"host {k}: {err[-2000:]}"
    doc = json.loads((tmp_path / "node0.json").read_text())
    _check_all_pass(doc, out, shared, wall, "torchrun --nproc-per-node 2")


def _launcher_env(kind, tb, k):
    """What each launcher puts into the environment of the process on host ``k`` (one per node)."""
    addr = tb.addr(0)
    if kind == "kubernetes":  # Kubeflow PyTorchJob pod, python started directly (no torchrun)
        return {"PET_NNODES": str(N), "PET_NODE_RANK": str(k), "PET_NPROC_PER_NODE": "1", "PET_MASTER_ADDR": addr,
                "PET_MASTER_PORT": str(PORT), "MASTER_ADDR": addr, "MASTER_PORT": str(PORT), "RANK": str(k),
                "WORLD_SIZE": str(N), "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    if kind == "slurm-step":  # srun step on 4 nodes of a larger allocation; the step's first node is rank 0
        return {"SLURM_JOB_ID": "42", "SLURM_PROCID": str(k), "SLURM_LOCALID": "0", "SLURM_NODEID": str(k),
                "SLURM_NTASKS": "8", "SLURM_NNODES": "8", "SLURM_JOB_NODELIST": "login9,node-[0-6]",
                "SLURM_TASKS_PER_NODE": "1(x8)", "SLURM_STEP_NUM_TASKS": str(N), "SLURM_STEP_NUM_NODES": str(N),
                "SLURM_STEP_NODELIST": f"node-[0-{N - 1}]", "SLURM_STEP_TASKS_PER_NODE": f"1(x{N})",
                "MASTER_PORT": str(PORT)}
    if kind == "openmpi":
        return {"OMPI_COMM_WORLD_RANK": str(k), "OMPI_COMM_WORLD_SIZE": str(N), "OMPI_COMM_WORLD_LOCAL_RANK": "0",
                "OMPI_COMM_WORLD_LOCAL_SIZE": "1", "OMPI_COMM_WORLD_NODE_RANK": "0", "MASTER_ADDR": addr,
                "MASTER_PORT": str(PORT)}
    if kind == "mpich":
        return {"PMI_RANK": str(k), "PMI_SIZE": str(N), "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "1",
                "MASTER_ADDR": addr, "MASTER_PORT": str(PORT)}
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["kubernetes", "slurm-step", "openmpi", "mpich"])
def test_healthy_cluster_under_scheduler_variables_full_default_probes(tmp_path, kind):
    cfg, shared = _config(tmp_path)
    with Testbed(N) as tb:
        # the hosts resolve each other by name (the Slurm node list names hosts, not addresses)
        hosts = tmp_path / "hosts"
        hosts.write_text("127.0.0.1 localhost\n" + "".join(f"{tb.addr(k)} node-{k}\n" for k in range(N)))
        argvs = {k: [sys.executable, "-m", "llmdiag", "preflight", "-c", str(cfg), "-f", "json"] for k in range(N)}
        envs = {k: cli_env(GLOO_SOCKET_IFNAME="eth0", **_launcher_env(kind, tb, k)) for k in range(N)}
        for e in envs.values():
            if kind != "kubernetes":
                e.pop("KUBERNETES_SERVICE_HOST", None)
            if "MASTER_ADDR" not in _launcher_env(kind, tb, 0):
                e.pop("MASTER_ADDR", None)
        out, wall = _run(tb, argvs, envs, TIMEOUT + 30, binds={"/etc/hosts": str(hosts)})
    rc, o, e = out[0]
    try:
        doc = json.loads(o)
    except json.JSONDecodeError:
        raise AssertionError(f"rank 0 printed no JSON (rc={rc}): {e[-3000:]}") from None
    assert {nd["meta"]["world"]["launcher"] for nd in doc["nodes"]} == {kind.split("-")[0]}
    if kind == "slurm-step":
        assert doc["nodes"][0]["meta"]["world"]["master_addr"] == "node-0"  # the step's first node, not login9
    _check_all_pass(doc, out, shared, wall, kind)
