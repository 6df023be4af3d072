# plain torchrun DDP loop, tiny MLP regression, f-string logging
import os, sys, time, signal, math
from datetime import timedelta
import torch, torch.nn as nn, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

FAULT = os.environ.get("FAULT", "")
FSTEP = int(os.environ.get("FAULT_STEP", "15"))
FRANK = int(os.environ.get("FAULT_RANK", "1"))
STEPS = int(os.environ.get("STEPS", "30"))

def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 1)))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(rank)
    W = torch.randn(32, 1, generator=torch.Generator().manual_seed(7))
    if rank == 0:
        print(f"world_size={world} params={sum(p.numel() for p in model.parameters())}", flush=True)
    t0 = time.time()
    for step in range(1, STEPS + 1):
        x = torch.randn(64, 32, generator=g); y = x @ W + 0.1 * torch.randn(64, 1, generator=g)
        loss = nn.functional.mse_loss(model(x), y)
        if FAULT == "nan_loss" and step >= FSTEP:
            loss = loss * float("nan")
        if FAULT == "spike" and step == FSTEP:
            loss = loss * 20
        if rank == FRANK and step == FSTEP:
            if FAULT == "exception":
                raise RuntimeError(f"shape mismatch in batch {step}: expected 64 rows")
            if FAULT in ("SIGKILL", "SIGABRT", "SIGSEGV"):
                os.kill(os.getpid(), getattr(signal, FAULT))
            if FAULT == "hang":
                time.sleep(30)  # other rank waits in allreduce -> gloo timeout
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if FAULT == "nan_grad" and step == FSTEP:
            next(model.parameters()).grad[0, 0] = float("nan")
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if torch.isfinite(gn):
            opt.step()
        elif rank == 0:
            print(f"  !! non-finite grad norm at step {step}, skipping update", flush=True)
        l = loss.detach().clone(); dist.all_reduce(l); l /= world
        if rank == 0:
            dt = (time.time() - t0) * 1000; t0 = time.time()
            print(f"[rank0] step {step:>4}/{STEPS} | loss {l.item():.4f} | grad_norm {gn.item():.3f} | lr {opt.param_groups[0]['lr']:.2e} | {dt:.1f} ms/it", flush=True)
    if rank == 0:
        print("training finished", flush=True)
    dist.destroy_process_group()

if __name__ == "__main__":
    main()
