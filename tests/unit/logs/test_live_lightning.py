"""Lightning's own output, made by the test: a one-layer model trained on CPU for two epochs of 32 batches (no
hub, no logger), its stdout and stderr captured and read back. The tqdm bar redraws one line per epoch with
'\r'; every redraw is a record and the epoch's count restarts, so the run's position is epoch x 32 + count.
With a NaN injected from global step 12 (the bar's 13th batch) the run fails there; a healthy run with the
rich bar passes with its curve read. Skipped where lightning is not installed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from llmdiag.logs import analyze_paths

pytest.importorskip("torch")
pytest.importorskip("lightning", reason="lightning is not installed (pip install lightning)")

SCRIPT = r'''
import sys, torch, lightning as L
from torch.utils.data import DataLoader, TensorDataset

bar, poison = sys.argv[1], int(sys.argv[2])


class Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(8, 1)

    def training_step(self, batch, i):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        if 0 <= poison <= self.global_step:
            loss = loss * float("nan")
        self.log("train_loss", loss, on_step=True, prog_bar=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


torch.manual_seed(0)
data = DataLoader(TensorDataset(torch.randn(256, 8), torch.randn(256, 1)), batch_size=8)
if bar == "rich":
    from lightning.pytorch.callbacks import RichProgressBar
    callbacks = [RichProgressBar(refresh_rate=1)]
else:
    from lightning.pytorch.callbacks import TQDMProgressBar
    callbacks = [TQDMProgressBar(refresh_rate=1)]
trainer = L.Trainer(max_epochs=2, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                    callbacks=callbacks, log_every_n_steps=1, enable_model_summary=False)
trainer.fit(Tiny(), data)
'''


def _train(tmp_path, bar: str, poison: int) -> str:
    """The run's stdout and stderr in a file, byte for byte (a bar's redraws keep their '\r')."""
    script = tmp_path / "tiny_lightning.py"
    script.write_text(SCRIPT)
    log = tmp_path / f"lightning-{bar}.log"
    with open(log, "wb") as fh:
        out = subprocess.run([sys.executable, str(script), bar, str(poison)], stdout=fh, stderr=subprocess.STDOUT,
                             timeout=300, cwd=tmp_path)
    assert out.returncode == 0, log.read_bytes()[-2000:]
    return str(log)


def test_lightning_tqdm_bar_with_a_nan_fails(tmp_path):
    log = _train(tmp_path, "tqdm", 12)
    # as written, and as a log collector that turned every '\r' into a newline gives it
    flat = tmp_path / "lightning-tqdm-newlines.log"
    with open(log, "rb") as fh:
        flat.write_bytes(fh.read().replace(b"\r\n", b"\n").replace(b"\r", b"\n"))
    for path in (log, str(flat)):
        doc = analyze_paths([path])
        nan = next(f for f in doc["findings"] if f["kind"] == "nan_loss")
        assert doc["status"] == "fail"
        assert nan["step"] == 13 and nan["facts"]["last_finite_step"] == 12, path
        # every step once: the second epoch's records are new steps, a redraw of a count is no new step
        assert doc["metrics"]["last_step"] == 64 and doc["metrics"]["num_steps_with_loss"] == 64, path


def test_lightning_rich_bar_healthy_passes(tmp_path):
    doc = analyze_paths([_train(tmp_path, "rich", -1)])
    assert doc["findings"] == [] and doc["status"] == "pass"
    assert doc["metrics"]["last_step"] == 64  # rich prints the last state of "Epoch 1/1 ━━━ 32/32"
