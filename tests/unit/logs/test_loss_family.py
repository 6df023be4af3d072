"""A loss key the vocabulary does not spell is read by family: the one step loss of a record whose other fields
were read ("train iter: 100 loss_net: nan loss_scale: 785.4", DLLogger's "step_loss : 1.63"), never an evaluation
loss, the loss scale, a source location or one of several component losses."""

from __future__ import annotations

import math

import pytest

from llmdiag.logs.formats import parse_progress


@pytest.mark.parametrize("line, loss", [
    ("train iter: 100 loss_net: 0.9443 loss_scale: 785.4200 norm: 21.8862", 0.9443),
    ("Training Iteration: 1785  average_loss : 1.4877  step_loss : 1.6357  learning_rate : 0.0035", 1.6357),
    ("epoch 3 iter 12 | lr 1e-4 | loss_total=2.75", 2.75),
    ("step: 40, lr: 3e-4, NetLoss: 1.25", 1.25),
    ("step 7 lr: 1e-3 running_loss: 0.52", 0.52),  # an average stands for the loss when it is alone
    ("train iter: 100 loss_net: nan loss_scale: 1.0", math.nan),
    # parts printed without their total add up to it; a NaN part makes it NaN
    ("Epoch [1][100/200] lr: 1e-3, loss_cls: 0.5, loss_bbox: 0.25", 0.75),
    ("(step=0012460) Train Loss mse: 0.0097, Train Loss ce: nan, Train Steps/Sec: 0.16,", math.nan),
])
def test_a_loss_of_the_family_is_the_records_loss(line, loss):
    rec = parse_progress(line)
    assert rec is not None
    assert (math.isnan(rec["loss"]) if math.isnan(loss) else rec["loss"] == loss), rec


@pytest.mark.parametrize("line", [
    "step: 40 lr: 3e-4 test_loss: 1.2",  # an evaluation's loss is not a training step's
    "[2023-06-07 22:16:00,018] [INFO] [loss_scaler.py:181:update_scale] Attempted loss scale: 64, reducing to 32",
    "loss_net: 0.5",  # nothing else read on the line: too little to call it a record
])
def test_no_loss_is_guessed(line):
    rec = parse_progress(line)
    assert rec is None or "loss" not in rec or rec.get("eval"), rec
