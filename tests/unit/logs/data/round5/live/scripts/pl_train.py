"""Lightning: tiny MLP, DDP on CPU (gloo) under torchrun, self.log(prog_bar) + a print of every step."""
import os, sys
from datetime import timedelta
import torch, torch.nn as nn
import lightning as L
from lightning.pytorch.strategies import DDPStrategy
sys.path.insert(0, os.path.dirname(__file__))
import faults

torch.set_num_threads(1)


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1))

    def training_step(self, batch, idx):
        step = self.global_step + 1
        faults.before_step(self.global_rank, step)
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y) * faults.loss_factor(self.global_rank, step)
        self.log("train_loss", loss, prog_bar=True)
        if self.global_rank == 0:
            print(f"global_step={step} train_loss={loss.item():.4f}", flush=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def main():
    torch.manual_seed(0)
    X = torch.randn(4096, 16); Y = X.sum(1, keepdim=True)
    dl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=32)
    tr = L.Trainer(accelerator="cpu", devices=int(os.environ["LOCAL_WORLD_SIZE"]), num_nodes=1,
                   strategy=DDPStrategy(process_group_backend="gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "15")))),
                   max_steps=int(os.environ.get("STEPS", "20")), log_every_n_steps=1, enable_checkpointing=False,
                   logger=False, enable_progress_bar=os.environ.get("BAR", "0") == "1", enable_model_summary=False)
    tr.fit(Model(), dl)


if __name__ == "__main__":
    main()
