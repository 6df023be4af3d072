"""Does `llmdiag nccl-bench` add measurement bias? Its busbw against a bare timing loop.

Usage: python bench/nccl_overhead.py [--nproc 2] [--sizes 16M,32M,64M] [-C all] [--reps 5]
                                     [--iters 10] [--warmup 2] [--timeout 900] [--json FILE]
       python bench/nccl_overhead.py --report FILE      (the table of an earlier --json run)

Starts ``--nproc`` gloo ranks on 127.0.0.1 (CPU). In that one process group, for every
collective and size, it alternates ``--reps`` times between
- the tool: ``llmdiag.ncclbench.launch.run_on_group`` (the code path behind `llmdiag nccl-bench`,
  check off as with ``-c 0``; checking happens outside the timed loop anyway), and
- a bare loop written here with plain torch.distributed calls: barrier, ``iters`` calls,
  wall time per call, mean over ranks, the same nccl-tests busbw formula,
swapping which goes first on every repetition so drift and noise do not favour one side.

Printed per collective and size: the median over repetitions of tool busbw / bare busbw
(goal >= 0.97), with the spread. The tool column compared is the form the bare torch call
has: in-place for all_reduce and broadcast (torch's calls are in-place; the tool's
out-of-place column adds a copy), out-of-place for the others.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

ALL = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "sendrecv")
#: nccl-tests' factors, written out again here so the bare side shares no code with the tool.
FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
          "reduce_scatter": lambda n: (n - 1) / n, "all_to_all": lambda n: (n - 1) / n,
          "broadcast": lambda n: 1.0, "sendrecv": lambda n: 1.0}
TOOL_COLUMN = {"all_reduce": "in_place", "broadcast": "in_place"}  # others: out_of_place
GOAL = 0.97


def bare_busbw(name: str, nbytes: int, rank: int, n: int, iters: int, warmup: int) -> float:
    """busbw of ``iters`` plain calls of ``name`` on the default group (same on every rank)."""
    import torch
    import torch.distributed as dist

    elements = nbytes // 4  # float32, the tool's default dtype
    per = elements // n
    if name == "all_reduce":
        buf = torch.ones(elements)
        size, fn = elements * 4, lambda: dist.all_reduce(buf)
    elif name == "broadcast":
        buf = torch.ones(elements)
        size, fn = elements * 4, lambda: dist.broadcast(buf, src=0)
    elif name == "all_gather":
        inp, out = torch.ones(per), torch.empty(per * n)
        size, fn = per * n * 4, lambda: dist.all_gather_into_tensor(out, inp)
    elif name == "reduce_scatter":
        inp, out = torch.ones(per * n), torch.empty(per)
        size, fn = per * n * 4, lambda: dist.reduce_scatter_tensor(out, inp)
    elif name == "all_to_all":
        inp, out = torch.ones(per * n), torch.empty(per * n)
        size, fn = per * n * 4, lambda: dist.all_to_all_single(out, inp)
    elif name == "sendrecv":
        send, recv = torch.ones(elements), torch.empty(elements)

        def fn():
            ops = [dist.P2POp(dist.isend, send, (rank + 1) % n), dist.P2POp(dist.irecv, recv, (rank - 1) % n)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()

        size = elements * 4
    else:
        raise KeyError(name)
    for _ in range(warmup):
        fn()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    mine = (time.perf_counter() - t0) / iters
    times: list = [None] * n
    dist.all_gather_object(times, mine)
    return size / statistics.mean(times) / 1e9 * FACTOR[name](n)


def tool_busbw(name: str, nbytes: int, iters: int, warmup: int, timeout_s: float) -> float:
    """The busbw `llmdiag nccl-bench` reports for this one row (same code path as the CLI)."""
    from llmdiag.ncclbench import launch
    from llmdiag.ncclbench.config import BenchSpec

    spec = BenchSpec(collectives=(name,), sizes=(nbytes,), warmup_iters=warmup, iters=iters, check=False,
                     backend="gloo", timeout_s=timeout_s)
    (row,) = launch.run_on_group(spec, None, backend="gloo")["rows"]
    return row[TOOL_COLUMN.get(name, "out_of_place")]["busbw"]


def worker(args) -> None:
    import warnings

    import torch.distributed as dist

    warnings.filterwarnings("ignore")
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['MASTER_PORT']}", rank=rank,
                            world_size=n, timeout=datetime.timedelta(seconds=args.timeout))
    samples = []
    try:
        for name in args.collectives:
            for nbytes in args.sizes:
                for rep in range(args.reps):
                    order = ("tool", "bare") if rep % 2 == 0 else ("bare", "tool")
                    got = {}
                    for side in order:
                        got[side] = (tool_busbw(name, nbytes, args.iters, args.warmup, args.timeout)
                                     if side == "tool" else bare_busbw(name, nbytes, rank, n, args.iters,
                                                                       args.warmup))
                    samples.append({"collective": name, "size": nbytes, "rep": rep, **got})
    finally:
        dist.destroy_process_group()
    if rank == 0:
        Path(args.out).write_text(json.dumps(samples))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_sizes(ap: argparse.ArgumentParser, text: str) -> list[int]:
    from llmdiag.ncclbench.sizes import parse_size

    try:
        sizes = [parse_size(s) for s in text.split(",") if s.strip()]
    except ValueError as exc:
        ap.error(f"--sizes: {exc}")  # exit 2
    if not sizes or min(sizes) < 16 << 20:
        ap.error(f"--sizes: the comparison is defined at 16M and above, got {text!r}")
    return sizes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--sizes", default="16M,32M,64M")
    ap.add_argument("-C", "--collective", action="append", choices=ALL + ("all",))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=900.0, help="bound on the whole run (s)")
    ap.add_argument("--json", help="also write the raw samples here")
    ap.add_argument("--report", metavar="JSON", help="print the table of an earlier --json file and exit")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.report:
        try:
            saved = json.loads(Path(args.report).read_text())
        except (OSError, ValueError) as exc:
            ap.error(f"--report: cannot read {args.report}: {exc}")
        report(saved["samples"], saved["meta"])
        return
    args.sizes = parse_sizes(ap, args.sizes)
    picked = args.collective or ["all"]
    args.collectives = list(ALL) if "all" in picked else list(dict.fromkeys(picked))
    if args.nproc < 2 or args.reps < 1 or args.iters < 1 or args.warmup < 0:
        ap.error("need --nproc >= 2, --reps >= 1, --iters >= 1, --warmup >= 0")
    if args.worker:
        worker(args)
        return
    run(args)


def run(args) -> None:
    port = free_port()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="nccl-overhead-") as tmp:
        out = Path(tmp) / "samples.json"
        argv = [sys.executable, __file__, "--worker", "--out", str(out), "--nproc", str(args.nproc),
                "--sizes", ",".join(str(s) for s in args.sizes), "--reps", str(args.reps), "--iters", str(args.iters),
                "--warmup", str(args.warmup), "--timeout", str(args.timeout)]
        for c in args.collectives:
            argv += ["-C", c]
        procs = []
        for r in range(args.nproc):
            env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(args.nproc), MASTER_PORT=str(port),
                       GLOO_SOCKET_IFNAME=os.environ.get("GLOO_SOCKET_IFNAME", "lo"))
            procs.append(subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL))
        try:
            wait(procs, started + args.timeout + 30)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        samples = json.loads(out.read_text())
    meta = {"nproc": args.nproc, "reps": args.reps, "iters": args.iters, "warmup": args.warmup,
            "wall_s": time.monotonic() - started}
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "samples": samples}, indent=1))
    report(samples, meta)


def wait(procs: list[subprocess.Popen], deadline: float) -> None:
    """Until every rank is done; the first failure or the deadline ends the run (exit 3)."""
    while True:
        codes = [p.poll() for p in procs]
        bad = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
        if bad:
            print(f"nccl_overhead: rank {bad[0][0]} exited with {bad[0][1]}", file=sys.stderr)
            sys.exit(3)
        if all(c == 0 for c in codes):
            return
        if time.monotonic() > deadline:
            print("nccl_overhead: no result before the deadline (--timeout); a rank is stuck", file=sys.stderr)
            sys.exit(3)
        time.sleep(0.1)


def report(samples: list[dict], meta: dict) -> None:
    print(f"# nccl-bench overhead: gloo on CPU, {meta['nproc']} ranks, {meta['reps']} alternating repetitions, "
          f"{meta['iters']} timed + {meta['warmup']} warm-up iterations each; wall {meta['wall_s']:.0f} s")
    print(f"# {'collective':<15}{'size (B)':>12}{'tool busbw':>12}{'bare busbw':>12}{'ratio':>8}"
          f"{'min':>7}{'max':>7}  (busbw in GB/s, medians; goal ratio >= {GOAL})")
    names = list(dict.fromkeys(s["collective"] for s in samples))
    sizes = sorted({s["size"] for s in samples})

    def ratios(rows):
        return [s["tool"] / s["bare"] for s in rows]

    for name in names:
        for size in sizes:
            rows = [s for s in samples if s["collective"] == name and s["size"] == size]
            r = ratios(rows)
            ratio = statistics.median(r)
            print(f"  {name:<15}{size:>12}{statistics.median(s['tool'] for s in rows):>12.3f}"
                  f"{statistics.median(s['bare'] for s in rows):>12.3f}{ratio:>8.3f}{min(r):>7.3f}{max(r):>7.3f}"
                  f"  {'OK' if ratio >= GOAL else 'BELOW GOAL'}")
    print("# pooled over sizes (median ratio):  "
          + "  ".join(f"{n} {statistics.median(ratios([s for s in samples if s['collective'] == n])):.3f}"
                      for n in names))
    allr = ratios(samples)
    geo = math.exp(statistics.mean(math.log(r) for r in allr))
    first = [statistics.median(ratios([s for s in samples if s["rep"] % 2 == k])) for k in (0, 1)]
    print(f"# all {len(allr)} pairs: median ratio {statistics.median(allr):.3f}, geometric mean {geo:.3f}; "
          f"tool measured first {first[0]:.3f}, bare loop first {first[1]:.3f} (the alternation cancels this)")


if __name__ == "__main__":
    main()
