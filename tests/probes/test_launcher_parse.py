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


def test_kubernetes_pytorchjob_pet_variables():
    env = {"PET_NNODES": "4", "PET_NODE_RANK": "2", "PET_NPROC_PER_NODE": "8", "PET_MASTER_ADDR": "job-master-0",
           "PET_MASTER_PORT": "23456", "MASTER_ADDR": "job-master-0", "MASTER_PORT": "23456", "RANK": "2",
           "WORLD_SIZE": "4", "KUBERNETES_SERVICE_HOST": "10.96.0.1"}
    info = parse_launcher(env)
    assert (info.kind, info.nnodes, info.node_rank, info.nproc_per_node, info.master_addr, info.master_port) == (
        "kubernetes", 4, 2, 8, "job-master-0", 23456)
    assert not info.problems
    assert parse_launcher(dict(env, PET_NNODES="2:4")).nnodes == 4  # elastic MIN:MAX


def test_kubernetes_plain_pod_lws_and_indexed_job():
    pod = parse_launcher({"RANK": "1", "WORLD_SIZE": "3", "MASTER_ADDR": "m", "KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    assert (pod.kind, pod.nnodes, pod.node_rank) == ("kubernetes", 3, 1)
    lws = parse_launcher({"LWS_LEADER_ADDRESS": "lead.svc", "LWS_GROUP_SIZE": "4", "LWS_WORKER_INDEX": "3"})
    assert (lws.kind, lws.nnodes, lws.node_rank, lws.master_addr) == ("kubernetes", 4, 3, "lead.svc")
    job = parse_launcher({"JOB_COMPLETION_INDEX": "2", "JOBSET_NAME": "js", "NNODES": "4", "MASTER_ADDR": "js-w-0-0.js"})
    assert (job.kind, job.nnodes, job.node_rank) == ("kubernetes", 4, 2)


def test_slurm_step_variables_win_over_the_job():
    env = {"SLURM_PROCID": "5", "SLURM_NTASKS": "16", "SLURM_STEP_NUM_TASKS": "8", "SLURM_NNODES": "4",
           "SLURM_STEP_NUM_NODES": "2", "SLURM_NODEID": "1", "SLURM_LOCALID": "1", "SLURM_TASKS_PER_NODE": "4(x4)",
           "SLURM_STEP_TASKS_PER_NODE": "4(x2)", "SLURM_JOB_NODELIST": "login1,gpu[01-04]",
           "SLURM_STEP_NODELIST": "gpu[03-04]"}
    info = parse_launcher(env)
    assert (info.kind, info.world_size, info.nnodes, info.nproc_per_node, info.nodelist) == (
        "slurm", 8, 2, 4, "gpu[03-04]")


def test_mpich_hydra_and_pmix():
    info = parse_launcher({"PMI_RANK": "3", "PMI_SIZE": "4", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2",
                           "MASTER_ADDR": "h0"})
    assert (info.kind, info.rank, info.world_size, info.nnodes, info.local_rank) == ("mpich", 3, 4, 2, 1)
    pmix = parse_launcher({"PMIX_RANK": "2", "NNODES": "4", "MASTER_ADDR": "h0"})
    assert (pmix.kind, pmix.rank, pmix.nnodes) == ("pmix", 2, 4)


def test_openmpi_node_rank_is_not_ompi_node_rank():
    # OMPI_COMM_WORLD_NODE_RANK counts processes on a node; the node's index comes from rank // local size
    from llmdiag.cluster.world import resolve_world
    from llmdiag.config import Config

    env = {"OMPI_COMM_WORLD_RANK": "6", "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_COMM_WORLD_NODE_RANK": "0", "MASTER_ADDR": "h0"}
    world = resolve_world(parse_launcher(env), env, Config.default())
    assert (world.node_rank, world.nnodes, world.is_agent) == (3, 4, True)


def test_mpirun_without_master_addr_is_a_one_line_usage_error():
    import subprocess
    import sys

    from tests.conftest import cli_env

    env = cli_env(OMPI_COMM_WORLD_RANK="1", OMPI_COMM_WORLD_SIZE="2", OMPI_COMM_WORLD_LOCAL_RANK="0",
                  OMPI_COMM_WORLD_LOCAL_SIZE="1")
    env.pop("MASTER_ADDR", None)
    p = subprocess.run([sys.executable, "-m", "llmdiag", "preflight", "--probe", "system"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "MASTER_ADDR" in lines[0] and "mpirun -x" in lines[0], p.stderr
