"""Every launcher's variables, as real launchers and user scripts set them, resolve to one node
place or to one line naming what is missing and what was found (table-driven).

Each row is an environment as a launcher produces it; the expected answer is the node rank,
node count, rendezvous host and port and launcher, or the words the one-line error must hold.
The variable names are those the launchers document (torchrun's worker variables, Kubeflow's
PET_*, srun's and sbatch's output variables, Open MPI's OMPI_COMM_WORLD_*, Hydra's PMI_*).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from llmdiag.cluster.world import RendezvousUnknown, resolve_world
from llmdiag.config import Config
from llmdiag.launcher import LAUNCHERS, parse_launcher
from tests.conftest import cli_env

PJ = {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}
TORCHRUN = {"TORCHELASTIC_RUN_ID": "job", "RANK": "9", "WORLD_SIZE": "16", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "8",
            "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2", "ROLE_RANK": "9", "MASTER_ADDR": "job-worker-0",
            "MASTER_PORT": "41000"}
SRUN = {"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0", "SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_NNODES": "2",
        "SLURM_JOB_NUM_NODES": "2", "SLURM_LOCALID": "1", "SLURM_TASKS_PER_NODE": "4(x2)",
        "SLURM_JOB_NODELIST": "gpu[07-08]", "SLURM_NODELIST": "gpu[07-08]"}

# env → (launcher, node_rank, nnodes, master_addr, master_port), or ("error", words the one line holds)
ROWS = {
    "pytorchjob": (dict(PJ, PET_NNODES="4", PET_NODE_RANK="2", PET_NPROC_PER_NODE="8", PET_MASTER_ADDR="job-master-0",
                        PET_MASTER_PORT="23456", MASTER_ADDR="job-master-0", MASTER_PORT="23456", RANK="2",
                        WORLD_SIZE="4"), ("PyTorchJob", 2, 4, "job-master-0", 23456)),
    # the pod's script exports NNODES; the operator gave no PET_NNODES
    "pytorchjob-script-nnodes": (dict(PJ, PET_NODE_RANK="1", NNODES="2", PET_MASTER_ADDR="job-master-0",
                                      PET_MASTER_PORT="23456"), ("PyTorchJob", 1, 2, "job-master-0", 23456)),
    "pytorchjob-rank-world-only": (dict(PJ, PET_MASTER_ADDR="m-0", MASTER_ADDR="m-0", MASTER_PORT="23456",
                                        RANK="2", WORLD_SIZE="3"), ("PyTorchJob", 2, 3, "m-0", 23456)),
    "pytorchjob-elastic-endpoint": (dict(PJ, PET_RDZV_ENDPOINT="job-master-0:29400", PET_RDZV_BACKEND="c10d",
                                         PET_NNODES="2:4", PET_NODE_RANK="3"), ("PyTorchJob", 3, 4, "job-master-0", 29400)),
    "pytorchjob-no-node-count": (dict(PJ, PET_NODE_RANK="1"),
                                 ("error", "PyTorchJob", "PET_NNODES or NNODES", "found PET_NODE_RANK=1")),
    "pytorchjob-no-node-rank": (dict(PJ, PET_NNODES="2:4", PET_RDZV_ENDPOINT="job-master-0:29400"),
                                ("error", "index is unknown", "PET_NODE_RANK or NODE_RANK or RANK",
                                 "found PET_NNODES=2:4")),
    "torchrun-in-pytorchjob": (dict(PJ, **TORCHRUN, PET_NNODES="2", PET_NODE_RANK="1", PET_NPROC_PER_NODE="8",
                                    PET_MASTER_ADDR="job-master-0", PET_MASTER_PORT="23456"),
                               ("torchrun", 1, 2, "job-worker-0", 41000)),
    # an elastic rendezvous assigns GROUP_RANK; the NODE_RANK the script exported is not the node's place
    "torchrun-group-rank-wins": (dict(TORCHRUN, NODE_RANK="0"), ("torchrun", 1, 2, "job-worker-0", 41000)),
    "torchrun-without-group-vars": ({"TORCHELASTIC_RUN_ID": "j", "RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1",
                                     "LOCAL_WORLD_SIZE": "4", "MASTER_ADDR": "n0", "MASTER_PORT": "29400"},
                                    ("torchrun", 1, 2, "n0", 29400)),
    "srun": (dict(SRUN, SLURM_NODEID="1"), ("srun", 1, 2, "gpu07", 29500)),
    "srun-without-nodeid": (SRUN, ("srun", 1, 2, "gpu07", 29500)),
    "srun-step-of-part": (dict(SRUN, SLURM_NODEID="0", SLURM_STEP_NUM_NODES="1", SLURM_STEP_NUM_TASKS="1",
                               SLURM_PROCID="0", SLURM_LOCALID="0", SLURM_STEP_NODELIST="gpu08"), None),
    "slurm-batch-script": ({"SLURM_JOB_ID": "77", "SLURM_JOB_NUM_NODES": "4", "SLURM_NNODES": "4",
                            "SLURM_JOB_NODELIST": "gpu[01-04]", "SLURM_NODELIST": "gpu[01-04]"},
                           ("error", "srun", "not an srun task", "found SLURM_JOB_NUM_NODES=4")),
    "slurm-batch-one-node": ({"SLURM_JOB_ID": "77", "SLURM_JOB_NUM_NODES": "1", "SLURM_NNODES": "1",
                              "SLURM_JOB_NODELIST": "gpu01"}, None),
    "openmpi": ({"OMPI_COMM_WORLD_RANK": "6", "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
                 "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_COMM_WORLD_NODE_RANK": "0", "MASTER_ADDR": "h0"},
                ("Open MPI", 3, 4, "h0", 29500)),
    "openmpi-no-master": ({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
                           "OMPI_COMM_WORLD_LOCAL_SIZE": "1"},
                          ("error", "rendezvous host is unknown", "mpirun -x", "found OMPI_COMM_WORLD_RANK=1")),
    "mpich-hydra": ({"PMI_RANK": "3", "PMI_SIZE": "4", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2",
                     "MASTER_ADDR": "h0", "MASTER_PORT": "29511"}, ("MPICH/Hydra", 1, 2, "h0", 29511)),
    "mpich-no-local-size": ({"PMI_RANK": "1", "PMI_SIZE": "4", "MASTER_ADDR": "h0"},
                            ("error", "PMI_SIZE=4", "number of nodes is unknown", "set NNODES")),
    "pmix": ({"PMIX_RANK": "2", "NNODES": "4", "MASTER_ADDR": "h0"}, ("PMIx", 2, 4, "h0", 29500)),
    "plain": ({"NNODES": "2", "NODE_RANK": "1", "MASTER_ADDR": "h", "MASTER_PORT": "29511"},
              ("plain variables", 1, 2, "h", 29511)),
    "plain-rank-only": ({"NODE_RANK": "1"}, ("error", "NODE_RANK=1", "set NNODES", "found NODE_RANK=1")),
    "plain-no-rank": ({"NNODES": "2", "MASTER_ADDR": "h"}, ("error", "index is unknown", "set NODE_RANK",
                                                            "found NNODES=2, MASTER_ADDR=h")),
    "plain-no-master": ({"NNODES": "2", "NODE_RANK": "1"}, ("error", "rendezvous host is unknown", "MASTER_ADDR")),
    "lws": ({"LWS_LEADER_ADDRESS": "lead.svc", "LWS_GROUP_SIZE": "4", "LWS_WORKER_INDEX": "3"},
            ("LeaderWorkerSet", 3, 4, "lead.svc", 29500)),
    "indexed-job": ({"JOB_COMPLETION_INDEX": "2", "JOBSET_NAME": "js", "NNODES": "4", "MASTER_ADDR": "js-w-0-0.js"},
                    ("Indexed Job", 2, 4, "js-w-0-0.js", 29500)),
    "plain-pod": (dict(PJ, RANK="1", WORLD_SIZE="3", MASTER_ADDR="m"), ("pod", 1, 3, "m", 29500)),
    "nothing": ({"PATH": "/usr/bin"}, None),
}


@pytest.mark.parametrize("name", list(ROWS))
def test_launcher_environment_resolves_or_names_what_is_missing(name):
    env, want = ROWS[name]
    info = parse_launcher(env)
    if want is not None and want[0] == "error":
        with pytest.raises(RendezvousUnknown) as exc:
            resolve_world(info, env, Config.default())
        line = str(exc.value)
        assert "\n" not in line
        for words in want[1:]:
            assert words in line, line
        return
    world = resolve_world(info, env, Config.default())
    if want is None:
        assert world is None, world
        return
    assert (world.node_rank, world.nnodes, world.master_addr, world.master_port) == want[1:]
    assert info.launcher == want[0]
    assert not info.problems and not info.warnings, (info.problems, info.warnings)


TWINS = {
    "addr": (dict(PJ, PET_NNODES="2", PET_NODE_RANK="0", PET_MASTER_ADDR="job-master-0", MASTER_ADDR="old-master",
                  PET_MASTER_PORT="23456", MASTER_PORT="23456"),
             "PET_MASTER_ADDR=job-master-0 but MASTER_ADDR=old-master", ("master_addr", "PET_MASTER_ADDR")),
    "port": (dict(PJ, PET_NNODES="2", PET_NODE_RANK="0", PET_MASTER_ADDR="m", PET_MASTER_PORT="23456",
                  MASTER_PORT="29500"), "PET_MASTER_PORT=23456 but MASTER_PORT=29500", ("master_port", "PET_MASTER_PORT")),
    "nnodes": (dict(PJ, PET_NNODES="4", NNODES="2", PET_NODE_RANK="1", PET_MASTER_ADDR="m"),
               "PET_NNODES=4 but NNODES=2", ("nnodes", "PET_NNODES")),
    "slurm-allocation-nnodes": ({"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "1", "SLURM_NNODES": "2"},
                                "SLURM_JOB_NUM_NODES=1 but SLURM_NNODES=2", ("nnodes", "SLURM_JOB_NUM_NODES")),
}


@pytest.mark.parametrize("name", list(TWINS))
def test_twin_variables_that_disagree_are_a_warning_naming_both(name):
    env, words, (field, var) = TWINS[name]
    info = parse_launcher(env)
    assert len(info.warnings) == 1 and words in info.warnings[0], info.warnings
    assert info.sources[field] == var


def test_twins_that_agree_or_belong_to_different_layers_are_no_warning():
    # elastic MIN:MAX against the script's count; torchrun's worker store against the operator's rendezvous
    assert not parse_launcher(dict(PJ, PET_NNODES="2:4", NNODES="4", PET_NODE_RANK="1", PET_MASTER_ADDR="m")).warnings
    assert not parse_launcher(dict(TORCHRUN, PET_MASTER_ADDR="job-master-0", PET_MASTER_PORT="23456")).warnings


def test_probe_names_the_variable_the_value_came_from_and_warns_on_twins():
    from llmdiag.probes.launcher import LauncherProbe
    from llmdiag.result import Status
    from tests.probes.nodeutil import by_check, context

    env = dict(PJ, PET_NNODES="1", PET_NODE_RANK="0", PET_MASTER_ADDR="127.0.0.1", MASTER_ADDR="127.0.0.2")
    r = by_check(LauncherProbe().run(context(env=env)))
    assert r["twins"].status is Status.WARN
    assert "PET_MASTER_ADDR=127.0.0.1" in r["twins"].summary and "MASTER_ADDR=127.0.0.2" in r["twins"].summary
    assert r["master-addr"].summary.startswith("PET_MASTER_ADDR 127.0.0.1 resolves")
    assert "master from PET_MASTER_ADDR" in r["variables"].summary


def _bare_env(**launcher: str) -> dict[str, str]:
    """The test's own environment without any launcher variable, plus ``launcher``."""
    names = {n for spec in LAUNCHERS for n in spec.variables()} | {"TORCHELASTIC_USE_AGENT_STORE"}
    env = {k: v for k, v in cli_env().items() if k not in names}
    return env | launcher


CLI_ROWS = [name for name, (_, want) in ROWS.items() if want is not None and want[0] == "error"]


@pytest.mark.parametrize("name", CLI_ROWS)
def test_preflight_with_an_incomplete_launcher_environment_prints_one_line_and_exits_2(name):
    env, want = ROWS[name]
    p = subprocess.run([sys.executable, "-m", "llmdiag", "preflight", "--probe", "launcher"], env=_bare_env(**env),
                       capture_output=True, text=True, timeout=120)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and p.stdout == "" and len(lines) == 1, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    for words in want[1:]:
        assert words in lines[0], lines[0]


def test_preflight_shows_a_pod_whose_twins_disagree_as_a_warning():
    import json

    env = dict(PJ, PET_NNODES="1", PET_NODE_RANK="0", PET_MASTER_ADDR="127.0.0.1", MASTER_ADDR="127.0.0.2",
               PET_MASTER_PORT="23456", MASTER_PORT="23457")
    p = subprocess.run([sys.executable, "-m", "llmdiag", "preflight", "--probe", "launcher", "-f", "json"],
                       env=_bare_env(**env), capture_output=True, text=True, timeout=120)
    doc = json.loads(p.stdout)
    twins = next(r for r in doc["results"] if r["check"] == "twins")
    assert twins["status"] == "warn"
    for words in ("PET_MASTER_ADDR=127.0.0.1", "MASTER_ADDR=127.0.0.2", "PET_MASTER_PORT=23456", "MASTER_PORT=23457"):
        assert words in twins["summary"], twins["summary"]
