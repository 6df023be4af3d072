"""Tiny GPT-2 trained with HF Trainer; faults from faults.py.
env: OUT (output dir), STEPS, LOGSTEPS, SAVESTEPS, NW (dataloader workers), NANFILTER"""
import os, sys, torch
sys.path.insert(0, os.path.dirname(__file__))
import faults
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments, TrainerCallback
import transformers

VOCAB = int(os.environ.get("VOCAB", "512"))
cfg = GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=64, n_layer=2, n_head=4)
torch.manual_seed(0)
model = GPT2LMHeadModel(cfg)

class DS(faults.ToyDataset):
    def __getitem__(self, i):
        x = super().__getitem__(i)
        return {"input_ids": x, "labels": x}

class FaultTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, **kw):
        step = self.state.global_step + 1
        faults.before_backward(step)
        out = model(**inputs)
        loss = faults.on_loss(out.loss, step)
        return (loss, out) if return_outputs else loss

class GradCB(TrainerCallback):
    def __init__(self): self.trainer = None
    def on_pre_optimizer_step(self, args, state, control, **kw):
        m = kw.get("model")
        faults.sanitize_grads(m)

# grad NaN: register hook on the first param
if faults.KIND == "gradnan":
    p0 = next(model.parameters())
    holder = {"t": None}
    def hook(g):
        if holder["t"] is not None and holder["t"].state.global_step + 1 == faults.STEP and faults.my_rank() == faults.FRANK:
            g = g.clone(); g.view(-1)[0] = float("nan"); return g
        return g
    p0.register_hook(hook)

args = TrainingArguments(
    output_dir=os.environ.get("OUT", "/tmp/h12_hf"),
    max_steps=int(os.environ.get("STEPS", "40")),
    per_device_train_batch_size=8,
    learning_rate=3e-3,
    warmup_steps=5,
    logging_steps=int(os.environ.get("LOGSTEPS", "1")),
    save_steps=int(os.environ.get("SAVESTEPS", "100000")),
    save_strategy="steps",
    report_to=[],
    dataloader_num_workers=int(os.environ.get("NW", "0")),
    use_cpu=True,
    logging_nan_inf_filter=os.environ.get("NANFILTER", "0") == "1",
    seed=0,
    **({"ddp_backend": "gloo"} if "WORLD_SIZE" in os.environ else {}),
)
tr = FaultTrainer(model=model, args=args, train_dataset=DS(vocab=VOCAB), callbacks=[GradCB()])
if faults.KIND == "gradnan":
    holder["t"] = tr
tr.train()
if os.environ.get("FINALSAVE") == "1":
    tr.save_model(os.path.join(args.output_dir, "final"))
