"""Report flows: the run's duration on rank 0's monotonic clock, node reports written outside
cluster mode, ``report merge`` into per-pod directories, missing nodes named by host."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from llmdiag.cluster.gather import read_node_files, write_node_file
from llmdiag import documents
from llmdiag.cluster.merge import build_report
from llmdiag.config import Config
from llmdiag.launcher import parse_launcher
from llmdiag.reports.cluster import summary_line
from llmdiag.result import NodeReport, Result, Status
from llmdiag.cluster.world import resolve_world
from tests.conftest import cli_env


def _doc(rank: int | None, name: str, *, skew_s: float = 0.0, elapsed: float | None = 19.0, hosts=(), nnodes=4,
         finished_after: float = 19.0) -> dict:
    now = time.time() + skew_s  # this node's wall clock
    meta = {"world": {"nnodes": nnodes, "node_rank": rank, "hosts": list(hosts)}}
    if elapsed is not None:
        meta["elapsed_s"] = elapsed
    res = (Result(probe="system", check="shm", node=name, status=Status.PASS, summary="ok"),)
    return NodeReport(node=name, node_rank=rank, results=res, started_at=now, finished_at=now + finished_after,
                      meta=meta).to_dict()


def _merge(path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "llmdiag", "report", "merge", str(path), *args],
                          capture_output=True, text=True, env=cli_env(), timeout=120)


def test_duration_is_rank_0s_monotonic_not_skewed_wall_clocks(tmp_path):
    # node-1's wall clock is 5 min ahead: the wall-clock span of the nodes is about 319 s
    docs = [_doc(0, "node-0", nnodes=3), _doc(1, "node-1", skew_s=300.0, elapsed=18.5, nnodes=3),
            _doc(2, "node-2", elapsed=18.7, nnodes=3)]
    d = build_report(docs, nnodes=3).to_dict()
    assert d["duration_s"] == 19.0 and summary_line(documents.read(d)).endswith(" in 19.0 s")
    # an explicit duration (rank 0 at the end of the run, gather included) wins
    assert build_report(docs, nnodes=3, duration_s=20.25).to_dict()["duration_s"] == 20.25
    # without rank 0's report there is no single clock: no duration rather than a wrong one
    d = build_report(docs[1:], nnodes=3).to_dict()
    assert d["duration_s"] is None and " in " not in summary_line(documents.read(d)).split("missing")[-1]
    for doc in docs:
        write_node_file(tmp_path, doc)
    p = _merge(tmp_path, "--width", "200")
    assert p.returncode == 0, p.stderr
    assert "in 19.0 s" in p.stdout and "319" not in p.stdout


def test_preflight_outside_cluster_mode_writes_the_node_report_by_host(tmp_path):
    out = tmp_path / "reports"
    env = {k: v for k, v in cli_env().items() if not k.startswith(("SLURM_", "OMPI_", "PMI", "PET_", "LWS_"))
           and k not in ("NNODES", "NODE_RANK", "MASTER_ADDR", "RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RUN_ID")}
    p = subprocess.run([sys.executable, "-m", "llmdiag", "preflight", "--probe", "system", "--node-report-dir", str(out),
                        "-f", "json"], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode in (0, 1), p.stderr
    files = list(out.glob("node-*.json"))
    assert len(files) == 1, (p.stderr, list(out.iterdir()) if out.exists() else None)
    doc = json.loads(files[0].read_text())
    assert files[0].name == f"node-{doc['node']}.json" and doc["node_rank"] is None
    assert set(doc["meta"]["facts"]) >= {"probes", "env"} and isinstance(doc["meta"]["elapsed_s"], float)
    assert json.loads(p.stdout)["duration_s"] >= 0
    m = _merge(out, "-f", "json")
    assert m.returncode == (1 if json.loads(p.stdout)["status"] == "fail" else 0), m.stderr
    assert [n["node"] for n in json.loads(m.stdout)["nodes"]] == [doc["node"]]


def test_report_merge_reads_per_pod_directories_and_keeps_the_newest_of_a_rank(tmp_path):
    for rank in range(3):
        write_node_file(tmp_path / f"job-worker-{rank}", _doc(rank, f"pod-{rank}", nnodes=3))
    stale = _doc(1, "pod-1-old", nnodes=3)
    stale["finished_at"] -= 3600
    write_node_file(tmp_path / "job-worker-1-restarted-before", stale)
    docs, problems = read_node_files(tmp_path)
    assert sorted(d["node"] for d in docs) == ["pod-0", "pod-1", "pod-2"]
    assert problems == ["job-worker-1-restarted-before/node-00001.json: an older report of node rank 1 "
                        "(job-worker-1/node-00001.json is newer and is used)"]
    p = _merge(tmp_path, "-f", "json")
    m = json.loads(p.stdout)
    assert m["missing_nodes"] == [] and len(m["nodes"]) == 3, p.stderr
    assert p.returncode == 0  # the older file is a warning, not a failure


def test_missing_nodes_are_named_by_host_from_the_node_list(tmp_path):
    hosts = ["gpu01", "gpu02", "gpu03", "gpu04"]
    # ranks in node-list order (srun, a hostfile): the list names the missing rank
    docs = [_doc(r, hosts[r], hosts=hosts) for r in (0, 1, 3)]
    d = build_report(docs).to_dict()
    assert d["missing_nodes"] == ["node rank 2 (gpu03)"] and d["sections"]["missing_nodes"][0]["host"] == "gpu03"
    # ranks not in list order (torchrun's dynamic rendezvous): the host no node reported from
    docs = [_doc(0, "gpu01.cluster.local", hosts=hosts), _doc(1, "gpu04", hosts=hosts), _doc(3, "gpu02", hosts=hosts)]
    assert build_report(docs).to_dict()["missing_nodes"] == ["node rank 2 (gpu03)"]
    docs = [_doc(0, "gpu01", hosts=hosts), _doc(1, "gpu04", hosts=hosts)]
    assert build_report(docs).to_dict()["missing_nodes"] == ["node rank 2 (one of gpu02, gpu03)",
                                                             "node rank 3 (one of gpu02, gpu03)"]
    # through the real merge command, from files
    for doc in [_doc(r, hosts[r], hosts=hosts) for r in (0, 1, 3)]:
        write_node_file(tmp_path, doc)
    p = _merge(tmp_path, "-f", "json")
    assert p.returncode == 1 and json.loads(p.stdout)["missing_nodes"] == ["node rank 2 (gpu03)"], p.stderr


def test_slurm_node_list_names_hosts_under_any_launcher():
    def world(env):
        return resolve_world(parse_launcher(env), env, Config.default())

    torchrun_in_srun = {"TORCHELASTIC_RUN_ID": "x", "LOCAL_RANK": "0", "RANK": "0", "WORLD_SIZE": "4",
                        "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "4", "MASTER_ADDR": "gpu01",
                        "MASTER_PORT": "29500", "SLURM_PROCID": "0", "SLURM_NTASKS": "4",
                        "SLURM_STEP_NODELIST": "gpu[01-04]", "SLURM_JOB_NODELIST": "gpu[01-08]"}
    assert world(torchrun_in_srun).hosts == ("gpu01", "gpu02", "gpu03", "gpu04")
    # mpirun inside a larger allocation: 8 hosts for 4 nodes cannot name nodes by rank
    mpi = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "1", "MASTER_ADDR": "gpu01", "SLURM_JOB_NODELIST": "gpu[01-08]"}
    assert world(mpi).hosts == ()
    assert world(dict(mpi, SLURM_JOB_NODELIST="gpu[01-04")).hosts == ()  # a malformed list is not this job's error
