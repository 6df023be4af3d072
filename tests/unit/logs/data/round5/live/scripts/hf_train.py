"""HF Trainer, tiny GPT-2 from a config, random tokens, CPU/gloo under torchrun. Faults via a callback."""
import os, sys
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments, TrainerCallback
sys.path.insert(0, os.path.dirname(__file__))
import faults

torch.set_num_threads(1)


class RandomTokens(torch.utils.data.Dataset):
    def __len__(self):
        return 4096
    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        ids = torch.randint(0, 256, (32,), generator=g)
        return {"input_ids": ids, "labels": ids.clone()}


class FaultCallback(TrainerCallback):
    def on_step_begin(self, args, state, control, **kw):
        rank = int(os.environ.get("RANK", 0))
        if faults.before_step(rank, state.global_step + 1) == "exit":
            print(f"rank {rank}: stopping early", flush=True)
            sys.exit(0)


class FaultTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, **kw):
        out = super().compute_loss(model, inputs, return_outputs=return_outputs, **kw)
        rank = int(os.environ.get("RANK", 0))
        f = faults.loss_factor(rank, self.state.global_step + 1)
        if f != 1.0:
            out = (out[0] * f, out[1]) if return_outputs else out * f
        return out


def main():
    cfg = GPT2Config(vocab_size=256, n_positions=64, n_embd=32, n_layer=2, n_head=2)
    model = GPT2LMHeadModel(cfg)
    args = TrainingArguments(
        output_dir=os.environ.get("OUT_DIR", "/tmp/h9_hf_out"),
        per_device_train_batch_size=4,
        max_steps=int(os.environ.get("STEPS", "20")),
        logging_steps=int(os.environ.get("LOG_STEPS", "1")),
        learning_rate=1e-3,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        ddp_backend="gloo",
        ddp_timeout=int(os.environ.get("PG_TIMEOUT", "20")),
        disable_tqdm=os.environ.get("TQDM", "0") != "1",
        dataloader_num_workers=0,
        seed=42,
    )
    FaultTrainer(model=model, args=args, train_dataset=RandomTokens(), callbacks=[FaultCallback()]).train()


if __name__ == "__main__":
    main()
