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

from llmdiag.memory.activations import korthikanti  # noqa: E402
from llmdiag.memory.measure import compare, grid, spec_and_plan  # noqa: E402


def main() -> None:
    t0 = time.perf_counter()
    worst = worst_paper = 0.0
    print("| layer | s | b | h | a | kv | t | attention | recompute | measured B/layer | estimate | error "
          "| paper formula | paper error |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for c in grid():
        measured, est = compare(c)
        err = (est - measured) / measured * 100
        worst = max(worst, abs(err))
        paper_cols = "n/a | n/a"  # the closed form describes the GPT layer only
        if c["arch"] == "gpt":
            m, plan = spec_and_plan(c)
            if c["attention"] == "flash" and c["recompute"] == "none":  # the paper's fused case is "selective"
                plan = plan.replace(recompute="selective")
            paper = korthikanti(m, plan)
            perr = (paper - measured) / measured * 100
            worst_paper = max(worst_paper, abs(perr))
            paper_cols = f"{paper:.0f} | {perr:+.2f}%"
        print(f"| {c['arch']} | {c['s']} | {c['b']} | {c['h']} | {c['a']} | {c.get('kv', c['a'])} | {c['t']} "
              f"| {c['attention']} | {c['recompute']} | {measured:.0f} | {est:.0f} | {err:+.2f}% | {paper_cols} |")
    print(f"\nworst error: estimate {worst:.2f}%, paper formula {worst_paper:.2f}% "
          f"({len(grid())} points, {time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
