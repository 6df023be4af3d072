# Lightning 2.x: small transformer-ish regressor, DDP on CPU with 2 processes
import os, signal, sys
import torch, torch.nn as nn
import lightning as L
from lightning.pytorch.callbacks import RichProgressBar, TQDMProgressBar, ModelCheckpoint, Callback
from torch.utils.data import DataLoader, TensorDataset

FAULT = os.environ.get("FAULT", "")
FSTEP = int(os.environ.get("FAULT_STEP", "10"))
FRANK = int(os.environ.get("FAULT_RANK", "1"))
BAR = os.environ.get("BAR", "tqdm")  # tqdm | rich | none

class Net(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 1))
    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.mse_loss(self.body(x), y)
        step = self.global_step  # 0-based, same as the 'step' Lightning logs
        if FAULT == "nan_loss" and step >= FSTEP:
            loss = loss + float("nan")
        if FAULT == "spike" and step == FSTEP:
            loss = loss * 20
        if self.global_rank == FRANK and step == FSTEP:
            if FAULT in ("SIGKILL", "SIGABRT", "SIGSEGV"):
                os.kill(os.getpid(), getattr(signal, FAULT))
            if FAULT == "exception":
                raise RuntimeError(f"CUDA-free but still broken: bad batch {batch_idx}")
        self.log("train_loss", loss, prog_bar=True, on_step=True, sync_dist=False)
        return loss
    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-2)

class PrintMetrics(Callback):
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.is_global_zero and trainer.global_step % 2 == 0:
            m = trainer.callback_metrics
            print(f"epoch={trainer.current_epoch} global_step={trainer.global_step} train_loss={m['train_loss'].item():.5f}", flush=True)

def main():
    torch.manual_seed(0)
    x = torch.randn(4096, 16); y = (x[:, :4].sum(1, keepdim=True)).tanh() + 0.05 * torch.randn(4096, 1)
    dl = DataLoader(TensorDataset(x, y), batch_size=32, num_workers=int(os.environ.get("WORKERS", "0")))
    cbs = []
    if BAR == "rich": cbs.append(RichProgressBar())
    if BAR == "tqdm": cbs.append(TQDMProgressBar(refresh_rate=1))
    if BAR == "none": cbs.append(PrintMetrics())
    if os.environ.get("CKPT_DIR"):
        cbs.append(ModelCheckpoint(dirpath=os.environ["CKPT_DIR"], every_n_train_steps=int(os.environ.get("CKPT_EVERY", "10")), save_top_k=-1))
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_steps=int(os.environ.get("STEPS", "30")),
                        log_every_n_steps=1, enable_progress_bar=(BAR != "none"), callbacks=cbs,
                        enable_checkpointing=bool(os.environ.get("CKPT_DIR")), logger=False, enable_model_summary=True)
    trainer.fit(Net(), dl)
    if trainer.is_global_zero:
        print("done.")

if __name__ == "__main__":
    main()
