"""Tiny GPT-2 pretraining with the HF Trainer on random tokens (CPU / gloo)."""
import os, signal, multiprocessing
import torch
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments, TrainerCallback

FAULT = os.environ.get("FAULT", "")
FSTEP = int(os.environ.get("FAULT_STEP", "10"))
FRANK = int(os.environ.get("FAULT_RANK", "1"))
RANK = int(os.environ.get("RANK", "0"))

class RandomTokens(Dataset):
    def __init__(self, n, seqlen=32, vocab=128):
        g = torch.Generator().manual_seed(1234)
        # a little structure so the loss goes down: repeated motifs
        base = torch.randint(0, vocab, (16, seqlen), generator=g)
        self.data = base[torch.randint(0, 16, (n,), generator=g)]
    def __len__(self): return len(self.data)
    def __getitem__(self, i):
        x = self.data[i]
        return {"input_ids": x, "labels": x.clone()}

class FaultyTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, **kw):
        out = super().compute_loss(model, inputs, return_outputs=return_outputs, **kw)
        loss = out[0] if return_outputs else out
        step = self.state.global_step + 1   # the optimizer step this batch belongs to
        if FAULT == "nan_loss" and step == FSTEP:
            loss = loss * float("nan")
        elif FAULT == "spike" and step == FSTEP:
            loss = loss * 20
        elif FAULT == "exception" and step == FSTEP and RANK == FRANK:
            raise ValueError(f"Bad sample in batch: token id out of range at step {step}")
        elif FAULT == "kill_worker" and step == FSTEP and RANK == FRANK:
            kids = multiprocessing.active_children()
            if kids:
                os.kill(kids[0].pid, signal.SIGKILL)
        elif FAULT in ("SIGKILL", "SIGABRT", "SIGSEGV") and step == FSTEP and RANK == FRANK:
            os.kill(os.getpid(), getattr(signal, FAULT))
        return (loss, out[1]) if return_outputs else loss

def main():
    cfg = GPT2Config(vocab_size=128, n_positions=32, n_embd=32, n_layer=1, n_head=2)
    model = GPT2LMHeadModel(cfg)
    args = TrainingArguments(
        output_dir="/tmp/h4_hf_out",
        per_device_train_batch_size=4,
        max_steps=int(os.environ.get("STEPS", "30")),
        learning_rate=5e-3,
        warmup_steps=3,
        logging_steps=int(os.environ.get("LOG_STEPS", "1")),
        disable_tqdm=os.environ.get("NO_TQDM", "0") == "1",
        logging_nan_inf_filter=os.environ.get("NAN_FILTER", "1") == "1",
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        ddp_backend="gloo",
        dataloader_num_workers=int(os.environ.get("WORKERS", "0")),
        seed=0,
    )
    trainer = FaultyTrainer(model=model, args=args, train_dataset=RandomTokens(2000))
    trainer.train()

if __name__ == "__main__":
    main()
