"""Every injected fault is found and explained by ``llmdiag analyze-log`` on the trainer's own log."""

from __future__ import annotations

import importlib.util
import json
import subprocess

import pytest

from tests.conftest import cli_env, llmdiag_argv

pytestmark = [
    pytest.mark.distributed,
    pytest.mark.skipif(importlib.util.find_spec("llmdiag.commands.analyze_log") is None,
                       reason="analyze-log (branch logs) is not merged yet: llmdiag.commands.analyze_log not importable"),
]
TINY = ["--nproc", "2", "--threads", "1", "--batch-size", "4", "--seq-len", "32", "--hidden", "32"]


def _timeout(spec: str) -> list[str]:
    """A hang must time out quickly; any other run gets a timeout no loaded machine reaches (a CI run
    under load 8 on 2 cores timed out a healthy all-reduce at 3 s and found gloo_timeout, not the spike)."""
    return ["--collective-timeout", "3" if spec.startswith("hang") else "60"]
CASES = {
    "nan@6": ({"nan_loss"}, 6),
    "spike@8": ({"loss_spike"}, 8),
    "slow@6:rank=1:factor=8": ({"throughput_drop", "straggler", "slow_rank"}, None),
    "hang@6:rank=1": ({"nccl_timeout", "collective_timeout", "gloo_timeout"}, None),
    "crash@6:rank=1": ({"child_failed", "python_exception", "exception"}, None),
    "oom@6": ({"cuda_oom"}, None),
}


@pytest.mark.parametrize("spec", list(CASES))
def test_injected_fault_is_diagnosed(tmp_path, spec):
    log = tmp_path / "train.log"
    subprocess.run(llmdiag_argv("train", *TINY, *_timeout(spec), "--steps", "14", "--inject", spec, "--log-file", str(log)),
                   env=cli_env(), capture_output=True, text=True, timeout=90, cwd=tmp_path)
    proc = subprocess.run(llmdiag_argv("analyze-log", str(log), "--format", "json"), env=cli_env(),
                          capture_output=True, text=True, timeout=60)
    doc = json.loads(proc.stdout)
    kinds, step = CASES[spec]
    found = [f for f in doc["findings"] if f["kind"] in kinds]
    assert found, f"{spec}: expected one of {kinds}, got {[f['kind'] for f in doc['findings']]}"
    if step is not None:
        assert any(f.get("step") == step for f in found)
    if spec.startswith(("hang", "crash")):
        assert any(f.get("rank") in (0, 1) for f in found)


def test_hang_summary_names_the_suspect_not_the_first_victim(tmp_path):
    """``hang@N:rank=1``: rank 0 times out first and exits first (torchrun's root cause), but rank 1 is the
    one to drain; the summary line, the one people read, names it and the first reporter."""
    log = tmp_path / "train.log"
    subprocess.run(llmdiag_argv("train", *TINY, *_timeout("hang"), "--steps", "14", "--inject", "hang@6:rank=1",
                                "--log-file", str(log)),
                   env=cli_env(), capture_output=True, text=True, timeout=90, cwd=tmp_path)
    doc = json.loads(subprocess.run(llmdiag_argv("analyze-log", str(log), "--format", "json"), env=cli_env(),
                                    capture_output=True, text=True, timeout=60).stdout)
    assert doc["suspect_ranks"] == [1]
    assert doc["first_reporting_rank"] == 0
    text = subprocess.run(llmdiag_argv("analyze-log", str(log), "--width", "1000"), env=cli_env(),
                          capture_output=True, text=True, timeout=60).stdout
    last = text.strip().splitlines()[-1]
    assert "suspect rank(s) 1" in last and "first reporter rank 0" in last, last
    assert "first failing rank 0" not in last, last


def test_hang_suspect_from_the_log_alone(tmp_path):
    """Three ranks, rank 1 hangs, no Flight Recorder dumps beside the log: ranks 0 and 2 report the gloo
    timeout, rank 1 printed its progress but never reported it, so the log alone names rank 1."""
    import shutil

    log = tmp_path / "train.log"
    subprocess.run(llmdiag_argv("train", "--nproc", "3", *TINY[2:], *_timeout("hang"), "--steps", "10", "--inject", "hang@5:rank=1",
                                "--log-file", str(log)),
                   env=cli_env(), capture_output=True, text=True, timeout=150, cwd=tmp_path)
    shutil.rmtree(tmp_path / "train.log.fr", ignore_errors=True)
    doc = json.loads(subprocess.run(llmdiag_argv("analyze-log", str(log), "--format", "json"), env=cli_env(),
                                    capture_output=True, text=True, timeout=60).stdout)
    assert doc["suspect_ranks"] == [1], doc["suspect_reason"]
    assert "flight_recorder" not in doc
    assert doc["first_reporting_rank"] in (0, 2)
