"""accelerate script: MLP regression, accelerator.print progress (main process only), CPU/gloo."""
import os, sys, time
from datetime import timedelta
import torch, torch.nn as nn
from accelerate import Accelerator, InitProcessGroupKwargs
sys.path.insert(0, os.path.dirname(__file__))
import faults

torch.set_num_threads(1)


def main():
    acc = Accelerator(cpu=True, kwargs_handlers=[InitProcessGroupKwargs(
        backend="gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "20"))))])
    rank = acc.process_index
    torch.manual_seed(0)
    X = torch.randn(2048, 16); Y = X @ torch.randn(16, 1) + 0.1 * torch.randn(2048, 1)
    dl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    model, opt, dl = acc.prepare(model, opt, dl)
    steps = int(os.environ.get("STEPS", "20"))
    step = 0
    acc.print(f"num_processes={acc.num_processes} device={acc.device}")
    for epoch in range(100):
        for xb, yb in dl:
            step += 1
            if step > steps:
                break
            t0 = time.time()
            if faults.before_step(rank, step) == "exit":
                print(f"process {rank}: early exit at step {step}", flush=True)
                return
            loss = nn.functional.mse_loss(model(xb), yb) * faults.loss_factor(rank, step)
            acc.backward(loss)
            opt.step(); opt.zero_grad()
            avg = acc.gather(loss.detach()).mean()
            acc.print(f"epoch {epoch} step {step}: loss {avg.item():.5f} (local {loss.item():.5f}) "
                      f"step_time {1000*(time.time()-t0):.1f}ms")
        if step > steps:
            break
    acc.wait_for_everyone()
    acc.print("done")
    acc.end_training()


if __name__ == "__main__":
    main()
