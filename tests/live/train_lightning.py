"""Lightning's DDP on CPU, two processes started by Lightning itself (no torchrun), with one fault injected.

``LIVE_FAULT`` (kind), ``LIVE_STEP`` (the global step it fires at), ``LIVE_RANK`` (on which rank; every rank when
unset), ``LIVE_BAR`` (``tqdm``: Lightning's bar with ``train_loss`` in its postfix; ``none``: no bar, rank 0
prints one line per step). There is no launcher summary here: a rank that dies leaves only its peer's gloo error.
"""

import os
import signal

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, TQDMProgressBar
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FAULT = os.environ.get("LIVE_FAULT", "")
AT = int(os.environ.get("LIVE_STEP", "6"))
ON = os.environ.get("LIVE_RANK")
STEPS = int(os.environ.get("LIVE_STEPS", "12"))
BAR = os.environ.get("LIVE_BAR", "tqdm")
torch.set_num_threads(1)


class Regressor(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        mine = ON is None or int(ON) == self.global_rank
        if self.global_step == AT and mine:
            if FAULT in ("sigkill", "sigabrt", "sigsegv"):
                os.kill(os.getpid(), {"sigkill": signal.SIGKILL, "sigabrt": signal.SIGABRT,
                                      "sigsegv": signal.SIGSEGV}[FAULT])
            if FAULT == "exception":
                raise RuntimeError(f"injected failure at batch {batch_idx}")
        if FAULT == "nan_loss" and self.global_step + 1 >= AT:  # from the step printed as AT (counted from 1)
            loss = loss * float("nan")
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


class Lines(Callback):
    """Without a bar: one line per step from rank 0, in the step Lightning counts."""

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.is_global_zero:
            print(f"step {trainer.global_step} train_loss {trainer.callback_metrics['train_loss'].item():.4f}",
                  flush=True)


def main():
    torch.manual_seed(0)
    x = torch.randn(STEPS * 16 + 64, 8)
    y = x[:, :2].sum(1, keepdim=True).tanh()
    data = DataLoader(TensorDataset(x, y), batch_size=8)
    bar = [TQDMProgressBar(refresh_rate=1)] if BAR == "tqdm" else [Lines()]
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_steps=STEPS, logger=False,
                        enable_checkpointing=False, enable_model_summary=False, enable_progress_bar=BAR == "tqdm",
                        callbacks=bar)
    trainer.fit(Regressor(), data)


if __name__ == "__main__":
    main()
