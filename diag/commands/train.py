"""``llmdiag train``: the reference trainer (the same flags as ``python -m llmdiag.trainer``).

The command is declared by the trainer (``diag/trainer/launch.py``, flags in ``config.py``),
because torchrun's workers run ``python -m llmdiag.trainer`` and must accept exactly the same
flags. Exit code 0 when every worker finished, 1 when one failed (injected faults included),
2 on bad flags.
"""

from __future__ import annotations

from llmdiag.trainer.launch import command

train = command("train")
