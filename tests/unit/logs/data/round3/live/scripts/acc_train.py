"""Custom accelerate loop: tiny Llama on synthetic sequences. Logs via `logging` + accelerator.print."""
import os, signal, logging, math, time, multiprocessing
import torch
from torch.utils.data import DataLoader, Dataset
from accelerate import Accelerator
from accelerate.logging import get_logger
from transformers import LlamaConfig, LlamaForCausalLM
from tqdm.auto import tqdm

logging.basicConfig(format="%(asctime)s - %(levelname)s - %(name)s - %(message)s", datefmt="%m/%d/%Y %H:%M:%S", level=logging.INFO)
logger = get_logger("train")

FAULT = os.environ.get("FAULT", "")
FSTEP = int(os.environ.get("FAULT_STEP", "10"))
FRANK = int(os.environ.get("FAULT_RANK", "1"))

class Seqs(Dataset):
    def __init__(self, n=4000, L=24, V=96):
        g = torch.Generator().manual_seed(5)
        start = torch.randint(0, V, (n, 1), generator=g)
        self.x = (start + torch.arange(L) * torch.randint(1, 4, (n, 1), generator=g)) % V  # arithmetic progressions
    def __len__(self): return len(self.x)
    def __getitem__(self, i): return self.x[i]

def main():
    acc = Accelerator(cpu=True)
    cfg = LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=2, max_position_embeddings=32)
    model = LlamaForCausalLM(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=float(os.environ.get("LR", "3e-3")))
    dl = DataLoader(Seqs(), batch_size=8, shuffle=True, num_workers=int(os.environ.get("WORKERS", "0")))
    model, opt, dl = acc.prepare(model, opt, dl)
    max_steps = int(os.environ.get("STEPS", "30"))
    log_every = int(os.environ.get("LOG_EVERY", "1"))
    logger.info(f"***** Running training *****  num_processes={acc.num_processes} max_steps={max_steps}")
    bar = tqdm(range(max_steps), disable=not acc.is_local_main_process or os.environ.get("NO_BAR") == "1")
    step = 0; t = time.time()
    for batch in dl:
        step += 1
        out = model(input_ids=batch, labels=batch)
        loss = out.loss
        if FAULT == "nan_loss" and step >= FSTEP: loss = loss * float("inf") * 0
        if FAULT == "spike" and step == FSTEP: loss = loss * 20
        if acc.process_index == FRANK and step == FSTEP:
            if FAULT == "exception": raise KeyError(f"missing field 'attention_mask' in batch {step}")
            if FAULT in ("SIGKILL", "SIGABRT", "SIGSEGV"): os.kill(os.getpid(), getattr(signal, FAULT))
            if FAULT == "kill_worker":
                for ch in multiprocessing.active_children(): os.kill(ch.pid, signal.SIGKILL); break
        acc.backward(loss)
        if FAULT == "nan_grad" and step == FSTEP:
            for p in model.parameters():
                p.grad.fill_(float("nan")); break
        gn = acc.clip_grad_norm_(model.parameters(), 1.0)
        if torch.isfinite(gn): opt.step()
        opt.zero_grad()
        bar.update(1)
        if step % log_every == 0:
            l = acc.gather(loss.detach()).mean().item()
            dt = time.time() - t; t = time.time()
            acc.print(f"step={step} loss={l:.4f} grad_norm={gn.item():.4f} tok/s={8*24*acc.num_processes*log_every/dt:.0f}")
        if os.environ.get("SAVE_DIR") and step % int(os.environ.get("SAVE_EVERY", "10")) == 0:
            acc.wait_for_everyone()
            path = os.path.join(os.environ["SAVE_DIR"], f"checkpoint-{step}.pt")
            logger.info(f"saving checkpoint to {path}")
            acc.save({"model": acc.unwrap_model(model).state_dict(), "opt": opt.state_dict(), "step": step}, path)
        if step >= max_steps: break
    bar.close()
    logger.info("training complete")
    acc.end_training()

if __name__ == "__main__":
    main()
