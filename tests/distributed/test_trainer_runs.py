"""Real 2-process gloo runs of the reference trainer: training, SIGKILL mid-save and resume, faults."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import cli_env, llmdiag_argv

pytestmark = pytest.mark.distributed
TINY = ["--nproc", "2", "--threads", "1", "--batch-size", "4", "--seq-len", "32", "--hidden", "32"]


def _run(tmp_path, *extra, timeout=90, env=None):
    return subprocess.run(llmdiag_argv("train", *TINY, *extra), env=cli_env(**(env or {})),
                          capture_output=True, text=True, timeout=timeout, cwd=tmp_path)


def _losses(summary_path):
    doc = json.loads(summary_path.read_text())
    return {int(k): v for k, v in doc["ranks"][0]["losses"].items()}, doc


def test_two_process_run_trains_with_decreasing_loss(tmp_path):
    proc = _run(tmp_path, "--steps", "30", "--summary-file", str(tmp_path / "s.json"), "--log-file", str(tmp_path / "t.log"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    losses, doc = _losses(tmp_path / "s.json")
    assert sorted(losses) == list(range(1, 31))
    first, last = sum(losses[s] for s in range(1, 4)) / 3, sum(losses[s] for s in range(28, 31)) / 3
    assert last < first - 0.3, (first, last)
    checksums = {r["checksum"] for r in doc["ranks"]}
    assert len(checksums) == 1  # DDP replicas stay bit-identical
    lines = (tmp_path / "t.log").read_text().splitlines()
    assert sum(1 for ln in lines if ln.startswith("[rank1]: step=")) == 30
    assert any(ln.startswith("[rank0]: step=30 loss=") and "tokens_per_s=" in ln for ln in lines)


def test_sigkill_during_checkpoint_save_resumes_exactly(tmp_path):
    ref_dir, dirk = tmp_path / "ref", tmp_path / "killed"
    ref = _run(tmp_path, "--steps", "16", "--checkpoint-every", "5", "--checkpoint-dir", str(ref_dir),
               "--summary-file", str(tmp_path / "ref.json"))
    assert ref.returncode == 0, ref.stderr[-2000:]
    ref_losses, _ = _losses(tmp_path / "ref.json")

    # Make saves slow and observable, then SIGKILL the writing rank (rank 0) inside the save of step 10.
    log = tmp_path / "k.log"
    proc = subprocess.Popen(llmdiag_argv("train", *TINY, "--steps", "16", "--checkpoint-every", "5",
                                         "--checkpoint-dir", str(dirk), "--log-file", str(log)),
                            env=cli_env(LLMDIAG_CHECKPOINT_PAUSE_S="3"), cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            if log.exists() and "checkpoint: saving step 10: payload written" in log.read_text():
                break
            time.sleep(0.05)
        else:
            pytest.fail("the save of step 10 never started")
        ps = subprocess.run(["pgrep", "-f", "-P", str(proc.pid), "llmdiag.trainer"], capture_output=True, text=True)
        pids = [int(p) for p in ps.stdout.split()]
        rank0 = [p for p in pids if "RANK=0\0" in Path(f"/proc/{p}/environ").read_text()]
        assert rank0, ps.stdout
        os.kill(rank0[0], signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode != 0
    assert (dirk / "step_00000005" / "manifest.json").exists()
    assert not (dirk / "step_00000010").exists()
    assert list(dirk.glob(".tmp-step_00000010-*")), "the partial save should be left behind"

    again = _run(tmp_path, "--steps", "16", "--checkpoint-every", "5", "--checkpoint-dir", str(dirk),
                 "--summary-file", str(tmp_path / "resumed.json"), "--log-file", str(tmp_path / "r.log"))
    assert again.returncode == 0, again.stderr[-2000:]
    text = (tmp_path / "r.log").read_text()
    assert "resume: from checkpoint" in text and "at step 5" in text
    assert "removing partial save .tmp-step_00000010" in text
    resumed, _ = _losses(tmp_path / "resumed.json")
    assert sorted(resumed) == list(range(6, 17))
    assert resumed == {s: ref_losses[s] for s in range(6, 17)}  # bit-exact continuation


def test_launcher_max_restarts_resumes_after_crash(tmp_path):
    """An injected crash fires once per run: the restart resumes from step 5's checkpoint and finishes."""
    ck = tmp_path / "ck"
    first = _run(tmp_path, "--steps", "12", "--checkpoint-every", "5", "--checkpoint-dir", str(ck),
                 "--inject", "crash@7:rank=1", "--max-restarts", "1", "--log-file", str(tmp_path / "m.log"))
    text = (tmp_path / "m.log").read_text()
    assert "restarting all 2 workers (restart 1/1)" in text
    assert "resume: from checkpoint" in text and "at step 5" in text
    assert text.count("inject: crash at step 7") == 1
    assert first.returncode == 0, first.stderr[-2000:]


def test_launcher_names_the_rank_that_crashed_and_analyze_log_too(tmp_path):
    """rank 1 crashes; rank 0 then fails on the dead connection. The launcher's Root Cause is rank 1,
    and analyze-log names rank 1 (its exception), not rank 0's connection error."""
    log = tmp_path / "c.log"
    proc = _run(tmp_path, "--steps", "20", "--inject", "crash@4:rank=1", "--log-file", str(log))
    assert proc.returncode == 1
    text = log.read_text()
    root = text.split("Root Cause (first observed failure):", 1)[1]
    assert "rank      : 1 (local_rank: 1)" in root, text[-2500:]
    ana = subprocess.run(llmdiag_argv("analyze-log", str(log), "--format", "json"), env=cli_env(),
                         capture_output=True, text=True, timeout=60)
    doc = json.loads(ana.stdout)
    assert ana.returncode == 1 and doc["first_failing_rank"] == 1, ana.stdout[-3000:]
    assert "injected crash" in json.dumps(doc["findings"])


def test_bad_flags_exit_2(tmp_path):
    proc = _run(tmp_path, "--inject", "boom@3")
    assert proc.returncode == 2 and "KIND@STEP" in proc.stderr and "Traceback" not in proc.stderr


def test_torchrun_max_restarts_resumes_from_checkpoint(tmp_path):
    """torchrun restarts the workers after rank 1 crashes; the new attempt resumes from the
    checkpoint. The attempts share torchrun's store: without a namespace per attempt, a new rank
    sometimes dialled the dead rank's old gloo address (connectFullMesh refused, or a hang)."""
    import sys

    ck, log = tmp_path / "ck", tmp_path / "tr.log"
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--max-restarts", "1", "--standalone",
            "-m", "llmdiag.trainer", "--threads", "1", "--batch-size", "4",
            "--seq-len", "32", "--hidden", "32", "--steps", "12", "--checkpoint-every", "5",
            "--checkpoint-dir", str(ck), "--inject", "crash@7:rank=1", "--log-file", str(log)]
    proc = subprocess.run(argv, env=cli_env(), capture_output=True, text=True, timeout=60, cwd=tmp_path)
    text = log.read_text()
    assert text.count("inject: crash at step 7") == 1, text[-2000:]  # the first attempt only
    assert "resume: from checkpoint" in text and "at step 5" in text
    assert proc.returncode == 0


def test_nan_advice_of_a_real_bf16_run_is_not_about_loss_scaling(tmp_path):
    log = tmp_path / "n.log"
    _run(tmp_path, "--steps", "12", "--precision", "bf16", "--inject", "nan@6", "--log-file", str(log))
    proc = subprocess.run(llmdiag_argv("analyze-log", str(log), "--format", "json"), env=cli_env(),
                          capture_output=True, text=True, timeout=60)
    f = next(f for f in json.loads(proc.stdout)["findings"] if f["kind"] == "nan_loss")
    assert f["facts"]["dtype"] == "bfloat16" and "bf16" in f["cause"] and "scaler" not in f["next_step"]
