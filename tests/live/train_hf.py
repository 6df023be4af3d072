"""The Hugging Face Trainer on a one-layer GPT-2 built from a config (nothing fetched), with one fault.

Run under torchrun or ``accelerate launch`` (CPU, gloo). Faults come from the environment as in
``train_ddp.py``: ``LIVE_FAULT``, ``LIVE_STEP``, ``LIVE_RANK`` (every rank when unset); ``LIVE_STEPS`` (max_steps, 12),
``LIVE_LOGGING_STEPS`` (1) and ``LIVE_TQDM=0`` (no bar) shape the run.
"""

import os
import signal
import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

FAULT = os.environ.get("LIVE_FAULT", "")
AT = int(os.environ.get("LIVE_STEP", "6"))
ON = os.environ.get("LIVE_RANK")
RANK = int(os.environ.get("RANK", "0"))
MINE = ON is None or int(ON) == RANK
torch.set_num_threads(1)


class Inject(TrainerCallback):
    """Faults that act on the model or the process at the start of step ``AT``."""

    def on_step_begin(self, args, state, control, model=None, **kw):
        step = state.global_step + 1  # the step about to run, as the Trainer numbers its records
        if step != AT or not MINE:
            return
        if FAULT == "nan_loss":
            with torch.no_grad():
                model.transformer.wte.weight.fill_(float("nan"))
        elif FAULT == "nan_grad":  # the loss of this step stays finite, its gradient does not
            model.lm_head.weight.register_hook(lambda g: g * float("nan") if state.global_step + 1 == AT else g)
        elif FAULT == "exception":
            raise RuntimeError(f"injected failure in a callback at step {step}")
        elif FAULT in ("sigkill", "sigabrt", "sigsegv"):
            os.kill(os.getpid(), getattr(signal, FAULT.upper()))


class SpikeTrainer(Trainer):
    def compute_loss(self, model, inputs, *a, **kw):
        loss = super().compute_loss(model, inputs, *a, **kw)
        if FAULT == "spike" and self.state.global_step + 1 == AT:
            loss = loss * 40
        return loss


def main() -> None:
    torch.manual_seed(0)
    config = GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=32)
    model = GPT2LMHeadModel(config)
    g = torch.Generator().manual_seed(0)
    data = [{"input_ids": ids, "labels": ids} for ids in torch.randint(0, 64, (128, 16), generator=g)]
    args = TrainingArguments(output_dir=sys.argv[1], max_steps=int(os.environ.get("LIVE_STEPS", "12")),
                             logging_steps=int(os.environ.get("LIVE_LOGGING_STEPS", "1")), per_device_train_batch_size=4, report_to=[], save_strategy="no",
                             use_cpu=True, dataloader_num_workers=0, disable_tqdm=os.environ.get("LIVE_TQDM") == "0")
    SpikeTrainer(model=model, args=args, train_dataset=data, callbacks=[Inject()]).train()
    if torch.distributed.is_initialized():
        # as torch asks at exit: gloo's threads still alive at interpreter teardown can abort a healthy
        # rank ("terminate called without an active exception", SIGABRT after the last step; seen under load)
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
