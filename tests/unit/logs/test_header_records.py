"""Records whose counter stands alone on a line and whose fields follow, one per line (issue 22, point 2).

Composer's ConsoleLogger prints ``[batch=N/M]:`` and then ``\\t Train <name>: <value>`` for every metric (the
layout of its own PR output, mosaicml/composer#1884); OLMo prints ``[step=N/M,epoch=E]`` with tab-separated
prefixes and ``    train/CrossEntropyLoss=...`` below it. Metric names carry namespaces (``loss/train/total``,
``optim/total_grad_norm``, verl's ``actor/grad_norm``): their family comes from the name's last part. A counter
at the head of every line (verl's ``step:12 - ...``) is the record's step, not a prefix to strip.
"""

from __future__ import annotations

import math

import pytest

from llmdiag.logs import analyze_paths
from llmdiag.logs.formats import counter_header, header_piece, parse_progress

COMPOSER_METRICS = [
    "epoch: 0", "trainer/global_step: {g}", "trainer/batch_idx: {g}", "memory/alloc_requests: 38873",
    "memory/allocated_mem: 2666514032128", "memory/reserved_mem: 31037849600", "memory/alloc_retries: 5",
    "trainer/device_train_microbatch_size: 1", "loss/train/total: {loss}",
    "metrics/train/LanguageCrossEntropy: {loss}", "metrics/train/Perplexity: 172309.0625",
    "throughput/batches_per_sec: 0.0503", "throughput/device/tokens_per_sec: 412.3778",
    "throughput/device/mfu: 0.2489", "wall_clock/train: 19.8653", "wall_clock/total: 19.8653",
    "lr-DecoupledAdamW/group0: 0.0000",
]


def composer_log(n: int, nan_from: int | None = None, epoch_prefix: bool = False) -> str:
    out = []
    for b in range(1, n + 1):
        loss = "nan" if nan_from is not None and b >= nan_from else f"{12.057 - b * 0.05:.4f}"
        out.append(f"[epoch=1][batch={b}/{n}]:" if epoch_prefix else f"[batch={b}/{n}]:")
        out += ["\t Train " + m.format(g=b - 1, loss=loss) for m in COMPOSER_METRICS]
        if b % 10 == 0:
            out.append("[Eval batch=1/32] Eval on eval data")
    return "\n".join(out) + "\n"


def olmo_log(n: int, nan_at: int | None = None) -> str:
    out = []
    for s in range(1, n + 1):
        loss = "nan" if s == nan_at else f"{7.1 - s * 0.02:.4f}"
        out.append(f"2026-12-01 10:00:{s % 60:02d}.000\tnode0:0\tolmo.train:816\tINFO\t[step={s}/739,328,epoch=0]")
        out += [f"    train/CrossEntropyLoss={loss}", "    train/Perplexity=1200.5", "    optim/total_grad_norm=1.1",
                "    throughput/device/tokens_per_second=9000.0"]
    return "\n".join(out) + "\n"


def _doc(tmp_path, text: str, name: str = "train.log") -> dict:
    p = tmp_path / name
    p.write_text(text)
    return analyze_paths([str(p)])


@pytest.mark.parametrize("line,want", [
    ("[batch=12/100]:", {"step": 12}),
    ("[epoch=1][batch=12/100]:", {"step": 12, "epoch": 1}),
    ("[step=10/739,328,epoch=0]", {"step": 10, "epoch": 0}),
    ("=== Step 7 ===", {"step": 7}),
    ("iteration 5/100", {"iter": 5}),
])
def test_a_counter_alone_opens_a_record(line, want):
    got = counter_header(line)
    assert got is not None and got["open"] and {k: got[k] for k in want} == want


@pytest.mark.parametrize("line", ["Epoch 3", "Saving checkpoint at step 10", "step 10 loss 3.2",
                                  "[Eval batch=1/320] Eval on eval data", "batch size: 8"])
def test_other_lines_open_none(line):
    assert counter_header(line) is None


def test_pieces_by_family():
    assert header_piece("\t Train loss/train/total: 12.06") == {"loss": 12.06}
    assert header_piece("    optim/total_grad_norm=1.1") == {"grad_norm": 1.1}
    assert header_piece("\t Train time/batch: 0") == {}  # a piece the vocabulary does not name: the record goes on
    assert header_piece("  val/loss: 3.2") == {"val_loss": 3.2}
    assert header_piece("Traceback (most recent call last):") is None  # the record ends


def test_composer_curve_and_its_nan(tmp_path):
    doc = _doc(tmp_path, composer_log(40, nan_from=31))
    assert doc["metrics"]["num_steps_with_loss"] == 40
    nan = [f for f in doc["findings"] if f["kind"] == "nan_loss"]
    assert nan and nan[0]["facts"]["nan_first_step"] == 31
    assert doc["status"] == "fail"


def test_composer_healthy_and_older_epoch_header(tmp_path):
    doc = _doc(tmp_path, composer_log(40, epoch_prefix=True))
    assert doc["status"] == "pass" and doc["findings"] == []
    assert doc["metrics"]["num_steps_with_loss"] == 40
    assert doc["metrics"]["loss_last"] == pytest.approx(12.057 - 40 * 0.05)


def test_olmo_nan_at_its_step(tmp_path):
    doc = _doc(tmp_path, olmo_log(50, nan_at=25))
    nan = [f for f in doc["findings"] if f["kind"] == "nan_loss"]
    assert nan and nan[0]["facts"]["nan_first_step"] == 25
    assert doc["metrics"]["num_steps_with_loss"] == 50


def test_a_counter_at_the_head_of_every_line_is_no_prefix(tmp_path):
    rows = [f"step:{s} - actor/pg_loss:{'nan' if s >= 40 else f'{0.5 - s / 1000:.4f}'} - actor/grad_norm:0.5 - "
            f"critic/score/mean:0.1 - timing_s/step:12.3" for s in range(1, 61)]
    doc = _doc(tmp_path, "\n".join(rows) + "\n")
    nan = [f for f in doc["findings"] if f["kind"] == "nan_loss"]
    assert nan and nan[0]["facts"]["nan_first_step"] == 40


def test_namespaced_fields_outside_evaluation():
    rec = parse_progress("step:1 - actor/pg_loss:5.97 - actor/grad_norm:0.5 - eval/grad_norm:9 - timing_s/step:12.3")
    assert (rec["step"], rec["loss"], rec["grad_norm"]) == (1, 5.97, 0.5)
    assert math.isnan(parse_progress("step=3 train/CrossEntropyLoss=nan optim/total_grad_norm=1.1")["loss"])
