"""llmdiag.launcher: torchrun, Slurm, OpenMPI and plain variables parsed with range checks."""

from __future__ import annotations

from llmdiag.launcher import parse_launcher


def test_nothing_set_is_not_a_job():
    info = parse_launcher({"PATH": "/usr/bin"})
    assert info.kind == "none" and not info.distributed and info.problems == ()


def test_torchrun_worker():
    info = parse_launcher({"TORCHELASTIC_RUN_ID": "abc", "RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1",
                           "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2",
                           "MASTER_ADDR": "node-0", "MASTER_PORT": "29500"})
    assert (info.kind, info.rank, info.node_rank, info.nnodes, info.nproc_per_node) == ("torchrun", 5, 1, 2, 4)
    assert info.distributed and info.problems == () and info.job_id == "abc"


def test_slurm_with_compressed_tasks_per_node():
    env = {"SLURM_PROCID": "9", "SLURM_NTASKS": "16", "SLURM_NNODES": "2", "SLURM_NODEID": "1",
           "SLURM_LOCALID": "1", "SLURM_TASKS_PER_NODE": "8(x2)", "SLURM_JOB_ID": "4711"}
    info = parse_launcher(env)
    assert (info.kind, info.world_size, info.nnodes, info.nproc_per_node, info.job_id) == ("slurm", 16, 2, 8, "4711")
    assert info.problems == ()
    # Heterogeneous layouts have no single count; nonsense is reported.
    assert parse_launcher(dict(env, SLURM_TASKS_PER_NODE="8(x1),4")).nproc_per_node is None
    assert "not a task count" in parse_launcher(dict(env, SLURM_NTASKS_PER_NODE="eight")).problems[0]


def test_openmpi_derives_nodes_from_local_size():
    info = parse_launcher({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8",
                           "OMPI_COMM_WORLD_LOCAL_RANK": "3", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"})
    assert (info.kind, info.nnodes, info.nproc_per_node) == ("openmpi", 2, 4)


def test_plain_variables_problems_each_reported_once():
    info = parse_launcher({"MASTER_ADDR": "h", "NNODES": "2", "NODE_RANK": "x", "NPROC_PER_NODE": "0"})
    assert info.problems == ("NODE_RANK='x' is not an integer", "NPROC_PER_NODE=0 is out of range (accepted: >= 1)")


def test_nproc_per_node_disagreeing_with_the_launcher():
    info = parse_launcher({"TORCHELASTIC_RUN_ID": "a", "RANK": "0", "WORLD_SIZE": "8", "LOCAL_RANK": "0",
                           "LOCAL_WORLD_SIZE": "4", "NPROC_PER_NODE": "8", "NNODES": "2", "MASTER_ADDR": "h"})
    assert "NPROC_PER_NODE=8 != torchrun's processes per node (4)" in info.problems


def test_multi_process_job_without_master_addr():
    info = parse_launcher({"NNODES": "2", "NODE_RANK": "0", "NPROC_PER_NODE": "4", "WORLD_SIZE": "8"})
    assert "MASTER_ADDR is not set but the job has more than one process" in info.problems
