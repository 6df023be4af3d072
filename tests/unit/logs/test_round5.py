"""The fifth and sixth rounds of unseen logs (data/round5/README.md, data/round6/README.md), through the real
``llmdiag analyze-log`` command.

``real/``: the labels exactly, and every fact. ``live/``: what was injected is among the findings, a dead job
never exits 0 and a healthy one has no finding, and every fact (above all the rank: the one that failed first,
the silent one that stalled or left). KNOWN lists what is still outside, with the reason (strict xfails).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from llmdiag.cli import cli
from tests.unit.logs.test_manifest import fact, same

DATA = Path(__file__).parent / "data" / "round5"
#: round 6 (data/round6/README.md) is read the same way as round 5's live logs
SETS = ("real", "live", "../round6/live")
CASES = [(s, c) for s in SETS for c in json.loads((DATA / s / "manifest.json").read_text())]

KNOWN = {
    ("real", "case_08.log"): "timm's summary.csv rows pasted without their header: no name says which column is "
                             "the loss, and lines without any metric word never reach the readers",
    ("live", "case_06.log"): "a straggler killed by an outer timeout with no launcher in between (srun-style "
                             "labels): the log just stops at iteration N of 500, as an excerpt would; the "
                             "throughput drop it shows is a warning, so the dead job exits 0",
    ("live", "case_21.log"): "the HF Trainer stalled at 5/40 until an outer timeout stopped torchrun: read as the "
                             "launcher stopped from outside; a bar without times cannot prove the stall",
    ("live", "case_27.log"): "the rank that returned early prints only 'process 2: ...' (accelerate's process "
                             "index) and no launcher line names the world size: it is never seen, so not named",
    ("../round6/live", "case_05.log"): "HF 4.57 under torchrun: rank 1's RuntimeError is reported inside the "
                                        "launcher's child_failed (exceptions_by_rank), not as a python_exception "
                                        "of its own, as the shared manifests label such a run",
    ("../round6/live", "case_15.log"): "the same for accelerate launch: the rank's exception is in child_failed",
    ("../round6/live", "case_35.log"): "the same for torch.distributed.launch --use-env",
    ("../round6/live", "case_18.log"): "Lightning's Rich bar through a terminal redraws the bar over two lines "
                                        "(cursor-up codes): grad_norm's NaN on the second line is dropped with "
                                        "the redraws",
}

#: each live job's own exit code (scripts/commands.txt: "case_NN  rc=R  Ns" or "case_NN.log  exit=R  ...")
JOB_RC = {(s, m[1]): int(m[2]) for s in SETS[1:] for m in re.finditer(
    r"^(case_\d+)(?:\.log)?\s+(?:rc|exit)=(\d+)", (DATA / s / "scripts" / "commands.txt").read_text(), re.M)}


def _run(subset: str, c: dict) -> tuple[dict, int]:
    paths = [str(DATA / subset / f) for f in c.get("files") or [c["file"]]]
    r = CliRunner().invoke(cli, ["analyze-log", *paths, "-f", "json"], catch_exceptions=False)
    return json.loads(r.output), r.exit_code


def _params():
    for s, c in CASES:
        gap = KNOWN.get((s, c["file"]))
        yield pytest.param((s, c), id=f"{s}/{c['file']}", marks=[pytest.mark.xfail(reason=gap, strict=True)] if gap else [])


@pytest.mark.parametrize("case", list(_params()))
def test_round5_case(case):
    subset, c = case
    doc, code = _run(subset, c)
    kinds = sorted({f["kind"] for f in doc["findings"]})
    want = sorted(c["expected"]["failures"])
    if subset != "real":
        assert set(want) <= set(kinds), (want, kinds)
        rc = JOB_RC.get((subset, c["file"].removesuffix(".log")))  # None: another run's console (case_04: case_03's)
        if rc:
            assert code != 0, f"a dead job (exit {rc}) must not pass: {kinds}"
        elif not want:
            assert kinds == [] and code == 0, kinds  # a healthy run
    else:
        assert kinds == want
    for key, value in c["expected"].get("facts", {}).items():
        assert same(value, fact(doc, key)), f"{key}: expected {value!r}, got {fact(doc, key)!r}"


def test_a_rank_that_returned_early_is_the_suspect_of_its_peers_lost_connections():
    """live/case_14: rank 1 leaves the loop cleanly at step 6 (exit 0, so torchrun's summary lists only ranks 0
    and 2, each failing with gloo's 'Connection closed by peer'). The summary explains nothing: the rank that
    left is named, from its own '[rank 1] step N' lines."""
    doc, code = _run("live", {"file": "case_14.log"})
    assert code != 0
    assert "peer_lost" in {f["kind"] for f in doc["findings"]}
    assert doc["suspect_ranks"] == [1]


def test_the_rank_whose_loss_went_nan_first_is_named():
    """live/case_12: rank 1's loss is NaN at step 8, rank 0's a step later (through the all-reduce); the two ranks'
    records of step 8 are glued into one physical line ('... 6.1 ms[rank 1] step 8 | loss nan ...')."""
    doc, _ = _run("live", {"file": "case_12.log"})
    nan = next(f for f in doc["findings"] if f["kind"] == "nan_loss")
    assert (nan["rank"], nan["facts"]["nan_first_step"]) == (1, 8)


def test_a_failure_the_launcher_restarted_past_is_a_warning():
    """round6/live/case_26: torchrun --max-restarts 1; rank 1 raises at step 5, the agent logs 'failed (exitcode:
    1)' and restarts the workers, which train to step 20 and finish (the job exits 0). The exception is kept, as a
    warning that the job survived; case_27, the same fault whose restart hangs until an outer timeout, stays an
    error."""
    doc, code = _run("../round6/live", {"file": "case_26.log"})
    assert code == 0 and doc["status"] == "warn"
    exc = next(f for f in doc["findings"] if f["kind"] == "python_exception")
    assert exc["severity"] == "warning" and exc["facts"]["recovered_by_restart"] is True
    doc, code = _run("../round6/live", {"file": "case_27.log"})
    assert code != 0
    assert not any(f["facts"].get("recovered_by_restart") for f in doc["findings"])
