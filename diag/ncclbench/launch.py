"""Processes and process groups: where the benchmark's ranks come from.

Three ways in:
- **under a launcher** (torchrun, srun, mpirun or plain ``MASTER_ADDR``/``RANK``/``WORLD_SIZE``
  variables; parsed once by :mod:`llmdiag.launcher`): this process is one rank;
- **standalone**: :func:`spawn_local` starts N worker processes on this host (one per local GPU,
  or ``--nproc`` CPU processes) that meet on a free port of 127.0.0.1;
- **an existing group** (the preflight cluster agent's): :func:`run_on_group`.

Every rank ends with the same result dict (rows are combined across ranks inside the
sweep), so every rank can compute the same verdict and exit with the same code.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmdiag.errors import LlmdiagError, UsageError
from llmdiag.ncclbench import failures
from llmdiag.ncclbench.config import BenchSpec, check_world


class BenchFailed(LlmdiagError):
    """A rank crashed or the run timed out: the collective path itself is broken (exit 1).
    ``reason`` is the partial report's verdict (``failed``, ``timed out``, ``peer left``)."""

    exit_code = 1

    def __init__(self, message: str, reason: str = "failed") -> None:
        super().__init__(message)
        self.reason = reason


def cuda_device_count() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - a broken CUDA install means "no GPU" here
        return 0


def resolve_backend(requested: str, gpus: int) -> str:
    """``auto`` → nccl with GPUs, gloo without; an explicit nccl without GPUs is a usage error."""
    if requested == "auto":
        return "nccl" if gpus > 0 else "gloo"
    if requested == "nccl" and gpus == 0:
        raise UsageError("--backend nccl needs a CUDA GPU, and torch sees none (use --backend gloo)")
    return requested


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def run_on_group(spec: BenchSpec, group, *, backend: str, node_name: str | None = None,
                 emit=None) -> dict[str, Any]:
    """The sweep (and pairwise when asked) on an initialised group; the same dict on every rank.
    ``emit`` (rank 0's only, see :mod:`progress`) hears of the world and of each row."""
    import torch
    import torch.distributed as dist

    from llmdiag.ncclbench import pairwise, runner

    rank, n = dist.get_rank(group), dist.get_world_size(group)
    check_world(spec, n)
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
    hosts: list[Any] = [None] * n
    host = node_name or socket.gethostname()
    dist.all_gather_object(hosts, host, group=group)
    started = time.monotonic()
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    if emit is not None:
        from llmdiag.ncclbench.progress import planned_rows

        emit({"world": {"world_size": n, "backend": backend, "device": device_name,
                        "torch_version": str(torch.__version__),
                        "nccl_version": _nccl_version() if backend == "nccl" else None,
                        "hosts": [str(h) for h in hosts], "nodes": len(set(hosts)),
                        "planned_rows": planned_rows(spec, n)}})
    rows = runner.sweep(spec, group, device, rank, n, emit=emit)
    pw = None
    if spec.pairwise:
        if emit is not None:
            emit({"measuring": {"what": "pairwise"}})
        pw = pairwise.measure(group, device, rank, n, nbytes=spec.pairwise_bytes, iters=spec.pairwise_iters,
                              low_fraction=spec.pairwise_low_fraction, samples=spec.pairwise_samples,
                              node_name=host)
    return {
        "world_size": n,
        "backend": backend,
        "device": device_name,
        "torch_version": str(torch.__version__),
        "nccl_version": _nccl_version() if backend == "nccl" else None,
        "hosts": [str(h) for h in hosts],
        "nodes": len(set(hosts)),
        "spec": spec.to_dict(),
        "rows": rows,
        "pairwise": pw,
        "duration_s": time.monotonic() - started,
    }


def _nccl_version() -> str | None:
    try:
        import torch

        v = torch.cuda.nccl.version()
        return ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
    except Exception:  # noqa: BLE001
        return None


def run_rank(spec: BenchSpec, *, rank: int, world_size: int, local_rank: int, master_addr: str,
             master_port: int, backend: str, node_name: str | None = None, emit=None) -> dict[str, Any]:
    """Join the job as ``rank``, run, leave. Rendezvous and every collective are bounded by
    ``spec.timeout_s`` (a dead peer must end the run, not hang it); a collective that fails
    because a peer left or the group's timeout passed is a :class:`BenchFailed` naming that."""
    import torch
    import torch.distributed as dist

    if backend == "nccl":
        torch.cuda.set_device(local_rank)
    timeout = datetime.timedelta(seconds=spec.timeout_s)
    dist.init_process_group(backend, init_method=f"tcp://{master_addr}:{master_port}", rank=rank,
                            world_size=world_size, timeout=timeout)
    try:
        return run_on_group(spec, None, backend=backend, node_name=node_name, emit=emit)
    except RuntimeError as exc:  # torch's DistBackendError / gloo's errors are RuntimeErrors
        kind = failures.collective_failure(exc)
        if kind is None:
            raise
        what = ("a peer left the group (its process or host died, or its network went away)"
                if kind == failures.PEER_LEFT else f"a collective ran past the group's timeout ({spec.timeout_s:g} s)")
        raise BenchFailed(f"rank {rank}: {what}: {failures.first_line(exc)}", reason=kind) from None
    finally:
        with contextlib.suppress(Exception):  # a group whose peers are gone may not close cleanly
            dist.destroy_process_group()


def run_under_launcher(spec: BenchSpec, info, env: Mapping[str, str], *, emit=None,
                       on_limit=None) -> dict[str, Any]:
    """This process is one rank of a job started by torchrun / srun / mpirun / plain variables.
    ``emit`` hears rank 0's progress; ``on_limit`` runs when the whole-run limit stops the rank."""
    if info.problems:
        raise UsageError("launcher variables are inconsistent: " + "; ".join(info.problems))
    if info.rank is None or info.world_size is None:
        raise UsageError(f"{info.kind} launch without RANK/WORLD_SIZE: cannot tell which rank this is")
    if not info.master_addr:
        raise UsageError("MASTER_ADDR is not set: export the rendezvous host (e.g. the first node of the job)")
    local_rank = info.local_rank if info.local_rank is not None else 0
    backend = resolve_backend(spec.backend, cuda_device_count())
    started = time.monotonic()
    stop = whole_run_limit(spec.timeout_s, info.rank, on_limit=on_limit)
    try:
        return run_rank(spec, rank=info.rank, world_size=info.world_size, local_rank=local_rank,
                        master_addr=info.master_addr, master_port=info.master_port or 29500, backend=backend,
                        node_name=env.get("LLMDIAG_NODE_NAME"), emit=emit if info.rank == 0 else None)
    except BenchFailed as exc:
        # Every rank has the same limit: a peer that left as it came is that limit, not a crash.
        if exc.reason == failures.PEER_LEFT and time.monotonic() - started >= 0.9 * spec.timeout_s:
            raise BenchFailed(f"the run did not finish within timeout_s = {spec.timeout_s:g} s (the peers stopped at "
                              f"the same limit): {exc}", reason=failures.TIMED_OUT) from None
        raise
    finally:
        stop.set()


def whole_run_limit(timeout_s: float, rank: int, *, every_s: float = 30.0, exit=os._exit,
                    on_limit=None) -> threading.Event:
    """Bound a launched rank's whole run at ``timeout_s`` (each collective is bounded by the
    process group's timeout, but a slow link makes every one of many collectives slow).

    A watchdog thread says on stderr how long the run has taken (every ``every_s``) and, at the
    limit, says so, runs ``on_limit`` (the partial report), removes the run's private temp
    directory and ends the process with exit code 1 (the main thread is stuck in a collective,
    so only ``os._exit`` ends it, and it runs no ``finally``): a launcher (torchrun, srun) then
    stops the other ranks. Set the returned event when the run is over.
    """
    done = threading.Event()
    start = time.monotonic()

    def watch() -> None:
        while not done.wait(max(0.05, min(every_s, timeout_s - (time.monotonic() - start)))):
            took = time.monotonic() - start
            if took >= timeout_s:
                print(f"llmdiag nccl-bench: rank {rank}: the run did not finish within timeout_s = {timeout_s:g} s "
                      "(a very slow or stuck link or node; `llmdiag nccl-bench --pairwise -e 1M` names it); "
                      "stopping", file=sys.stderr, flush=True)
                from llmdiag.util.procs import remove_private_tempdir

                try:
                    if on_limit is not None:
                        on_limit()
                except Exception as exc:  # noqa: BLE001 - the process ends either way
                    print(f"llmdiag nccl-bench: rank {rank}: the partial report failed: {exc}", file=sys.stderr,
                          flush=True)
                finally:
                    remove_private_tempdir()
                exit(1)
                return
            if rank == 0:
                print(f"llmdiag nccl-bench: still running after {took:.0f} s (limit {timeout_s:g} s)",
                      file=sys.stderr, flush=True)

    threading.Thread(target=watch, name="llmdiag-run-limit", daemon=True).start()
    return done


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    keep = [ln for ln in text if "Warning" not in ln and "warnings.warn" not in ln]
    return "\n".join(keep[-lines:])


def spawn_local(spec: BenchSpec, nproc: int, *, env: Mapping[str, str], emit=None) -> dict[str, Any]:
    """Run ``nproc`` ranks as worker processes on this host; rank 0's result.

    The workers are real processes (``python -m llmdiag.ncclbench.launch``) meeting on a free
    port of 127.0.0.1. One that fails ends the run: the others are killed, and its stderr is
    in the error message. Rank 0 writes its progress records to a file that is read back while
    the run lasts and handed to ``emit`` (so rows measured before Ctrl-C are not lost).
    """
    gpus = cuda_device_count()
    backend = resolve_backend(spec.backend, gpus)
    if backend == "nccl" and nproc > gpus:
        raise UsageError(f"--nproc {nproc} with NCCL needs {nproc} GPUs; torch sees {gpus}")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="llmdiag-nccl-") as tmp:
        tmpdir = Path(tmp)
        spec_file = tmpdir / "spec.json"
        spec_file.write_text(json.dumps(spec.to_dict()))
        from llmdiag.ncclbench.progress import LineFile
        from llmdiag.util.procs import ChildGroup

        stream = LineFile(tmpdir / "progress.jsonl")

        procs = []
        group = ChildGroup()  # one process group, dies with this process, stopped and reaped as one
        for r in range(nproc):
            wenv = dict(env)
            wenv.update(RANK=str(r), WORLD_SIZE=str(nproc), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(nproc),
                        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            # All ranks are on this host: keep gloo on loopback unless the user chose an interface.
            wenv.setdefault("GLOO_SOCKET_IFNAME", "lo")
            wenv["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]),
                                                               wenv.get("PYTHONPATH")]))
            err = open(tmpdir / f"rank{r}.err", "w")  # noqa: SIM115 - closed below
            argv = [sys.executable, "-m", "llmdiag.ncclbench.launch", str(spec_file), str(tmpdir / f"rank{r}.json"),
                    backend] + ([str(stream.path)] if r == 0 else [])
            procs.append((group.popen(argv, env=wenv, stdin=subprocess.DEVNULL, stdout=err, stderr=err), err))
        def relay() -> None:
            for rec in stream.poll():
                if emit is not None:
                    emit(rec)

        try:
            _wait_all(procs, spec.timeout_s + 30, tmpdir, relay)
        finally:
            group.stop()
            for _, err in procs:
                err.close()
            relay()  # what rank 0 wrote before the end, however it ended
        return json.loads((tmpdir / "rank0.json").read_text())


def _wait_all(procs, timeout_s: float, tmpdir: Path, relay=lambda: None) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        relay()
        codes = [p.poll() for p, _ in procs]
        failed = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
        if failed:
            r, code = failed[0]
            if code == 2:
                raise UsageError(_tail(tmpdir / f"rank{r}.err", 3) or f"rank {r} rejected the arguments")
            from llmdiag.ncclbench.failures import describe_exit

            tail = _tail(tmpdir / f"rank{r}.err")
            raise BenchFailed(f"rank {r} of {len(procs)} {describe_exit(code)}" + (f":\n{tail}" if tail else ""))
        if all(c == 0 for c in codes):
            return
        if time.monotonic() > deadline:
            stuck = [r for r, c in enumerate(codes) if c is None]
            raise BenchFailed(f"the run did not finish within {timeout_s:g} s (ranks still running: {stuck}); "
                              "a rank is hung in a collective or the rendezvous", reason="timed out")
        time.sleep(0.05)


def _worker_main(argv: list[str]) -> int:
    """Entry of one spawned rank: spec file, result file, backend[, progress file (rank 0)]."""
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)
    spec_file, out_file, backend, *progress_file = argv
    spec = BenchSpec.from_dict(json.loads(Path(spec_file).read_text()))
    env = os.environ
    from llmdiag.ncclbench.progress import LineFile

    emit = LineFile(Path(progress_file[0])).emit if progress_file else None
    try:
        result = run_rank(spec, rank=int(env["RANK"]), world_size=int(env["WORLD_SIZE"]),
                          local_rank=int(env["LOCAL_RANK"]), master_addr=env["MASTER_ADDR"],
                          master_port=int(env["MASTER_PORT"]), backend=backend,
                          node_name=env.get("LLMDIAG_NODE_NAME"), emit=emit)
    except UsageError as exc:
        print(f"llmdiag: {exc}", file=sys.stderr)
        return 2
    except BenchFailed as exc:
        print(f"llmdiag: {exc}", file=sys.stderr)
        return 1
    Path(out_file).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(_worker_main(sys.argv[1:]))
