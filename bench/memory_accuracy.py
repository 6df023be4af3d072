"""Activation estimate vs measurement (saved_tensors_hooks) over the accuracy grid.

Prints the Markdown table of docs/estimate-memory.md and the worst error; the baseline column
is Korthikanti et al.'s closed form, side by side with our estimate.
Run: /work/venv/bin/python bench/memory_accuracy.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from diag.memory.activations import korthikanti  # noqa: E402
from diag.memory.measure import compare, grid  # noqa: E402
from diag.memory.models import ModelSpec  # noqa: E402
from diag.memory.plan import Plan  # noqa: E402


def main() -> None:
    t0 = time.perf_counter()
    worst = worst_paper = 0.0
    print("| s | b | h | a | t | attention | recompute | measured B/layer | estimate | error | paper formula | paper error |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for c in grid():
        measured, est = compare(c)
        m = ModelSpec("g", 2, c["h"], c["a"], 128, 4 * c["h"], gated=False, bias=True, norm="layer", dropout=True)
        paper = korthikanti(m, Plan(dp=1, tp=c["t"], seq_len=c["s"], micro_batch=c["b"], recompute=c["recompute"]))
        if c["attention"] == "flash" and c["recompute"] == "none":  # the paper's fused-attention case is selective
            paper = korthikanti(m, Plan(dp=1, tp=c["t"], seq_len=c["s"], micro_batch=c["b"], recompute="selective"))
        err, perr = (est - measured) / measured * 100, (paper - measured) / measured * 100
        worst, worst_paper = max(worst, abs(err)), max(worst_paper, abs(perr))
        print(f"| {c['s']} | {c['b']} | {c['h']} | {c['a']} | {c['t']} | {c['attention']} | {c['recompute']} "
              f"| {measured:.0f} | {est:.0f} | {err:+.2f}% | {paper:.0f} | {perr:+.2f}% |")
    print(f"\nworst error: estimate {worst:.2f}%, paper formula {worst_paper:.2f}% "
          f"({len(grid())} points, {time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
