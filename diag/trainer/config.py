"""The trainer's flags (one click declaration, shared by ``llmdiag train``, ``python -m llmdiag.trainer``
and torchrun's workers) and the ``[smoke]`` config section of the smoke-training probe.

The flags live here, in the trainer, rather than in ``commands/``, because torchrun's workers run
``python -m llmdiag.trainer ARGS`` without the ``llmdiag`` group and must accept exactly the same
ones. Importing this module imports no torch.
"""

from __future__ import annotations

import argparse

import click

from llmdiag.config import section, setting
from llmdiag.util.clitypes import FiniteFloatRange
from llmdiag.vocab import Backend

def _inject_error(specs) -> str | None:
    from llmdiag.trainer.inject import InjectError, parse

    for spec in specs or ():
        try:
            parse(spec)
        except InjectError as exc:
            return str(exc)
    return None


@section("smoke", "Smoke training in preflight (probe smoke-train).")
class SmokeSettings:
    enabled: bool = setting(False, "run a short local 2-process CPU training when no cluster process group exists")
    nproc: int = setting(2, "processes of the local run", min=1, max=16)
    steps: int = setting(8, "training steps of the smoke run", min=2, max=1000)
    timeout_s: float = setting(90.0, "bound on the whole smoke run", min=5, max=3600)
    straggler_factor: float = setting(
        3.0, "a rank whose own step time (outside the waits for its peers) exceeds the step's median by this "
        "factor in most steps warns", min=1.0, max=100)
    inject: list[str] = setting([], "faults for a rehearsal, as train --inject (e.g. \"slow@3:rank=1\")",
                                validator=_inject_error)


#: shown by ``llmdiag train --help`` and ``python -m llmdiag.trainer --help``
HELP = ("Minimal reference trainer: a GPT-style decoder under DDP/FSDP, with crash-safe checkpoints, "
        "auto-resume and fault injection. Without a launcher it spawns --nproc workers on 127.0.0.1; "
        "under torchrun it is one worker.")


def options() -> list[click.Option]:
    """The trainer's flags, declared once (name, type with its range, default, help). ``llmdiag
    train``, ``python -m llmdiag.trainer`` (what spawned and torchrun workers run) and the smoke
    probe parse them through these; :func:`to_argv` writes parsed flags back for the workers."""
    from llmdiag.trainer.inject import KINDS

    pos, nonneg = click.IntRange(1), click.IntRange(0)
    pos_f, nonneg_f = FiniteFloatRange(0, min_open=True), FiniteFloatRange(0)
    opt = click.Option
    return [
        # launch
        opt(["--nproc"], type=pos, default=1, help="Workers to spawn on this node (ignored under torchrun)."),
        opt(["--max-restarts"], type=nonneg, default=0,
            help="Restart all workers this many times after a failure (they resume from the last checkpoint)."),
        opt(["--backend"], type=click.Choice(Backend.words()), default=Backend.AUTO.value,
            help="Process-group backend; auto: nccl with GPUs, else gloo."),
        opt(["--device"], type=click.Choice(("auto", "cpu", "cuda")), default="auto",
            help="Where the model runs; auto: cuda when available."),
        opt(["--collective-timeout"], type=pos_f, default=300.0, metavar="S",
            help="Process-group timeout in seconds: a hung rank surfaces as a collective timeout after this."),
        opt(["--threads"], type=pos, default=None, show_default="cores / workers", help="torch CPU threads per worker."),
        # model
        opt(["--layers"], type=pos, default=2, help="Transformer blocks."),
        opt(["--hidden"], type=pos, default=64, help="Hidden size (divisible by --heads)."),
        opt(["--heads"], type=pos, default=2, help="Attention heads."),
        opt(["--vocab"], type=pos, default=257, help="Vocabulary (257 = bytes + end-of-text)."),
        opt(["--seq-len"], type=pos, default=64, help="Tokens per sequence."),
        opt(["--activation-checkpointing"], is_flag=True, help="Recompute blocks in backward."),
        opt(["--fsdp"], is_flag=True, help="FullyShardedDataParallel instead of DDP (CUDA only)."),
        # optimisation
        opt(["--steps"], type=pos, default=50, help="Training steps."),
        opt(["--batch-size"], type=pos, default=8, help="Sequences per rank per step."),
        opt(["--lr"], type=pos_f, default=3e-3, help="Peak learning rate."),
        opt(["--min-lr"], type=nonneg_f, default=3e-4, help="Learning rate at the end of the cosine decay."),
        opt(["--warmup"], type=nonneg, default=5, help="Linear warm-up steps before the cosine decay."),
        opt(["--weight-decay"], type=nonneg_f, default=0.1, help="AdamW weight decay."),
        opt(["--grad-clip"], type=nonneg_f, default=1.0, help="Max gradient norm (0 disables clipping)."),
        opt(["--precision"], type=click.Choice(("fp32", "bf16", "fp16")), default="fp32",
            help="Autocast precision; fp16 uses a GradScaler."),
        opt(["--seed"], type=int, default=0, help="Random seed (model initialisation, data order)."),
        # data, checkpoints, logs, faults
        opt(["--data"], default="synthetic", help="'synthetic' or a token file from `llmdiag prepare-data`."),
        opt(["--checkpoint-dir"], default=None, help="Save here and resume from the newest complete checkpoint."),
        opt(["--checkpoint-every"], type=nonneg, default=10, help="Steps between saves (0: only at the end)."),
        opt(["--keep"], type=pos, default=3, help="Complete checkpoints to keep."),
        opt(["--async-checkpoint"], is_flag=True, help="Write checkpoints in a background thread."),
        opt(["--no-resume"], is_flag=True, help="Start from step 0 even when checkpoints exist."),
        opt(["--log-file"], default=None, help="Append every rank's lines to this file too."),
        opt(["--summary-file"], default=None, help="Rank 0 writes a JSON summary (losses, checksums, step times)."),
        opt(["--inject"], multiple=True, metavar="KIND@STEP[:rank=R][:factor=F]",
            help=f"Fault for rehearsals: {', '.join(KINDS)} (repeatable)."),
    ]


def namespace(params: dict) -> argparse.Namespace:
    """click's parsed values as the attributes the trainer reads (``args.inject`` a list)."""
    return argparse.Namespace(**{k: list(v) if isinstance(v, tuple) else v for k, v in params.items()})


def parse_args(argv: list[str], prog: str = "llmdiag train") -> argparse.Namespace:
    """The trainer's flags parsed from ``argv``; bad flags raise UsageError (one line)."""
    from llmdiag.errors import UsageError

    try:
        ctx = click.Command(prog, params=options()).make_context(prog, list(argv))
    except click.ClickException as exc:
        raise UsageError(exc.format_message()) from None
    return namespace(ctx.params)


def to_argv(args: argparse.Namespace) -> list[str]:
    """``args`` as flags again (what the launcher hands its workers): ``parse_args(to_argv(a)) == a``."""
    out: list[str] = []
    for o in options():
        value, flag = getattr(args, o.name), o.opts[0]
        if o.is_flag:
            out += [flag] if value else []
        elif o.multiple:
            for v in value:
                out += [flag, str(v)]
        elif value is not None:
            out += [flag, repr(value) if isinstance(value, float) else str(value)]
    return out
