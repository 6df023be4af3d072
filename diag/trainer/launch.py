"""Start the trainer: as one worker under torchrun, or spawn ``--nproc`` workers here.

Standalone, each worker is ``python -m llmdiag.trainer ARGS`` with the torchrun environment
(``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR=127.0.0.1``, a free ``MASTER_PORT``).
When a worker fails, the others get a few seconds to fail on their own (their collective
timeout, say), then SIGTERM and SIGKILL; a torchrun-style ``ChildFailedError`` block names the
first failure. With ``--max-restarts N`` the whole group restarts and resumes from the newest
complete checkpoint, as ``torchrun --max-restarts`` does.
"""

from __future__ import annotations

import datetime
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import click

from llmdiag.trainer.config import HELP, namespace, options, to_argv
from llmdiag.trainer.failures import FAILURE_DIR_ENV, failure_times

WORKER_ENV = "LLMDIAG_TRAIN_WORKER"
GRACE_S = 5.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def under_launcher(env) -> bool:
    return "RANK" in env and "WORLD_SIZE" in env


def _emit(text: str, log_file: str | None) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()
    if log_file:
        with open(log_file, "a") as f:
            f.write(text)


def _failure_block(rank: int, code: int, pid: int, when: float, nproc: int) -> str:
    stamp = datetime.datetime.fromtimestamp(when, datetime.timezone.utc).strftime("%Y-%m-%d_%H:%M:%S")
    return (
        "llmdiag.trainer.launch.ChildFailedError:\n"
        "============================================================\n"
        "llmdiag.trainer FAILED\n"
        "------------------------------------------------------------\n"
        "Failures:\n  <NO_OTHER_FAILURES>\n"
        "------------------------------------------------------------\n"
        "Root Cause (first observed failure):\n"
        f"[0]:\n  time      : {stamp}\n  host      : {socket.gethostname()}\n"
        f"  rank      : {rank} (local_rank: {rank})\n  exitcode  : {code} (pid: {pid})\n"
        f"  error_file: <N/A>\n  nproc     : {nproc}\n"
        "============================================================\n"
    )


def spawn_once(argv: list[str], nproc: int, log_file: str | None, restart: int = 0) -> int:
    """One generation of workers; 0 when all succeed, else the first failure's exit code."""
    from llmdiag.util.procs import ChildGroup

    import tempfile

    port = free_port()
    procs = []
    failures = tempfile.mkdtemp(prefix="failures-")  # inside the run's private temp directory
    group = ChildGroup()  # one process group, dies with this process, stopped and reaped as one
    for rank in range(nproc):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(nproc), LOCAL_RANK=str(rank),
                   TORCHELASTIC_RESTART_COUNT=str(restart),
                   LOCAL_WORLD_SIZE=str(nproc), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   **{WORKER_ENV: "1", FAILURE_DIR_ENV: failures})
        procs.append(group.popen([sys.executable, "-m", "llmdiag.trainer", *argv], env=env))
    # one waiter per worker notes when it exited: the first failure is the earliest exit with a
    # non-zero code, not the lowest rank among those a polling loop happens to see together
    exits: dict[int, float] = {}

    def waiter(rank: int, p: subprocess.Popen) -> None:
        p.wait()
        exits[rank] = time.time()

    for rank, p in enumerate(procs):
        threading.Thread(target=waiter, args=(rank, p), daemon=True).start()
    first = None
    try:
        while len(exits) < len(procs):
            if first is None:
                failed = sorted((t, r) for r, t in list(exits.items()) if procs[r].returncode not in (None, 0))
                if failed:
                    t, rank = failed[0]
                    first = (rank, procs[rank].returncode, procs[rank].pid, t)
            elif time.time() - first[3] > GRACE_S:
                for p in procs:
                    if p.poll() is None:
                        p.send_signal(signal.SIGTERM)
                deadline = time.time() + 3
                while len(exits) < len(procs) and time.time() < deadline:
                    time.sleep(0.05)
                for p in procs:
                    if p.poll() is None:
                        p.kill()
            time.sleep(0.05)
    finally:
        group.stop()
        noted = failure_times(failures)
        shutil.rmtree(failures, ignore_errors=True)
    # the earliest noted failure among the ranks that failed (not those stopped by us afterwards)
    failed_ranks = [r for r, p in enumerate(procs) if p.returncode not in (None, 0)]
    candidates = sorted((noted[r], r) for r in failed_ranks if r in noted and (first is None or noted[r] <= first[3]))
    if candidates:
        t, r = candidates[0]
        first = (r, procs[r].returncode, procs[r].pid, t)
    if first is None:
        bad = [(r, p) for r, p in enumerate(procs) if p.returncode != 0]
        if not bad:
            return 0
        first = (bad[0][0], bad[0][1].returncode, bad[0][1].pid, time.time())
    _emit(_failure_block(first[0], first[1], first[2], first[3], nproc), log_file)
    return first[1] if first[1] > 0 else 1


def command(name: str = "train") -> click.Command:
    """The trainer as a click command: ``llmdiag train`` and ``python -m llmdiag.trainer``."""
    return click.Command(name, params=options(), callback=lambda **params: run(namespace(params)), help=HELP,
                         short_help="Minimal reference trainer to rehearse on.",
                         context_settings={"help_option_names": ["-h", "--help"], "show_default": True,
                                           "max_content_width": 100})


def main(argv: list[str] | None = None, prog: str = "python -m llmdiag.trainer") -> None:
    """``python -m llmdiag.trainer ARGS`` (spawned and torchrun workers): bad input is one line, exit 2."""
    from llmdiag.errors import UsageError

    try:
        command(prog).main(args=list(sys.argv[1:] if argv is None else argv), prog_name=prog)
    except UsageError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        sys.exit(2)


def run(args) -> None:
    """Check ``args`` (parsed flags) before any worker starts, then be the worker (under a
    launcher) or spawn ``--nproc`` of them. Bad input raises UsageError: one line, not a
    traceback per worker."""
    from llmdiag.errors import UsageError
    from llmdiag.runner import require_torch

    require_torch("the trainer")
    from llmdiag.trainer import inject

    try:
        for spec in args.inject:
            inject.parse(spec)
    except inject.InjectError as exc:
        raise UsageError(str(exc)) from None
    from llmdiag.trainer.validate import check_args

    problem = check_args(args)
    if problem:
        raise UsageError(problem)
    if args.hidden % args.heads:
        raise UsageError(f"--hidden {args.hidden} is not divisible by --heads {args.heads}")
    if args.fsdp and args.device != "cpu":
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--fsdp needs a CUDA device (torch's FSDP does not run on CPU); use DDP (the default) here")
    elif args.fsdp:
        raise UsageError("--fsdp needs a CUDA device (torch's FSDP does not run on CPU); drop --device cpu or --fsdp")
    if under_launcher(os.environ):
        from llmdiag.trainer.train import run_worker

        code = run_worker(args)
        sys.stdout.flush()
        sys.stderr.flush()
        from llmdiag.util.procs import remove_private_tempdir

        remove_private_tempdir()
        os._exit(code)  # skip interpreter teardown: a peer's dead socket must not hang the exit
    if args.threads is None:
        args.threads = max(1, (os.cpu_count() or 1) // args.nproc)
    argv = to_argv(args)
    code = 0
    for attempt in range(args.max_restarts + 1):
        if attempt:
            _emit(f"llmdiag train: restarting all {args.nproc} workers (restart {attempt}/{args.max_restarts})\n",
                  args.log_file)
        code = spawn_once(argv, args.nproc, args.log_file, attempt)
        if code == 0:
            break
    sys.exit(code)
