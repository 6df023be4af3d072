"""Values printed as strings: Python's repr of a dict whose numbers are strings.

transformers 5 logs the Trainer's records as ``{'loss': '5.383', 'grad_norm': '1.311', ...}``
(4.x printed the numbers bare). The field reader takes a quoted value when the closing quote
matches the opening one; the real Trainer's output is read in test_real_trainers.py.
"""

from __future__ import annotations

import math

from llmdiag.logs import analyze_paths
from llmdiag.logs.formats import parse_progress


def test_quoted_record_is_read_like_the_bare_one():
    bare = parse_progress("{'loss': 5.383, 'grad_norm': 1.311, 'learning_rate': 0.002, 'epoch': 0.01}")
    quoted = parse_progress("{'loss': '5.383', 'grad_norm': '1.311', 'learning_rate': '0.002', 'epoch': '0.01'}")
    assert quoted and bare
    assert {k: quoted[k] for k in ("loss", "grad_norm", "lr", "epoch")} == {k: bare[k] for k in ("loss", "grad_norm", "lr", "epoch")}
    assert quoted["format"] == "hf-trainer"


def test_quoted_nan_and_double_quotes():
    rec = parse_progress('{"loss": "nan", "grad_norm": "inf", "epoch": "0.5"}')
    assert math.isnan(rec["loss"]) and math.isinf(rec["grad_norm"])


def test_a_quote_that_does_not_close_is_not_a_value():
    assert parse_progress("{'loss': '5.383\", 'epoch': '0.01'}") is None or "loss" not in parse_progress(
        "{'loss': '5.383\", 'epoch': '0.01'}")


def test_a_nan_in_quoted_records_fails_the_run(tmp_path):
    log = tmp_path / "train.log"
    rows = [f"{{'loss': '{'nan' if s >= 40 else f'{5.4 - s / 100:.4g}'}', 'grad_norm': '1.3', "
            f"'learning_rate': '0.002', 'epoch': '{s / 512:.4g}'}}" for s in range(1, 121)]
    log.write_text("\n".join(rows) + "\n")
    doc = analyze_paths([str(log)])
    assert doc["status"] == "fail"
    assert "nan_loss" in {f["kind"] for f in doc["findings"]}
    assert doc["steps_total"] == 120
