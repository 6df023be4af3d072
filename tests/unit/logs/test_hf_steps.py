"""The Hugging Face Trainer's records print an epoch and no step; its end-of-training summary places them.

One real run made by the test (the live matrix's ``tests/live/train_hf.py``, one process on CPU): 40 steps of
32 per epoch (it crosses an epoch), a record every 5 steps, the loss x40 at step 23, which the record of
steps 21..25 averages. Read back whole, the spike is at step 25 and the curve runs 5..40 every 5; without the
summary (an excerpt, a run that died) nothing says how long an epoch is, and the positions stay epochs, named
so. The placement rule itself is checked on epochs printed the way transformers 5 (``.4g``) and 4.x (two
decimals) print them, for runs far longer than a test can train.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from llmdiag.logs import analyze_paths
from llmdiag.logs.epochs import place, train_summary

LIVE = Path(__file__).resolve().parents[2] / "live" / "train_hf.py"


@pytest.fixture(scope="module")
def trainer_log(tmp_path_factory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers", reason="transformers is not installed (pip install -e .[test])")
    d = tmp_path_factory.mktemp("hf")
    env = {**os.environ, "LIVE_STEPS": "40", "LIVE_LOGGING_STEPS": "5", "LIVE_FAULT": "spike", "LIVE_STEP": "23",
           "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    log = d / "train.log"
    with open(log, "wb") as out:
        proc = subprocess.run([sys.executable, str(LIVE), str(d / "out")], stdout=out, stderr=subprocess.STDOUT,
                              env=env, cwd=d, timeout=300)
    assert proc.returncode == 0, log.read_text(errors="replace")[-3000:]
    return log


def test_the_summary_places_every_record_on_its_step(trainer_log):
    doc = analyze_paths([str(trainer_log)])
    m = doc["metrics"]
    assert (m["first_step"], m["last_step"], m["log_interval"], m["num_steps_with_loss"]) == (5, 40, 5, 8), m
    assert m["steps_per_epoch"] == 32 and m["steps_from_epoch"] == "exact", m
    assert [s["step"] for s in doc["steps"]] == list(range(5, 41, 5))
    spike = [f for f in doc["findings"] if f["kind"] == "loss_spike"]
    assert spike and spike[0]["step"] == 25 and spike[0]["facts"]["spike_first_step"] == 25, doc["findings"]
    assert "step 25" in spike[0]["message"] and "epoch" not in spike[0]["message"]
    assert not doc["warnings"], doc["warnings"]


def test_without_the_summary_positions_stay_epochs_and_say_so(trainer_log, tmp_path):
    cut = tmp_path / "excerpt.log"
    cut.write_text("".join(x for x in trainer_log.read_text(errors="replace").splitlines(keepends=True)
                           if "train_runtime" not in x))
    doc = analyze_paths([str(cut)])
    assert doc["metrics"]["has_step_number"] is False and "steps_per_epoch" not in doc["metrics"]
    spike = next(f for f in doc["findings"] if f["kind"] == "loss_spike")
    assert spike["step"] is None and "at epoch 0.7812" in spike["message"], spike
    assert spike["facts"]["spike_first_epoch"] == 0.7812 and spike["facts"]["max_loss_epoch"] == 0.7812
    assert not any(k.endswith("_step") for k in spike["facts"]), spike["facts"]


def test_transformers_4_output_is_placed_the_same():
    """The same run under transformers 4.57.1 (data/trainer/README.md): bare numbers, epochs to two decimals
    (0.16 for step 5), a summary with runtime x steps/s = 2.47 x 16.194 = 39.999."""
    doc = analyze_paths([str(Path(__file__).parent / "data" / "trainer" / "transformers-4.57.1_spike-at-23_every-5.log")])
    assert [s["step"] for s in doc["steps"]] == list(range(5, 41, 5))
    assert doc["metrics"]["steps_per_epoch"] == 32 and doc["metrics"]["steps_from_epoch"] == "exact"
    assert [(f["kind"], f["step"]) for f in doc["findings"]] == [("loss_spike", 25)] and not doc["warnings"]


def test_each_file_is_placed_by_its_own_summary(trainer_log, tmp_path):
    """Two files read together: an excerpt without its summary keeps its epochs, a whole log gets its steps,
    in either order."""
    cut = tmp_path / "excerpt.log"
    cut.write_text("".join(x for x in trainer_log.read_text(errors="replace").splitlines(keepends=True)
                           if "train_runtime" not in x))
    for paths in ([cut, trainer_log], [trainer_log, cut]):
        rows = analyze_paths([str(p) for p in paths])["steps"]
        by_file = {str(p): [r["step"] for r in rows if r["file"] == str(p)] for p in paths}
        assert by_file == {str(cut): [None] * 8, str(trainer_log): list(range(5, 41, 5))}, paths


def test_a_second_run_after_the_summary_is_not_placed_by_it(trainer_log, tmp_path):
    """Records after a summary belong to another run (a resumed one, a second ``train()``): no summary of
    theirs, so their positions stay epochs, and the first run keeps its steps."""
    text = trainer_log.read_text(errors="replace")
    records = [x for x in text.splitlines(keepends=True) if "'loss'" in x and "train_runtime" not in x]
    both = tmp_path / "two.log"
    both.write_text(text + "".join(records))
    doc = analyze_paths([str(both)])
    rows = doc["steps"]
    assert [r["step"] for r in rows[:8]] == list(range(5, 41, 5)) and all(r["step"] is None for r in rows[8:])


def _v5(v: float) -> str:
    return f"'{v:.4g}'"


def _v4(v: float, digits: int = 4) -> str:
    return repr(round(v, digits))


@pytest.mark.parametrize("version,exact", [("5", True), ("4", False)])
def test_long_runs_are_placed_on_their_logging_interval(version, exact):
    """3000 steps of 1000 per epoch, a record every 10, the summary as each version prints it (5: every value
    ``.4g`` and quoted; 4: runtime to 4 decimals, steps/s to 3, epochs to 2). ``.4g`` epochs (2.345) leave
    half a step of doubt, so the records land on multiples of 10; two decimals leave 5 steps either way, so
    each record is the one after the one before (inferred, and said so), and still lands on its step."""
    spe, every, total, runtime = 1000, 10, 3000, 1234.5678
    steps = np.arange(every, total + 1, every)
    if version == "5":
        summary = train_summary(f"{{'train_runtime': {_v5(runtime)}, 'train_samples_per_second': '77.8', "
                                f"'train_steps_per_second': {_v5(total / runtime)}, 'train_loss': '2.1', "
                                f"'epoch': {_v5(total / spe)}}}")
        epochs = np.array([float(f"{s / spe:.4g}") for s in steps])
    else:
        summary = train_summary(f"{{'train_runtime': {_v4(runtime)}, 'train_samples_per_second': 77.8, "
                                f"'train_steps_per_second': {_v4(total / runtime, 3)}, 'train_loss': 2.1, "
                                f"'epoch': {_v4(total / spe, 2)}}}")
        epochs = np.array([round(s / spe, 2) for s in steps])
    assert summary is not None and summary["total"] == pytest.approx(total, rel=1e-3), summary
    got, inferred, how = place(epochs, summary)
    assert how["logging_interval"] == every and got.tolist() == steps.tolist()
    assert inferred is not exact


def test_a_gap_in_the_records_is_placed_by_the_lattice_not_the_sequence():
    """A record missing (a cut excerpt): the next one is not the step after the one before."""
    spe = 1000
    steps = np.array([10, 20, 30, 60, 70, 80])
    summary = {"total": 3000.0, "total_err": 0.0, "epoch": 3.0, "epoch_err": 0.0, "quoted": True}
    got, inferred, _ = place(np.array([float(f"{s / spe:.4g}") for s in steps]), summary)
    assert got.tolist() == steps.tolist() and not inferred


def test_epochs_that_say_nothing_are_counted_back_from_the_end():
    """transformers 4 with 13000 steps per epoch and 199 steps: every record prints 'epoch': 0.0, 0.01 or
    0.02, and the summary's epoch 0.02 leaves steps per epoch within a third. The last record before the
    summary is the run's last step (199), the others one before each other: all placed, and said to be inferred."""
    steps = np.arange(1, 200)
    summary = train_summary("{'train_runtime': 99.5, 'train_samples_per_second': 8.0, 'train_steps_per_second': 2.0, "
                            "'train_loss': 2.0, 'epoch': 0.02}")
    got, inferred, how = place(np.round(steps / 13000, 2), summary)
    assert got.tolist() == steps.tolist() and inferred and how["logging_interval"] == 1


def test_summary_syntax():
    four = train_summary("{'train_runtime': 12.3456, 'train_samples_per_second': 10.2, "
                         "'train_steps_per_second': 0.81, 'train_loss': 2.3, 'epoch': 1.0}")
    assert four is not None and four["total"] == 10.0 and four["epoch"] == 1.0
    assert train_summary("{'train_runtime': '0', 'train_steps_per_second': '1', 'epoch': '1'}") is None
    assert train_summary("{'loss': '3.9', 'epoch': '0.5'}") is None


def test_parallel_ranges_place_the_same_steps(trainer_log, monkeypatch):
    """Split over worker processes, the summary is read by the worker of the last range: the records that the
    parent holds are placed by it all the same."""
    from llmdiag.logs import parallel

    keys = ("findings", "metrics", "steps", "warnings")
    seq = analyze_paths([str(trainer_log)], workers=1)
    assert seq["metrics"]["last_step"] == 40
    with monkeypatch.context() as m:  # every file split, in ranges of about 512 bytes
        m.setattr(parallel, "MIN_BYTES", 0)
        m.setattr(parallel, "RANGE_BYTES", 512)
        par = analyze_paths([str(trainer_log)], workers=2)
    assert {k: par[k] for k in keys} == {k: seq[k] for k in keys}
