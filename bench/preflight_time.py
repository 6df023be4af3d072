"""Wall time of `llmdiag preflight` on this node, against a bare interpreter start side by side.

Usage: python bench/preflight_time.py [--runs 5]
Prints the median of each, the ratio, and the slowest probes (from the JSON durations).
Goal (issue 2): a full single-node preflight in under 5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO)
    return time.perf_counter() - start, proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    base, pre, help_ = [], [], []
    last = ""
    for _ in range(args.runs):
        base.append(timed([sys.executable, "-c", "pass"], env)[0])
        help_.append(timed([sys.executable, "-m", "llmdiag", "--help"], env)[0])
        t, last = timed([sys.executable, "-m", "llmdiag", "preflight", "-f", "json"], env)
        pre.append(t)
    b, h, p = statistics.median(base), statistics.median(help_), statistics.median(pre)
    print(f"python -c pass        : {b:6.3f} s (median of {args.runs})")
    print(f"llmdiag --help        : {h:6.3f} s  ({h / b:.1f}x bare start)")
    print(f"llmdiag preflight     : {p:6.3f} s  ({p / b:.1f}x bare start; goal < 5 s: {'OK' if p < 5 else 'MISSED'})")
    try:
        doc = json.loads(last)
    except json.JSONDecodeError:
        return
    by_probe: dict[str, float] = {}
    for r in doc.get("results", []):
        if r.get("duration_s") is not None:
            by_probe[r["probe"]] = max(by_probe.get(r["probe"], 0.0), r["duration_s"])
    for name, d in sorted(by_probe.items(), key=lambda kv: -kv[1])[:5]:
        print(f"  probe {name:<12} {d:6.3f} s")


if __name__ == "__main__":
    main()
