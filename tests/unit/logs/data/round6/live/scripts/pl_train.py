"""Tiny LM with Lightning. env: BAR=rich|tqdm|none, STRAT=ddp|auto, DEVICES, STEPS, NW, CSV=dir"""
import os, sys, torch, torch.nn as nn
sys.path.insert(0, os.path.dirname(__file__))
import faults
import lightning as L
from lightning.pytorch.callbacks import RichProgressBar, TQDMProgressBar
from lightning.pytorch.loggers import CSVLogger

class LM(L.LightningModule):
    def __init__(self, vocab=512, d=64):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.rnn = nn.GRU(d, d, batch_first=True)
        self.head = nn.Linear(d, vocab)
    def training_step(self, batch, idx):
        step = self.global_step + 1
        faults.before_backward(step)
        x = batch
        h, _ = self.rnn(self.emb(x[:, :-1]))
        loss = nn.functional.cross_entropy(self.head(h).flatten(0, 1), x[:, 1:].flatten())
        loss = faults.on_loss(loss, step)
        self.log("train_loss", loss, prog_bar=True)
        return loss
    def on_after_backward(self):
        faults.after_backward(self, self.global_step + 1)
    def on_before_optimizer_step(self, opt):
        gn = torch.nn.utils.clip_grad_norm_(self.parameters(), 1.0)
        self.log("grad_norm", gn, prog_bar=True)
        faults.sanitize_grads(self)
    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=3e-3)

torch.manual_seed(0)
bar = os.environ.get("BAR", "tqdm")
cbs = []
if bar == "rich":
    cbs.append(RichProgressBar())
elif bar == "tqdm":
    cbs.append(TQDMProgressBar(refresh_rate=1))
loggers = [CSVLogger(os.environ["CSV"], name="run")] if os.environ.get("CSV") else False
trainer = L.Trainer(
    accelerator="cpu",
    devices=int(os.environ.get("DEVICES", "1")),
    strategy=os.environ.get("STRAT", "auto"),
    max_steps=int(os.environ.get("STEPS", "40")),
    log_every_n_steps=1,
    enable_progress_bar=(bar != "none"),
    enable_checkpointing=False,
    logger=loggers,
    callbacks=cbs,
)
dl = torch.utils.data.DataLoader(faults.ToyDataset(), batch_size=8, shuffle=True,
                                 num_workers=int(os.environ.get("NW", "0")))
trainer.fit(LM(), dl)
