"""analyze-log throughput and memory, with ``grep -cE`` over the same file run side by side.

Generates (in /tmp, deleted afterwards) a log that is mostly NCCL INFO noise with a progress
line every few lines, then prints MB/s of ``llmdiag analyze-log`` (the analysis in a child
process, so its peak RSS is measured alone), grep's MB/s with the same keyword list, their
ratio, and the peak RSS on a larger log (default 2 GB).

    python bench/log_throughput.py [--mb 500] [--memory-mb 2048] [--keep]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

NOISE = [
    "node-{n}:{pid}:{tid} [{d}] NCCL INFO Channel {c:02d}/0 : {d}[{d}] -> {e}[{e}] via P2P/IPC/read",
    "node-{n}:{pid}:{tid} [{d}] NCCL INFO Connected all rings",
    "node-{n}:{pid}:{tid} [{d}] NCCL INFO comm 0x{pid:x} rank {d} nranks 8 cudaDev {d} busId {c}000 - Init COMPLETE",
    "node-{n}:{pid}:{tid} [{d}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.{n}<0>",
    "node-{n}:{pid}:{tid} [{d}] NCCL INFO Using network IB",
    "node-{n}:{pid}:{tid} [{d}] NCCL INFO {c} coll channels, {c} nvls channels, {e} p2p channels, 2 p2p channels per peer",
]


def generate(path: Path, mb: int, seed: int = 0) -> int:
    rnd = random.Random(seed)
    target = mb << 20
    written = 0
    step = 0
    with open(path, "w") as fh:
        while written < target:
            lines = []
            for _ in range(2000):
                if rnd.random() < 0.2:
                    step += 1
                    lines.append(f"[rank0]: step={step} loss={3.0 + rnd.random() * 0.05:.4f} lr=3.0e-04 "
                                 f"grad_norm={1.0 + rnd.random() * 0.1:.3f} step_time_ms={41 + rnd.random():.1f} "
                                 f"tokens_per_s={12400 + rnd.randint(-100, 100)}")
                else:
                    lines.append(rnd.choice(NOISE).format(n=rnd.randint(1, 64), pid=rnd.randint(1000, 99999),
                                                          tid=rnd.randint(1000, 99999), d=rnd.randint(0, 7),
                                                          e=rnd.randint(0, 7), c=rnd.randint(0, 31)))
            block = "\n".join(lines) + "\n"
            fh.write(block)
            written += len(block)
    return written


def run_analyzer(path: Path) -> tuple[float, int, str]:
    """Wall time and peak RSS (bytes) of analyze-log on ``path`` in a fresh process."""
    code = ("import sys,resource,json; from probes.logs import analyze_paths; d=analyze_paths([sys.argv[1]]);"
            "print(json.dumps({'steps': d['metrics']['num_steps_with_loss'], 'findings': len(d['findings'])}))")
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO)}, check=True)
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return wall, rss, r.stdout.strip()


def run_grep(path: Path) -> tuple[float, str]:
    from probes.logs.analyzer import grep_pattern

    t0 = time.perf_counter()
    r = subprocess.run(["grep", "-cE", grep_pattern(), str(path)], capture_output=True, text=True,
                       env={**os.environ, "LC_ALL": "C"})
    return time.perf_counter() - t0, r.stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=500)
    ap.add_argument("--memory-mb", type=int, default=2048)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="llmdiag-bench-"))
    try:
        log = tmp / "train.log"
        size = generate(log, args.mb)
        mb = size / 1e6
        g_wall, g_count = run_grep(log)
        a_wall, a_rss, a_out = run_analyzer(log)
        g_wall2, _ = run_grep(log)  # grep again after: both see a warm page cache
        g_wall = min(g_wall, g_wall2)
        print(f"log: {mb:.0f} MB ({log})")
        print(f"grep -cE : {g_wall:6.2f} s  {mb / g_wall:7.1f} MB/s  ({g_count} matching lines)")
        print(f"analyze  : {a_wall:6.2f} s  {mb / a_wall:7.1f} MB/s  peak RSS {a_rss / 2**20:.0f} MiB  {a_out}")
        print(f"ratio analyze/grep speed: {g_wall / a_wall:.2f} (goal >= 0.5)")
        if args.memory_mb:
            log.unlink()
            big = tmp / "big.log"
            size = generate(big, args.memory_mb, seed=1)
            b_wall, b_rss, b_out = run_analyzer(big)
            print(f"memory   : {size / 1e6:.0f} MB log in {b_wall:.1f} s ({size / 1e6 / b_wall:.1f} MB/s), "
                  f"peak RSS {b_rss / 2**20:.0f} MiB (goal < 300 MB)  {b_out}")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
