"""Training jobs under a real Slurm (Debian slurm-wlm, the fixture of tests/slurm.py),
stopped the way Slurm stops them, read back by analyze-log.

The job step is what a user's batch script runs: ``srun`` starting one task per rank, each task
mapping Slurm's variables to torch's (``RANK=$SLURM_PROCID``), with ``srun``'s own messages and the
tasks' output in one file (``srun ... > train.log 2>&1``). What Slurm prints here is Slurm's own
wording (slurmstepd's CANCELLED banner, srun's ``task N: Killed``), not a copy of it.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.live.conftest import HERE, analyze, free_port
from tests.slurm import OK

pytestmark = [pytest.mark.distributed, pytest.mark.slow,
              pytest.mark.skipif(not OK, reason="needs root and Slurm (apt-get install slurm-wlm munge)")]
pytest.importorskip("torch")


def _short_kill_wait(d) -> str:
    # the seconds between SIGTERM and SIGKILL of a cancelled step (default 30)
    return "KillWait=2\n"


def _step(slurm, tmp_path, fault: str, *srun_args: str, rank: str | None = None, steps: int = 12):
    env = dict(slurm["env"], LIVE_FAULT=fault, LIVE_STEP="6", LIVE_STEPS=str(steps), LIVE_PG_TIMEOUT="600",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    if rank is not None:
        env["LIVE_RANK"] = rank
    # what a batch script writes: Slurm's task variables mapped to torch's, then the trainer
    task = 'RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID exec "$0" "$1"'
    argv = ["srun", "-N1", "-n2", *srun_args, "bash", "-c", task, sys.executable, str(HERE / "train_ddp.py")]
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        rc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp_path, timeout=240).returncode
    return rc, log


def _kinds(doc) -> set[str]:
    return {f["kind"] for f in doc["findings"]}


@pytest.mark.parametrize("slurm", [_short_kill_wait], indirect=True)
def test_a_step_cancelled_at_its_time_limit(slurm, tmp_path):
    """Every rank stalls at step 6; Slurm cancels the step at its 15 s limit."""
    rc, log = _step(slurm, tmp_path, "hang", "--time=0:15")
    text = log.read_text(errors="replace")
    assert rc != 0 and "DUE TO TIME LIMIT" in text, text[-2000:]
    code, doc = analyze(log)
    assert code == 1, doc["summary"] if "summary" in doc else doc
    assert "slurm_time_limit" in _kinds(doc), (_kinds(doc), text[-2000:])
    assert doc["metrics"]["last_step"] == 5


def test_an_srun_task_killed(slurm, tmp_path):
    """Rank 1 is SIGKILLed at step 6 (the OOM killer's way); srun reports ``task 1: Killed``."""
    rc, log = _step(slurm, tmp_path, "sigkill", rank="1")
    text = log.read_text(errors="replace")
    assert rc != 0 and "task 1" in text, text[-2000:]
    code, doc = analyze(log)
    assert code == 1
    assert "sigkill" in _kinds(doc), (_kinds(doc), text[-2000:])
    assert doc["first_failing_rank"] == 1, (doc.get("first_failing_rank"), text[-2000:])
