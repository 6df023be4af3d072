"""Progress-line layouts of each framework → canonical step records."""

from __future__ import annotations

import pytest

from llmdiag.logs.formats import parse_progress

CASES = [
    (" iteration      100/  500000 | consumed samples          3200 | elapsed time per iteration (ms): 1234.5 | "
     "learning rate 1.000E-04 | global batch size    32 | lm loss 7.123456E+00 | loss scale 4096.0 | grad norm "
     "1.234 | number of skipped iterations   0 | number of nan iterations   0 |",
     {"iter": 100, "loss": 7.123456, "lr": 1e-4, "loss_scale": 4096.0, "grad_norm": 1.234, "step_time_ms": 1234.5}),
    (" iteration        5/    1000 | elapsed time per iteration (s): 1.5 | lm loss: 2.0E+00 |",
     {"iter": 5, "loss": 2.0, "step_time_ms": 1500.0}),
    (" samples/sec: 12.3 | iteration      100/  320000 | elapsed time per iteration (ms): 1234.5 | learning rate: "
     "1.000E-04 | lm_loss: 7.123E+00 | loss scale: 4096.0 | number of skipped iterations:   0 |",
     {"iter": 100, "loss": 7.123, "loss_scale": 4096.0}),
    ("step:  1  loss: 12.2531  memory: 38.31GiB(40.33%)  wps: 1,234  mfu: 12.34%",
     {"step": 1, "loss": 12.2531, "memory_gib": 38.31, "tokens_per_s": 1234.0, "mfu_pct": 12.34}),
    ("Epoch 1: 100%|##########| 50/50 [00:10<00:00, 4.87it/s, v_num=1, train_loss=0.532, val_loss=0.612]",
     {"iter": 100, "loss": 0.532}),  # epoch 1's 50th of 50 batches: the run's 100th
    ("iter 12 step 6: loss 4.2300, iter time: 178.99ms (optimizer.step)",
     {"iter": 12, "step": 6, "loss": 4.23, "step_time_ms": 178.99, "optimizer_step": True}),
    ("iter 0: loss 4.0169, time 7998.60ms, mfu -100.00%", {"iter": 0, "loss": 4.0169, "mfu_pct": -100.0}),
    ('{"step": 5, "train/loss": 2.5, "train/learning_rate": 0.001}', {"step": 5, "loss": 2.5, "lr": 0.001}),
    ("{'loss': 0.0797, 'grad_norm': 2.54, 'learning_rate': 0.0001, 'epoch': 0.75}",
     {"loss": 0.0797, "grad_norm": 2.54, "epoch": 0.75}),
    ("epoch 0 step 100 loss 2.34 lr 1e-05", {"step": 100, "loss": 2.34, "lr": 1e-5}),
    # a running average printed before the step's own loss is not the step's loss ...
    ("step=10 avg_loss=2.31 loss=2.95 lr=1e-4", {"step": 10, "loss": 2.95, "lr": 1e-4}),
    ("Step 5: avg loss: 1.20, loss: 3.30", {"step": 5, "loss": 3.3}),
    # ... but it is the loss when it is all the line prints (kohya's tqdm postfix)
    ("steps:   1%|▋     | 41/3280 [00:50<1:06:54,  1.24s/it, avr_loss=0.113]", {"iter": 41, "loss": 0.113}),
]


@pytest.mark.parametrize("line,expected", CASES, ids=range(len(CASES)))
def test_layouts(line, expected):
    rec = parse_progress(line)
    assert rec is not None and not rec.get("eval")
    for k, v in expected.items():
        assert rec[k] == pytest.approx(v) if isinstance(v, float) else rec[k] == v, k


@pytest.mark.parametrize("line", ["step 250: train loss 1.4543, val loss 1.6219",
                                  "{'eval_loss': 1.2, 'eval_runtime': 3.1, 'epoch': 1.0}"])
def test_eval_lines_are_not_steps(line):
    assert parse_progress(line)["eval"] is True


@pytest.mark.parametrize("line", ["{'train_runtime': 12.3, 'train_samples_per_second': 1.0, 'train_loss': 1.2}",
                                  "node-1:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
                                  "load_balancing_loss: 0.9"])
def test_not_progress(line):
    assert parse_progress(line) is None
