"""The real Hugging Face Trainer, with a fault injected, and what it prints read back.

A one-layer GPT-2 built from a config (nothing fetched), 30 steps on CPU, logging every step;
at step 12 a callback fills the embedding with NaN. transformers 5 prints its records with
quoted values (``{'loss': '3.907', 'grad_norm': '0.8679', ...}``) behind tqdm's bar.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from llmdiag.logs import analyze_paths

pytest.importorskip("torch")
pytest.importorskip("transformers")

SCRIPT = """
import sys, torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=32))
data = [{"input_ids": torch.randint(0, 64, (16,)), "labels": torch.randint(0, 64, (16,))} for _ in range(256)]
poison_at = int(sys.argv[2])


class Poison(TrainerCallback):
    def on_step_end(self, args, state, control, model=None, **kw):
        if state.global_step == poison_at:
            with torch.no_grad():
                model.transformer.wte.weight.fill_(float("nan"))


args = TrainingArguments(output_dir=sys.argv[1], max_steps=30, logging_steps=1, per_device_train_batch_size=4,
                         report_to=[], save_strategy="no", use_cpu=True)
Trainer(model=model, args=args, train_dataset=data, callbacks=[Poison()]).train()
"""


def _train(tmp_path, poison_at):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    out = subprocess.run([sys.executable, str(script), str(tmp_path / "out"), str(poison_at)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    log = tmp_path / "train.log"  # one stream, as `python train.py > train.log 2>&1` writes it
    log.write_text(out.stdout)
    assert out.returncode == 0, out.stdout[-2000:]
    return log.read_text(), analyze_paths([str(log)])


def test_trainer_run_with_a_nan_fails_and_its_curve_is_read(tmp_path):
    text, doc = _train(tmp_path, 12)
    assert "{'loss': '" in text or "'loss': " in text  # what this transformers prints
    assert doc["steps_total"] >= 30, doc["steps_total"]
    kinds = {f["kind"] for f in doc["findings"]}
    assert doc["status"] == "fail" and kinds & {"nan_loss", "nan_grad_norm"}, (kinds, text[-1500:])


def test_healthy_trainer_run_passes_with_its_curve(tmp_path):
    _text, doc = _train(tmp_path, 10_000)
    assert doc["steps_total"] >= 30
    assert doc["status"] != "fail", [(f["kind"], f.get("summary"), f.get("facts")) for f in doc["findings"]]
