"""The trainer's options (one argparse parser, shared by ``llmdiag train``, ``python -m llmdiag.trainer``
and torchrun) and the ``[smoke]`` config section of the smoke-training probe.

argparse rather than click here because the same parser must work inside torchrun's workers,
where only ``python -m llmdiag.trainer ARGS`` runs. Importing this module imports no torch.
"""

from __future__ import annotations

import argparse

from llmdiag.config import Field, register_section

def _inject_error(specs) -> str | None:
    from llmdiag.trainer.inject import InjectError, parse

    for spec in specs or ():
        try:
            parse(spec)
        except InjectError as exc:
            return str(exc)
    return None


register_section(
    "smoke",
    [
        Field("enabled", "bool", False, "run a short local 2-process CPU training when no cluster process group exists"),
        Field("nproc", "int", 2, "processes of the local run", min=1, max=16),
        Field("steps", "int", 8, "training steps of the smoke run", min=2, max=1000),
        Field("timeout_s", "float", 90.0, "bound on the whole smoke run", min=5, max=3600),
        Field("straggler_factor", "float", 3.0, "a rank whose own step time (outside the waits for its peers) exceeds "
              "the step's median by this factor in most steps warns",
              min=1.0, max=100),
        Field("inject", "str_list", [], "faults for a rehearsal, as train --inject (e.g. \"slow@3:rank=1\")",
              validator=_inject_error),
    ],
    "Smoke training in preflight (probe smoke-train).",
)


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def nonneg_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def finite_float(text: str) -> float:
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def positive_float(text: str) -> float:
    value = finite_float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def nonneg_float(text: str) -> float:
    value = finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def build_parser(prog: str = "llmdiag train") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Minimal reference trainer: a GPT-style decoder under DDP/FSDP, with crash-safe "
        "checkpoints, auto-resume and fault injection. Without a launcher it spawns --nproc workers "
        "on 127.0.0.1; under torchrun it is one worker.",
    )
    g = p.add_argument_group("launch")
    g.add_argument("--nproc", type=positive_int, default=1, help="workers to spawn on this node (default 1; ignored under torchrun)")
    g.add_argument("--max-restarts", type=nonneg_int, default=0, help="restart all workers this many times after a failure (they resume from the last checkpoint)")
    g.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto", help="auto: nccl with GPUs, else gloo")
    g.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    g.add_argument("--collective-timeout", type=positive_float, default=300.0, metavar="S",
                   help="process-group timeout in seconds: a hung rank surfaces as a collective timeout after this (default 300)")
    g.add_argument("--threads", type=positive_int, default=None, help="torch CPU threads per worker (default: cores / workers)")
    m = p.add_argument_group("model")
    m.add_argument("--layers", type=positive_int, default=2)
    m.add_argument("--hidden", type=positive_int, default=64)
    m.add_argument("--heads", type=positive_int, default=2)
    m.add_argument("--vocab", type=positive_int, default=257, help="vocabulary (257 = bytes + end-of-text)")
    m.add_argument("--seq-len", type=positive_int, default=64)
    m.add_argument("--activation-checkpointing", action="store_true", help="recompute blocks in backward")
    m.add_argument("--fsdp", action="store_true", help="FullyShardedDataParallel instead of DDP")
    o = p.add_argument_group("optimisation")
    o.add_argument("--steps", type=positive_int, default=50)
    o.add_argument("--batch-size", type=positive_int, default=8, help="sequences per rank per step")
    o.add_argument("--lr", type=positive_float, default=3e-3)
    o.add_argument("--min-lr", type=nonneg_float, default=3e-4)
    o.add_argument("--warmup", type=nonneg_int, default=5, help="linear warm-up steps before the cosine decay")
    o.add_argument("--weight-decay", type=nonneg_float, default=0.1)
    o.add_argument("--grad-clip", type=nonneg_float, default=1.0, help="max gradient norm (0 disables clipping)")
    o.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="fp32", help="fp16 uses a GradScaler")
    o.add_argument("--seed", type=int, default=0)
    d = p.add_argument_group("data, checkpoints, logs, faults")
    d.add_argument("--data", default="synthetic", help="'synthetic' or a token file from `llmdiag prepare-data`")
    d.add_argument("--checkpoint-dir", default=None, help="save here and resume from the newest complete checkpoint")
    d.add_argument("--checkpoint-every", type=nonneg_int, default=10, help="steps between saves (0: only at the end)")
    d.add_argument("--keep", type=positive_int, default=3, help="complete checkpoints to keep")
    d.add_argument("--async-checkpoint", action="store_true", help="write checkpoints in a background thread")
    d.add_argument("--no-resume", action="store_true", help="start from step 0 even when checkpoints exist")
    d.add_argument("--log-file", default=None, help="append every rank's lines to this file too")
    d.add_argument("--summary-file", default=None, help="rank 0 writes a JSON summary (losses, checksums, step times)")
    d.add_argument("--inject", action="append", default=[], metavar="KIND@STEP[:rank=R][:factor=F]",
                   help="fault for rehearsals: nan, spike, slow, hang, crash, oom (repeatable)")
    return p
