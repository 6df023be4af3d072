"""``llmdiag train ARGS``: the reference trainer (same flags as ``python -m llmdiag.trainer``).

The flags are parsed by the trainer's own argparse parser (``diag/trainer/config.py``), because
torchrun workers run ``python -m llmdiag.trainer`` and must accept exactly the same ones.
Exit code 0 when every worker finished, 1 when one failed (injected faults included), 2 on bad flags.
"""

from __future__ import annotations

import click


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                                 "help_option_names": []}, add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def train(args) -> None:
    """Train a small GPT with DDP/FSDP; checkpoints, resume, fault injection (-h for flags)."""
    from llmdiag.trainer.launch import main

    main(list(args), prog="llmdiag train")
