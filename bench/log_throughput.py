"""analyze-log throughput and memory, with ``grep -cE`` over the same file run side by side.

Generates (in /tmp, deleted afterwards) a log that is mostly NCCL INFO noise with a progress
line every few lines (20 % of the lines), an NCCL WARN now and then, and a collective
timeout with a traceback at the end. Then, alternating ``--repeat`` times:

- ``grep -cE`` with the analyzer's own prefilter keywords (``analyzer.grep_pattern``),
- the real CLI, ``llmdiag analyze-log FILE -f json -o OUT``, llmdiag byte-compiled first (as
  an installed wheel is),

and prints the median wall time of each, MB/s, their ratio (median and best of the pairs) and
CPU times; then one more CLI run whose peak memory is the largest sum of RSS over its process
tree (it forks a worker per extra core), polled with psutil every 10 ms (apart: the poll costs
a third of a core here), and the same CLI on a larger log (default 2 GB) for peak RSS. The
machine's load average is printed too: on a shared machine, compare the ratio, which both
sides feel alike, rather than raw MB/s; under load, the CPU-time ratio is the steadier one.

``--engines`` adds, alternating with the runs above, the same CLI on the same log from a
"default install": a fresh venv with this checkout's wheel and only its default dependencies
(no ``fast-logs`` extra, so no Hyperscan; built by bench/install_size.py, in the temp dir and
deleted, or reused/kept at ``--default-venv PATH``). It prints the prefilter engine each
install uses (asked in each venv), MB/s of each, and their ratio default/equipped (goal: at
most 1.5x the time, i.e. a speed ratio >= 0.67).

    python bench/log_throughput.py [--mb 500] [--memory-mb 2048] [--repeat 3] [--keep]
                                   [--engines [--default-venv PATH]]

Measured (issue 22, point 6). Quiet machine (load 1), before these changes, source compiled on
every run and the RSS poll in the timed runs: rank 0.94, timestamped 0.75, megatron 0.57,
megatron-prefixed 0.62, megatron-nccl 0.67, hf-trainer 0.42, hf-trainer-quoted 0.39, lightning
0.01. Then on the shared 2-core machine while it was quiet (load 0.6-1.6; ratio = grep time /
analyze time, median of 3 alternated pairs (5 for hf-trainer*), before = commit cdb4423, both
byte-compiled and unpolled; CPU seconds of grep / before / after; the same findings, steps and
candidate lines before and after; 500 MB each):

    shape              ratio before -> after   CPU s grep / before / after
    rank               0.96 -> 1.07            1.03 / 1.71 / 1.55
    timestamped        0.97 -> 1.03            1.01 / 1.70 / 1.61
    megatron           0.75 -> 0.82            0.72 / 1.52 / 1.37
    megatron-prefixed  0.87 -> 0.83            0.75 / 1.34 / 1.41
    megatron-nccl      0.77 -> 0.78            0.69 / 1.44 / 1.41
    nccl-info-heavy    0.68 -> 0.71            0.67 / 1.56 / 1.50
    hf-trainer         0.51 -> 0.48-0.55       0.30 / 0.87 / 0.82-0.88
    hf-trainer-quoted  0.50 -> 0.46            0.29 / 0.85 / 0.90-0.94
    torchrun-ranks     0.27 -> 0.54            0.90 / 4.05 / 2.60
    lightning          0.01 -> 0.03            0.08 / 13.5 / 4.06   (peak RSS 174 MiB; 2 GB: 176 MiB)

(At load 7-17 the same pairs gave torchrun-ranks 0.23 -> 0.38 and ratios that moved by 0.2 with
the load where CPU did not change.) The changes: torchrun-ranks' main process no longer sorts
(file, rank) pairs as bytes per batch (StepStore.note_progress), reads back constant columns as
one value (table.pack) and empty ones without allocating them; a Lightning bar's line (1000 '\r'
redraws, each a step) is read by the C kernel (_fastscan.bars) instead of two Python regex
matches per redraw. hf-trainer's ~0.85 s CPU (unchanged: within noise) is ~0.4 s in the workers
(500 MB at ~1.2 GB/s a core: the template and keyword kernels, reads and copies) and ~0.45 s
fixed in the main process (imports 0.13-0.2 s, replay 0.06-0.08 s, document, redaction and JSON
of its 5000 step rows 0.06 s): ~0.55 s of wall against grep's 0.3 s, at the goal's edge; the
0.42 measured before also paid ~0.1 s CPU for compiling from source and the RSS poll.

Lightning's floor: grep -cE reads its 5243 lines of ~100 KB (5.2 M redraws) at ~6 GB/s, because
it stops at each line's first match, 0.08 s for 500 MB. analyze-log must read every redraw's
loss (a NaN in any one is a finding): start-up alone is 0.17-0.2 s CPU (Python, NumPy, llmdiag's
imports), which caps the ratio at 0.4; the C kernel reads the redraws at ~1.2-1.5 GB/s a core,
and the main process replays 5.2 M rows through duplicate check, step table and detectors at
~100-250 ns a row (0.5-1.3 s). 0.5x is not reachable for this shape; the floor is about 0.1x
(~0.8 s). What stands between 0.03x and it: per physical line, the first redraw is still parsed
in Python to build the kernel's reader (progress_of, bar_reader, the prefix and signature checks,
~0.3-0.5 ms a line, 5243 lines), and the main process's replay of every row.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))

NOISE = [
    "node-{n}:{pid}:{tid} [{d}] NCCL INFO Channel {c:02d}/0 : {d}[{d}] -> {e}[{e}] via P2P/IPC/read",
    "node-{n}:{pid}:{tid} [{d}] NCCL INFO Connected all rings",
    "node-{n}:{pid}:{tid} [{d}] NCCL INFO comm 0x{pid:x} rank {d} nranks 8 cudaDev {d} busId {c}000 - Init COMPLETE",
    "node-{n}:{pid}:{tid} [{d}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.{n}<0>",
    "node-{n}:{pid}:{tid} [{d}] NCCL INFO Using network IB",
    "node-{n}:{pid}:{tid} [{d}] NCCL INFO {c} coll channels, {c} nvls channels, {e} p2p channels, 2 p2p channels per peer",
]
WARN = "node-{n}:{pid}:{tid} [{d}] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to 10.0.0.{e}<{pid}> failed"
END = [
    ("[rank1]:[E ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation timeout: "
     "WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600001 milliseconds "
     "before timing out."),
    "[rank1]: Traceback (most recent call last):",
    '[rank1]:   File "train.py", line 88, in <module>',
    "[rank1]: torch.distributed.DistBackendError: NCCL communicator was aborted on rank 1.",
]


#: progress-line styles (``--style``): the default, a Python-logging timestamp in front,
#: Megatron-LM's padded iteration line, and the same with torchrun's ``--tee`` prefix on every
#: line (``[default7]:`` on the last rank's progress lines, any local rank on the NCCL lines);
#: then shapes of live frameworks' output (``--style all`` runs every one):
#:
#: - ``megatron-nccl``: four unprefixed NCCL INFO ring/channel lines (NCCL_DEBUG=INFO, as NCCL
#:   prints them, ``host:pid:tid [dev] NCCL INFO Channel ...``) for each ``[default0]:`` Megatron line,
#: - ``hf-trainer`` / ``hf-trainer-quoted``: the transformers Trainer's records (4.x numbers,
#:   5.x quoted numbers) written by ``tqdm.write`` into a file that also gets the bar: each record
#:   follows, on its physical line, ten ``\r``-separated bar updates and the bar's clearing,
#: - ``lightning``: Lightning's TQDM bar with ``train_loss`` in its postfix, one ``\r`` segment per
#:   step, a newline only at the end of each epoch (1000 steps),
#: - ``torchrun-ranks``: eight ranks of a DDP loop, every line with torchrun's ``[rankN]:`` prefix,
#:   each rank's progress lines (interleaved across ranks) among the ranks' NCCL INFO lines,
#: - ``nccl-info-heavy``: as ``megatron-nccl``, but each of the four NCCL INFO lines is drawn afresh
#:   (any of 64 hosts, 8 devices, their pids and threads, 32 channels; ``Channel 00/0 : 0[0] -> 1[1]
#:   via P2P/IPC`` and its transports, and one in four NCCL 2.4's cross-node ``Ring 00 : 43 -> 44
#:   [receive] via NET/Socket/0``, whose ``-> 44`` is no return-code chain), so no two blocks repeat.
STYLES = ("rank", "timestamped", "megatron", "megatron-prefixed", "megatron-nccl", "hf-trainer",
          "hf-trainer-quoted", "lightning", "torchrun-ranks", "nccl-info-heavy")

#: the NCCL INFO lines of the megatron-nccl shape: ring/channel set-up of a 2-node job, as NCCL 2.1x-2.2x prints it
NCCL_CHANNEL = [
    "{h}:{pid}:{tid} [{d}] NCCL INFO Channel {c:02d}/{k:02d} :    0   1   2   3   4   5   6   7   8   9  10  11  12  13  14  15",
    "{h}:{pid}:{tid} [{d}] NCCL INFO Channel {c:02d}/0 : {d}[{d}] -> {e}[{e}] via P2P/CUMEM/read",
    "{h}:{pid}:{tid} [{d}] NCCL INFO Channel {c:02d}/0 : {d}[{d}] -> {f}[{e}] [send] via NET/IB/{e}/GDRDMA",
    "{h}:{pid}:{tid} [{d}] NCCL INFO Channel {c:02d}/0 : {f}[{e}] -> {d}[{d}] [receive] via NET/IB/{e}/GDRDMA",
    "{h}:{pid}:{tid} [{d}] NCCL INFO Channel {c:02d}/1 : {d}[{d}] -> {e}[{e}] via P2P/IPC",
    "{h}:{pid}:{tid} [{d}] NCCL INFO Channel {c:02d} : {d}[{d}] -> {e}[{e}] via SHM/direct/direct",
]


def progress_line(style: str, step: int, tail: str, rnd: random.Random) -> str:
    if style == "timestamped":
        t = 1714557600 + step // 4
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))
        return f"{stamp},{rnd.randint(0, 999):03d} - INFO - step={step} {tail}"
    if style in ("megatron", "megatron-nccl", "nccl-info-heavy"):
        return (f" iteration {step:8d}/ 5000000 | consumed samples: {step * 512:12d} | elapsed time per iteration "
                f"(ms): {1500 + rnd.random() * 10:.1f} | learning rate: 1.500E-04 | global batch size:   512 | "
                f"lm loss: {3 + rnd.random() * 0.05:.6E} | loss scale: 65536.0 | grad norm: {1 + rnd.random():.3f} | "
                f"number of skipped iterations:   0 | number of nan iterations:   0 |")
    if style.startswith("hf-trainer"):
        vals = (f"{3 + rnd.random():.4f}", f"{1 + rnd.random():.4f}", f"{2e-4 * (1 - step / 1e7):.6e}",
                f"{step / 5000:.2f}")
        if style == "hf-trainer-quoted":  # transformers 5 prints the values as strings
            vals = tuple(f"'{v}'" for v in vals)
        return "{'loss': %s, 'grad_norm': %s, 'learning_rate': %s, 'epoch': %s}" % vals
    return f"[rank0]: step={step} {tail}"


def _bar(step: int, total: int, prefix: str = "", postfix: str = "") -> str:
    """One tqdm update as tqdm draws it (unicode blocks, 10 columns wide)."""
    frac = step / total
    full, part = divmod(int(frac * 80), 8)
    bar = ("\u2588" * full + (" \u258f\u258e\u258d\u258c\u258b\u258a\u2589"[part] if full < 10 else "")).ljust(10)
    rate = 14.8 + (step % 7) * 0.01
    left = int((total - step) / rate)
    return (f"{prefix}{int(frac * 100):3d}%|{bar}| {step}/{total} [{step // 15 // 60:02d}:{step // 15 % 60:02d}<"
            f"{left // 60:02d}:{left % 60:02d}, {rate:5.2f}it/s{postfix}]")


def shape_lines(style: str, state: dict, noise: list[str], rnd: random.Random, tails: list[str]) -> list[str]:
    """About 5000 lines of ``style`` (a block of the log), continuing from ``state`` (its step)."""
    lines: list[str] = []
    if style == "megatron-nccl":
        for _ in range(1000):
            state["step"] += 1
            lines.append("[default0]:" + progress_line(style, state["step"], "", rnd))
            lines += rnd.sample(state["channel"], 4)
        return lines
    if style == "nccl-info-heavy":
        vias = ("P2P/IPC", "P2P/IPC/read", "P2P/CUMEM/read", "SHM/direct/direct", "NET/IB/0/GDRDMA")
        for _ in range(1000):
            state["step"] += 1
            lines.append("[default0]:" + progress_line(style, state["step"], "", rnd))
            for _ in range(4):
                node, d = rnd.randrange(64), rnd.randrange(8)
                pid = 10000 + node * 8 + d
                head = f"gpu-node-{node:03d}:{pid}:{pid + rnd.randrange(1, 400)} [{d}] NCCL INFO "
                if rnd.random() < 0.25:  # NCCL 2.4: a ring's hop to the next node, global ranks without devices
                    g = node * 8 + d
                    lines.append(head + f"Ring {rnd.randrange(4):02d} : {g} -> {(g + 1) % 512} "
                                        f"[{rnd.choice(('send', 'receive'))}] via NET/Socket/0")
                else:
                    lines.append(head + f"Channel {rnd.randrange(32):02d}/0 : {d}[{d}] -> {(d + 1) % 8}[{(d + 1) % 8}] "
                                        f"via {rnd.choice(vias)}")
        return lines
    if style.startswith("hf-trainer"):
        total = 200000
        for _ in range(1000):
            segs = []
            for _ in range(10):  # logging_steps=10: ten bar updates for each record
                state["step"] += 1
                segs.append("\r" + _bar(state["step"], total))
            width = len(segs[-1]) - 1
            rec = progress_line(style, state["step"], "", rnd)
            lines.append("".join(segs) + "\r" + " " * width + "\r" + rec)
        return lines
    if style == "lightning":
        for _ in range(5):  # an epoch a line: the bar's updates, then the newline tqdm prints at its end
            state["epoch"] = state.get("epoch", -1) + 1
            segs = []
            for s in range(1, 1001):
                state["step"] += 1
                post = f", v_num=0, train_loss={3 + rnd.random() * 0.05:.3f}"
                segs.append("\r" + _bar(s, 1000, f"Epoch {state['epoch']}: ", post))
            lines.append("".join(segs))
        return lines
    if style == "torchrun-ranks":
        for _ in range(250):
            state["step"] += 1
            ranks = list(range(8))
            rnd.shuffle(ranks)  # the ranks print the same step at about the same time, in any order
            for r in ranks:
                lines.append(f"[rank{r}]:step {state['step']} | loss {3 + rnd.random() * 0.05:.4f} | lr 3.0e-04 | "
                             f"grad_norm {1 + rnd.random() * 0.1:.3f} | {41 + rnd.random():.1f} ms/step")
            lines += [f"[rank{rnd.randint(0, 7)}]:" + rnd.choice(noise) for _ in range(12)]
        return lines
    prefixed = style.endswith("-prefixed")
    for r in rnd.choices(range(5), k=5000):
        if r == 0:  # a progress line every five lines on average
            state["step"] += 1
            line = progress_line(style.removesuffix("-prefixed"), state["step"], rnd.choice(tails), rnd)
            lines.append("[default7]:" + line if prefixed else line)
        else:
            line = rnd.choice(noise)
            lines.append(f"[default{r + 2}]:{line}" if prefixed else line)
    return lines


def generate(path: Path, mb: int, seed: int = 0, style: str = "rank") -> int:
    """Write about ``mb`` MiB; returns the byte count."""
    rnd = random.Random(seed)
    noise = [rnd.choice(NOISE).format(n=rnd.randint(1, 64), pid=rnd.randint(1000, 99999), tid=rnd.randint(1000, 99999),
                                      d=rnd.randint(0, 7), e=rnd.randint(0, 7), c=rnd.randint(0, 31))
             for _ in range(20000)]
    warns = [WARN.format(n=rnd.randint(1, 64), pid=rnd.randint(1000, 99999), tid=rnd.randint(1000, 99999),
                         d=rnd.randint(0, 7), e=rnd.randint(0, 7)) for _ in range(100)]
    tails = [f"loss={3.0 + rnd.random() * 0.05:.4f} lr=3.0e-04 grad_norm={1.0 + rnd.random() * 0.1:.3f} "
             f"step_time_ms={41 + rnd.random():.1f} tokens_per_s={12400 + rnd.randint(-100, 100)}" for _ in range(20000)]
    pids = [rnd.randint(1000, 99999) for _ in range(16)]
    state: dict = {"step": 0,
                   "channel": [rnd.choice(NCCL_CHANNEL).format(h=f"gpu-node-{d // 8 + 1:03d}", pid=pids[d], tid=pids[d] + 77,
                                                               d=d % 8, e=(d + 1) % 8, f=(d + 8) % 16, c=c, k=32)
                               for d in range(16) for c in range(32)]}
    target = mb << 20
    written = 0
    with open(path, "w") as fh:
        while written < target:
            lines = shape_lines(style, state, noise, rnd, tails)
            if rnd.random() < 0.02:
                lines.append(rnd.choice(warns))
            block = "\n".join(lines) + "\n"
            fh.write(block)
            written += len(block.encode())
        tail = "\n".join(END).format(seq=state["step"]) + "\n"
        fh.write(tail)
        written += len(tail)
    return written


def llmdiag_argv(python: str | Path = sys.executable) -> list[str]:
    exe = Path(python).with_name("llmdiag")
    return [str(exe)] if exe.exists() else [str(python), "-m", "llmdiag"]


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_analyzer(path: Path, out: Path, argv: list[str] | None = None,
                 env: dict[str, str] | None = None, rss: bool = False) -> tuple[float, float, int, dict]:
    """Wall time, CPU time (its whole process tree) and, with ``rss``, peak RSS (bytes, summed over
    the tree; else 0).

    ``argv`` is the command that runs llmdiag (default: this interpreter's), ``env`` its
    environment (default: this one's). The RSS poll (every 10 ms, the process tree found through
    /proc) costs a third of a core on a machine with hundreds of processes, which grep's side
    does not pay: timed runs go without it, and one more run per log measures the memory."""
    import psutil

    cpu0 = _children_cpu()
    t0 = time.perf_counter()
    proc = subprocess.Popen((argv or llmdiag_argv()) + ["analyze-log", str(path), "-f", "json", "-o", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO, env=env)
    peak = 0
    if rss:
        ps = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                procs = [ps] + ps.children(recursive=True)
                peak = max(peak, sum(p.memory_info().rss for p in procs))
            except psutil.Error:
                pass
            time.sleep(0.01)
    err = proc.communicate()[1].decode()
    wall = time.perf_counter() - t0
    cpu = _children_cpu() - cpu0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"analyze-log failed ({proc.returncode}): {err[-2000:]}")
    doc = json.loads(out.read_text())
    summary = {"steps": doc["metrics"]["num_steps_with_loss"],
               "findings": sorted({f["kind"] for f in doc["findings"]}),
               "candidate_lines": doc["read"]["candidate_lines"]}
    return wall, cpu, peak, summary


def run_grep(path: Path) -> tuple[float, float, str]:
    from llmdiag.logs.analyzer import grep_pattern

    cpu0 = _children_cpu()
    t0 = time.perf_counter()
    r = subprocess.run(["grep", "-cE", grep_pattern(), str(path)], check=False, capture_output=True, text=True,
                       env={**os.environ, "LC_ALL": "C"})
    return time.perf_counter() - t0, _children_cpu() - cpu0, r.stdout.strip()


def engine() -> str:
    from llmdiag.logs import bulk
    from llmdiag.logs.analyzer import prefilter_regex

    rx = prefilter_regex()
    kernel = "C kernel" if bulk._fastscan is not None else "re.split (no C kernel)"
    return type(rx).__module__.split(".")[-1] + "." + type(rx).__name__ + f"; progress lines: {kernel}"


def compile_bytecode(python: str | Path = sys.executable) -> str:
    """Byte-compile that interpreter's llmdiag where it has no bytecode yet, as installing a wheel does.

    An editable install under ``PYTHONDONTWRITEBYTECODE=1`` (this machine's environment) never writes
    ``__pycache__``, so every run would compile some 90 modules from source first (0.1-0.3 s, as much as
    reading 100 MB): a cost of the checkout, not of analyze-log."""
    code = ("import compileall, llmdiag, os; ds = [d for m in ('llmdiag', 'llmdiag.probes', 'llmdiag.reports') "
            "for d in __import__(m, fromlist=['x']).__path__]; "
            "print(all(compileall.compile_dir(d, quiet=1) for d in ds), *ds)")
    r = subprocess.run([str(python), "-c", code], check=False, capture_output=True, text=True)
    return r.stdout.strip() or r.stderr.strip().splitlines()[-1]


def clean_env() -> dict[str, str]:
    """This environment without what would let a venv's python see another install."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def engine_of(python: str | Path, env: dict[str, str] | None = None) -> str:
    """``engine()`` as that interpreter's llmdiag sees it, and where that llmdiag lives."""
    code = (f"import sys; sys.path.insert(0, {str(BENCH)!r}); import llmdiag, log_throughput as b; "
            "print(b.engine() + '; ' + llmdiag.__file__.rsplit('/', 1)[0])")
    r = subprocess.run([str(python), "-I", "-c", code], check=False, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"engine probe failed in {python}: {r.stderr.strip().splitlines()[-1:]}")
    return r.stdout.strip()


def default_install(venv: Path | None, tmp: Path) -> Path:
    """The python of a venv with only the default dependencies: ``venv`` if it has one already,
    else built there (kept) or, without ``venv``, in ``tmp`` (deleted with it)."""
    if venv is not None and (venv / "bin" / "python").exists():
        return venv / "bin" / "python"
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    from install_size import BenchError, build_default_venv

    t0 = time.perf_counter()
    try:
        py = build_default_venv(venv.resolve() if venv is not None else tmp / "default-venv")
    except BenchError as exc:
        raise SystemExit(f"building the default install failed: {exc}") from None
    print(f"default  : venv built in {time.perf_counter() - t0:.0f} s at {py.parent.parent}")
    return py


def median(xs: list[float]) -> float:
    xs = sorted(xs)
    return (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=500)
    ap.add_argument("--memory-mb", type=int, default=2048, help="0 skips the large-log memory run")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--style", choices=STYLES + ("all",), default="rank",
                    help="progress-line format of the generated log; 'all': one log of each, one after another")
    ap.add_argument("--no-fastscan", action="store_true",
                    help="measure the pure-Python progress-line path (what an install without a C compiler gets)")
    ap.add_argument("--engines", action="store_true",
                    help="also run the CLI of a default install (fresh venv, default dependencies only) and "
                         "compare it with this, the equipped one")
    ap.add_argument("--default-venv", type=Path, metavar="PATH",
                    help="with --engines: the default-install venv to reuse (bench/install_size.py --keep-venv), "
                         "or to build there and keep")
    args = ap.parse_args()
    if args.default_venv and not args.engines:
        ap.error("--default-venv needs --engines")
    if args.no_fastscan:
        os.environ["LLMDIAG_NO_FASTSCAN"] = "1"  # read by llmdiag.logs.bulk, here and in the CLI runs
    tmp = Path(tempfile.mkdtemp(prefix="llmdiag-bench-"))
    styles = STYLES if args.style == "all" else (args.style,)
    summary = []
    try:
        d_py = default_install(args.default_venv, tmp) if args.engines else None
        print(f"machine  : {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; prefilter {engine()}")
        print(f"bytecode : {compile_bytecode()}")
        if d_py is not None:
            print(f"engines  : equipped {engine_of(sys.executable)}")
            print(f"           default  {engine_of(d_py, clean_env())}")
        for style in styles:
            summary.append(bench_style(style, args, tmp, d_py))
        if len(summary) > 1:
            print("\nshape              analyze/grep (median, best)  peak RSS  load avg")
            for style, med, best, rss, load in summary:
                print(f"{style:18s} {med:5.2f}  {best:5.2f}{'' if med >= 0.5 else '  BELOW 0.5':11s}"
                      f"        {rss / 2**20:4.0f} MiB  {load:.1f}")
        print(f"load avg : {os.getloadavg()[0]:.1f} at the end")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


def bench_style(style: str, args, tmp: Path, d_py: Path | None) -> tuple:
    """One shape: its log generated, grep and the CLI alternated ``--repeat`` times; the log deleted."""
    log = tmp / f"train-{style}.log"
    size = generate(log, args.mb, style=style)
    os.sync()  # the freshly written log's write-back would otherwise compete with the timed runs
    mb = size / 1e6
    load0 = os.getloadavg()[0]
    g_walls, a_walls, d_walls, g_cpus, a_cpus, d_cpus = [], [], [], [], [], []
    a_rss = 0
    d_out: dict = {}
    for _ in range(args.repeat):
        g_wall, g_c, g_count = run_grep(log)
        a_wall, a_c, rss, a_out = run_analyzer(log, tmp / "out.json")
        g_walls.append(g_wall), a_walls.append(a_wall), g_cpus.append(g_c), a_cpus.append(a_c)
        a_rss = max(a_rss, rss)
        if d_py is not None:
            d_wall, d_c, _rss, d_out = run_analyzer(log, tmp / "out.json", llmdiag_argv(d_py), clean_env())
            d_walls.append(d_wall), d_cpus.append(d_c)
    load = (load0 + os.getloadavg()[0]) / 2
    ratios = [g / a for g, a in zip(g_walls, a_walls)]  # each pair ran back to back: both felt the same load
    g_med, a_med = median(g_walls), median(a_walls)
    print(f"\nlog      : {mb:.0f} MB ({size / 2**20:.0f} MiB), {style} progress lines, {log}")
    print(f"grep -cE : median {g_med:6.2f} s  {mb / g_med:7.1f} MB/s  CPU {median(g_cpus):.2f} s  "
          f"({g_count} matching lines)")
    print(f"analyze  : median {a_med:6.2f} s  {mb / a_med:7.1f} MB/s  CPU {median(a_cpus):.2f} s  "
          f"{a_out}")
    print(f"ratio    : analyze/grep speed median {median(ratios):.2f}, best {max(ratios):.2f} (goal >= 0.5); "
          f"CPU time grep/analyze {median(g_cpus) / median(a_cpus):.2f}; load average {load0:.1f} -> "
          f"{os.getloadavg()[0]:.1f}")
    if d_py is not None:
        d_med = median(d_walls)
        print(f"default  : median {d_med:6.2f} s  {mb / d_med:7.1f} MB/s  CPU {median(d_cpus):.2f} s  "
              f"{'same result' if d_out == a_out else f'DIFFERENT result {d_out}'}")
        ratio = a_med / d_med
        print(f"engines  : default/equipped speed {ratio:.2f} (goal >= 0.67, i.e. <= 1.5x the time: "
              f"{'ok' if ratio >= 1 / 1.5 else 'MISSED'}); time {d_med / a_med:.2f}x; "
              f"default/grep speed {g_med / d_med:.2f}")
    a_rss = max(a_rss, run_analyzer(log, tmp / "out.json", rss=True)[2])
    print(f"memory   : peak RSS {a_rss / 2**20:.0f} MiB (a run of its own, polled)")
    if not args.keep:
        log.unlink()
    if args.memory_mb:
        big = tmp / "big.log"
        size = generate(big, args.memory_mb, seed=1, style=style)
        os.sync()
        b_wall, _b_cpu, b_rss, b_out = run_analyzer(big, tmp / "out.json", rss=True)
        print(f"memory   : {size / 1e6:.0f} MB log in {b_wall:.1f} s ({size / 1e6 / b_wall:.1f} MB/s), "
              f"peak RSS {b_rss / 2**20:.0f} MiB (goal < 300 MB)  {b_out}")
        big.unlink()
    return style, median(ratios), max(ratios), a_rss, load


if __name__ == "__main__":
    main()
