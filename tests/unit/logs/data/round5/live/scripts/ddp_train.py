"""Plain DDP on CPU/gloo: a tiny transformer LM on random tokens.
STYLE=pipe   -> 'step 12 | loss 3.21 | lr 1.00e-03'
STYLE=logging-> python logging '%(asctime)s %(levelname)s %(name)s: ...'
STYLE=kv     -> 'Epoch 0 iter 12/40: loss=3.2100 grad_norm=0.91 time=12.3ms'"""
import os, sys, time, math, logging
from datetime import timedelta
import torch, torch.nn as nn, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
sys.path.insert(0, os.path.dirname(__file__))
import faults

STYLE = os.environ.get("STYLE", "pipe")
STEPS = int(os.environ.get("STEPS", "20"))
PG_TIMEOUT = int(os.environ.get("PG_TIMEOUT", "20"))
ALL_RANKS_PRINT = os.environ.get("ALL_RANKS_PRINT", "1") == "1"
RANK_TAG = os.environ.get("RANK_TAG", "0") == "1"


class TinyLM(nn.Module):
    def __init__(self, vocab=128, d=32, layers=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(d, vocab)

    def forward(self, x):
        return self.head(self.enc(self.emb(x)))


def main():
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(seconds=PG_TIMEOUT))
    rank, world = dist.get_rank(), dist.get_world_size()
    log = logging.getLogger("train")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stdout)
    say = (lambda m: log.info(m)) if STYLE == "logging" else (lambda m: print(m, flush=True))
    if rank == 0:
        say(f"world_size={world} backend=gloo steps={STEPS} timeout={PG_TIMEOUT}s")
    torch.manual_seed(1234 + rank)
    model = DDP(TinyLM())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 5))
    lossf = nn.CrossEntropyLoss()
    for step in range(1, STEPS + 1):
        t0 = time.time()
        if faults.before_step(rank, step) == "exit":
            say(f"rank {rank}: no more data, leaving the training loop at step {step}")
            return  # exits cleanly without destroy_process_group
        td = (time.time() - t0) * 1000  # "data" time: whatever happened before the batch was ready
        x = torch.randint(0, 128, (8, 16))
        y = torch.roll(x, -1, 1)
        out = model(x)
        loss = lossf(out.view(-1, 128), y.view(-1)) * faults.loss_factor(rank, step)
        opt.zero_grad()
        loss.backward()  # DDP all_reduce of the gradients
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)
        opt.step(); sched.step()
        # a scalar all_reduce, like logging the mean loss across ranks
        l = loss.detach().clone(); dist.all_reduce(l); l /= world
        dt = (time.time() - t0) * 1000
        lr = sched.get_last_lr()[0]
        tag = f"[rank {rank}] " if RANK_TAG else ""
        if rank == 0 or ALL_RANKS_PRINT:
            if STYLE == "pipe":
                say(f"{tag}step {step} | loss {loss.item():.4f} | lr {lr:.2e} | grad_norm {gn.item():.3f} | {dt:.1f} ms")
            elif STYLE == "logging":
                say(f"{tag}step {step}/{STEPS} loss={loss.item():.4f} avg_loss={l.item():.4f} lr={lr:.3e}")
            else:
                say(f"{tag}Epoch 0 iter {step}/{STEPS}: loss={loss.item():.4f} grad_norm={gn.item():.2f} data_time={td:.1f}ms time={dt:.1f}ms")
    dist.barrier()
    if rank == 0:
        say("training finished")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
