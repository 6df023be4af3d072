"""A plain DDP training loop, the way a hand-written trainer looks, with one fault injected.

Run under torchrun (gloo, CPU). The fault comes from the environment, so the command line stays
the one a user types: ``LIVE_FAULT`` (kind), ``LIVE_STEP`` (at which step), ``LIVE_RANK`` (on
which rank; every rank when unset). Rank 0 prints one progress line per step, nanoGPT-style.
"""

import datetime
import math
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset

FAULT = os.environ.get("LIVE_FAULT", "")
AT = int(os.environ.get("LIVE_STEP", "6"))
ON = os.environ.get("LIVE_RANK")
STEPS = int(os.environ.get("LIVE_STEPS", "12"))
VOCAB, SEQ, HIDDEN = 64, 16, 16
WORKER_SIGNALS = {"worker_kill": signal.SIGKILL, "worker_bus": signal.SIGBUS}
torch.set_num_threads(1)


def mine(rank: int) -> bool:
    return ON is None or int(ON) == rank


class Tokens(Dataset):
    """Random tokens; the worker faults kill the DataLoader worker that loads item ``AT`` (SIGKILL: the OOM
    killer's way; SIGBUS: what a worker gets when its shared-memory batch finds /dev/shm full)."""

    def __init__(self, rank: int):
        self.rank = rank
        self.data = torch.randint(0, VOCAB, (STEPS * 4 + 8, SEQ + 1), generator=torch.Generator().manual_seed(rank))

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        if FAULT in WORKER_SIGNALS and i == AT * 4 and mine(self.rank):
            os.kill(os.getpid(), WORKER_SIGNALS[FAULT])
        return self.data[i]


def main() -> None:
    timeout = datetime.timedelta(seconds=float(os.environ.get("LIVE_PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Sequential(nn.Embedding(VOCAB, HIDDEN), nn.Linear(HIDDEN, VOCAB)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    workers = 1 if FAULT in WORKER_SIGNALS else 0
    loader = iter(DataLoader(Tokens(rank), batch_size=4, num_workers=workers))
    if rank == 0:
        print(f"world size {world}, {sum(p.numel() for p in model.parameters())} parameters", flush=True)
    for step in range(1, STEPS + 1):
        t0 = time.perf_counter()
        batch = next(loader)
        logits = model(batch[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))
        if step == AT and mine(rank):
            if FAULT == "nan_loss":
                loss = loss * float("nan")
            elif FAULT == "spike":
                loss = loss * 40
            elif FAULT == "exception":
                raise RuntimeError(f"injected failure in the data pipeline at step {step}")
            elif FAULT in ("sigkill", "sigabrt", "sigsegv"):
                os.kill(os.getpid(), getattr(signal, FAULT.upper()))
            elif FAULT == "hang":
                time.sleep(float(os.environ.get("LIVE_PG_TIMEOUT", "60")) * 4)
            elif FAULT == "disk_full":
                torch.save(model.state_dict() | {"pad": torch.zeros(1 << 20)},
                           os.path.join(os.environ["LIVE_CKPT_DIR"], f"step{step}.pt"))
        opt.zero_grad()
        loss.backward()
        if FAULT == "nan_grad" and step == AT and mine(rank):
            next(model.parameters()).grad[0, 0] = float("nan")
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if math.isfinite(norm.item()):  # a non-finite norm skips the update, as a loss scaler does
            opt.step()
        dist.all_reduce(loss.detach().clone())
        if rank == 0:
            dt = (time.perf_counter() - t0) * 1000
            print(f"step {step:4d}/{STEPS} | loss {loss.item():.4f} | grad norm {norm.item():.4f} | "
                  f"lr 1.00e-02 | {dt:.1f} ms", flush=True)
    dist.barrier()
    if rank == 0:
        print("training done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
