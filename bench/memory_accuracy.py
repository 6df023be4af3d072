"""Estimator accuracy: signed errors on published/measured cases, and the CPU-measured activation grid.

1. Cases (``../shared/memory/cases-dev.json`` or the file given as the first argument, same
   format): the estimate of what each case measured, its signed error, its tolerance, and the
   median |error| and share within ±15 % over the measured ones.
2. The loss peak (fp32-upcast and chunked cross-entropy) of a real process, and activations per layer measured on CPU (every distinct saved storage under
   ``saved_tensors_hooks``) against the estimate and Korthikanti et al.'s closed form.
Run: .venv/bin/python bench/memory_accuracy.py [cases.json] [--cases-only]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from llmdiag.memory import cases  # noqa: E402
from llmdiag.memory.activations import korthikanti  # noqa: E402
from llmdiag.memory.measure import (  # noqa: E402
    compare,
    compare_loss,
    compare_sac,
    grid,
    loss_grid,
    sac_grid,
    spec_and_plan,
)

DEFAULT_CASES = Path(os.environ.get("LLMDIAG_MEMORY_CASES") or
                     Path(__file__).resolve().parent.parent.parent / "shared" / "memory" / "cases-dev.json")


def case_table(path: Path) -> None:
    print(f"## Cases ({path})\n")
    print("| case | kind | compared | value | estimate | signed error | tolerance | within |")
    print("|---|---|---|---|---|---|---|---|")
    errs, signed = [], []
    base = cases.load(path)
    for c in base + [v for b in base for v in cases.related_variants(b)]:
        try:
            r = cases.evaluate(c)
        except cases.NotExpressed as exc:
            print(f"| {c['id']} | {c['kind']} | not expressed: {exc} | {c['value']} | - | - | - | - |")
            continue
        err = "-" if r["error"] is None else f"{r['error'] * 100:+.1f}%"
        est = f"{r['verdict']}" if r["value"] == "OOM" else f"{r['estimate']:.4g}"
        print(f"| {r['id']} | {r['kind']} | {r['measure']} | {r['value']} | {est} | {err} | {r['tolerance']} "
              f"| {'yes' if r['ok'] else 'NO'} |")
        if r["error"] is not None and not r["kind"].startswith("analytic"):
            errs.append(abs(r["error"]))
            signed.append(r["error"])
    if errs:
        print(f"\nmeasured cases: {len(errs)}, median |error| {statistics.median(errs) * 100:.1f}%, "
              f"median signed error {statistics.median(signed) * 100:+.1f}%, "
              f"within ±15%: {sum(e <= 0.15 for e in errs)}/{len(errs)}\n")


def grid_table() -> None:
    t0 = time.perf_counter()
    worst = worst_paper = 0.0
    print("## Activations per layer, measured on CPU\n")
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


def loss_table() -> None:
    print("## Loss peak, measured through the allocator (and a warm step's resident-set peak)\n")
    print("| loss | tokens N | vocab V | chunks | allocator bytes | warm RSS | estimate | error | allocator / (N·V) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for c in loss_grid():
        got = compare_loss(c)
        live, rss, est = got["allocator"], got["rss"], got["estimate"]
        print(f"| {c['kind']} | {c['n']} | {c['v']} | {c['chunks'] if c['kind'] == 'chunked' else '-'} | {live:.0f} "
              f"| {rss:.0f} | {est:.0f} | {(est - live) / live * 100:+.1f}% | {live / (c['n'] * c['v']):.2f} |")
    print()


def sac_table() -> None:
    print("## Per-op SAC (torchtitan's policy), bytes kept per Llama layer, measured as process RSS\n")
    print("| s | b | h | a | kv | ffn | measured B/layer | estimate | error |")
    print("|---|---|---|---|---|---|---|---|---|")
    for c in sac_grid():
        got = compare_sac(c)
        measured, est = got["allocator"], got["estimate"]
        print(f"| {c['s']} | {c['b']} | {c['h']} | {c['a']} | {c['kv']} | {c['ffn']} | {measured:.0f} | {est:.0f} "
              f"| {(est - measured) / measured * 100:+.2f}% |")
    print()


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--cases-only"]
    path = Path(args[0]) if args else DEFAULT_CASES
    if path.is_file():
        case_table(path)
    else:
        print(f"(no cases file at {path})\n")
    if "--cases-only" in sys.argv[1:]:
        return
    loss_table()
    sac_table()
    grid_table()


if __name__ == "__main__":
    main()
