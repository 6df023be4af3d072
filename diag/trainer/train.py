"""The training loop of one worker: set up, resume, step, log, checkpoint, summarise.

Log line of every step (CONTRACTS.md), rank-prefixed, to stdout and ``--log-file``::

    [rank0]: step=12 loss=3.4512 lr=3.0e-04 grad_norm=1.234 loss_scale=1 step_time_ms=41.2 tokens_per_s=12400 mem_gib=0.41

``loss`` is the mean over data-parallel ranks. A step whose gradients are not finite is logged
and skipped (the optimizer does not move), as the fp16 GradScaler does.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import socket
import sys
import time
import traceback
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from llmdiag.trainer import checkpoint as ckpt_mod
from llmdiag.trainer import data as data_mod
from llmdiag.trainer import inject as inject_mod
from llmdiag.trainer.model import GPT, GPTConfig


class RankLog:
    """Lines prefixed ``[rankN]: `` to stdout and, appended with one write each, to a shared file."""

    def __init__(self, rank: int, path: str | None):
        from llmdiag.redact import secret_values

        self.prefix = f"[rank{rank}]: "
        self._secrets = secret_values(os.environ)
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if path else None

    def __call__(self, text: str) -> None:
        from llmdiag.redact import redact_text

        block = redact_text("".join(self.prefix + line + "\n" for line in text.rstrip("\n").split("\n")), self._secrets)
        sys.stdout.write(block)
        sys.stdout.flush()
        if self.fd is not None:
            os.write(self.fd, block.encode())  # one O_APPEND write: ranks' lines never interleave


def lr_at(step: int, args) -> float:
    """Linear warm-up to ``lr``, then cosine decay to ``min_lr`` at the last step."""
    if step <= args.warmup:
        return args.lr * step / max(args.warmup, 1)
    progress = (step - args.warmup) / max(args.steps - args.warmup, 1)
    return args.min_lr + 0.5 * (args.lr - args.min_lr) * (1 + math.cos(math.pi * min(progress, 1.0)))


def _device(args, local_rank: int) -> torch.device:
    if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda but torch sees no CUDA device")
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def _memory_gib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    import psutil

    return psutil.Process().memory_info().rss / 2**30


def param_checksum(model: torch.nn.Module) -> str:
    """SHA-256 of every parameter's bytes in a fixed order: equal iff the replicas are bit-identical."""
    h = hashlib.sha256()
    for name, p in sorted(model.named_parameters()):
        h.update(name.encode())
        h.update(p.detach().to("cpu").contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _wrap(model: torch.nn.Module, args, device, group):
    if args.fsdp:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        return FSDP(model, process_group=group, use_orig_params=True,
                    device_id=device if device.type == "cuda" else None)
    from torch.nn.parallel import DistributedDataParallel as DDP

    return DDP(model, device_ids=[device.index] if device.type == "cuda" else None, process_group=group)


def _state(model, optimizer, scaler, step: int) -> dict[str, Any]:
    """Full (unsharded) CPU copies, safe to write from a background thread while training goes on."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    msd, osd = get_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    msd, osd = _cpu_copy(msd), _cpu_copy(osd)
    return {"step": step, "model": msd, "optimizer": osd, "scaler": scaler.state_dict()}


def _cpu_copy(obj):
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: _cpu_copy(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_cpu_copy(v) for v in obj)
    return obj


def _restore(model, optimizer, scaler, state) -> None:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"],
                   options=StateDictOptions(full_state_dict=True))
    if state.get("scaler"):
        scaler.load_state_dict(state["scaler"])


def train(args, group=None, log=None) -> list[dict[str, Any]]:
    """Run the loop on this rank; returns every rank's summary (gathered). Needs an initialised group."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    log = log or RankLog(rank, args.log_file)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = _device(args, local_rank)
    torch.manual_seed(args.seed)  # same initial weights on every rank (DDP also broadcasts them)
    cfg = GPTConfig(n_layer=args.layers, n_head=args.heads, n_embd=args.hidden, vocab_size=args.vocab,
                    seq_len=args.seq_len, activation_checkpointing=args.activation_checkpointing)
    model = _wrap(GPT(cfg).to(device), args, device, group)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay,
                                  betas=(0.9, 0.95))
    fp16 = args.precision == "fp16"
    if args.fsdp:
        from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

        scaler = ShardedGradScaler(device.type, enabled=fp16, process_group=group)
    else:
        scaler = torch.amp.GradScaler(device.type, enabled=fp16)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)
    dataset = data_mod.open_dataset(args.data, args.vocab, args.seq_len, args.seed)
    injector = inject_mod.Injector([inject_mod.parse(s) for s in args.inject], rank, world, log)
    log(f"train: world_size={world} backend={dist.get_backend(group)} device={device} "
        f"params={cfg.num_params()} precision={args.precision} {'fsdp' if args.fsdp else 'ddp'} host={socket.gethostname()}")

    manager = None
    start = 0
    if args.checkpoint_dir:
        manager = ckpt_mod.CheckpointManager(args.checkpoint_dir, keep=args.keep, background=args.async_checkpoint,
                                             log=log if rank == 0 else None)
        if not args.no_resume:
            # Rank 0 chooses, everyone loads the same one (a rank choosing alone could race a save).
            choice = [None]
            if rank == 0:
                manager.remove_stale_temporaries()
                latest = manager.latest()
                choice = [str(latest.path) if latest else None]
            dist.broadcast_object_list(choice, src=0, group=group)
            if choice[0]:
                found = ckpt_mod.Checkpoint(int(choice[0].rsplit("_", 1)[1]), __import__("pathlib").Path(choice[0]))
                state = manager.load(found, rank)
                _restore(model, optimizer, scaler, state)
                start = state["step"]
                log(f"resume: from checkpoint {found.path} at step {start}")

    losses: dict[int, float] = {}
    step_ms: list[float] = []
    own_ms: list[float] = []
    tokens_per_step = args.batch_size * args.seq_len * world
    for step in range(start + 1, args.steps + 1):
        t0 = time.perf_counter()
        injector.before_step(step, device)
        lr = lr_at(step, args)
        for gr in optimizer.param_groups:
            gr["lr"] = lr
        x, y = (t.to(device) for t in dataset.batch(step, rank, args.batch_size))
        with torch.autocast(device.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
            _, loss = model(x, y)
        loss = injector.scale_loss(step, loss)
        t_bwd = time.perf_counter()
        scaler.scale(loss).backward()  # DDP's gradient all-reduce: a fast rank waits here for a slow one
        waited = time.perf_counter() - t_bwd
        scaler.unscale_(optimizer)
        clip = args.grad_clip if args.grad_clip > 0 else float("inf")
        if args.fsdp:
            grad_norm = model.clip_grad_norm_(clip)
        else:
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        if fp16 or torch.isfinite(grad_norm):
            scaler.step(optimizer)  # with fp16 the scaler itself skips a non-finite step
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        injector.corrupt(step, model)
        mean_loss = loss.detach().float().clone()
        t_sync = time.perf_counter()
        dist.all_reduce(mean_loss, group=group)  # also the step's sync point: timings are per step
        mean_loss = mean_loss.item() / world
        waited += time.perf_counter() - t_sync
        injector.stretch(step, time.perf_counter() - t0)
        dt = time.perf_counter() - t0
        losses[step] = mean_loss
        step_ms.append(dt * 1000)
        # In a synchronous group every rank's step takes as long as the slowest one's: what tells
        # a straggler is the time outside the phases where a rank waits for its peers.
        own_ms.append((dt - waited) * 1000)
        log(f"step={step} loss={mean_loss:.4f} lr={lr:.1e} grad_norm={grad_norm.item():.3f} "
            f"loss_scale={scaler.get_scale() if fp16 else 1:g} step_time_ms={dt * 1000:.1f} "
            f"tokens_per_s={tokens_per_step / dt:.0f} mem_gib={_memory_gib(device):.2f}")
        if manager and (step == args.steps or (args.checkpoint_every and step % args.checkpoint_every == 0)):
            state = _state(model, optimizer, scaler, step)  # a collective under FSDP: every rank
            rngs: list[Any] = [None] * world
            dist.all_gather_object(rngs, ckpt_mod.rng_state(), group=group)
            if rank == 0:
                manager.save(step, state, rngs)
    if manager and rank == 0:
        manager.wait()
    summary = {"rank": rank, "host": socket.gethostname(), "losses": losses, "step_ms": step_ms, "own_ms": own_ms,
               "checksum": param_checksum(model if args.fsdp else model.module)}
    if args.fsdp:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        with FSDP.summon_full_params(model):
            summary["checksum"] = param_checksum(model)
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, summary, group=group)
    log(f"train: done steps={len(losses)} final_loss={losses.get(args.steps, float('nan')):.4f}"
        if losses else "train: done, nothing to do (already at the last step)")
    return gathered


def is_collective_timeout(exc: BaseException) -> bool:
    text = str(exc).lower()
    return ("timed out" in text or "timeout" in text) and isinstance(exc, (RuntimeError, dist.DistBackendError))


def fr_prefix(args) -> str | None:
    """Where this run's Flight Recorder dumps go: ``TORCH_FR_DUMP_TEMP_FILE``, else ``<log file>.fr/rank_``."""
    env = os.environ.get("TORCH_FR_DUMP_TEMP_FILE")
    if env:
        return env
    return os.path.join(args.log_file + ".fr", "rank_") if args.log_file else None


def dump_flight_recorder(prefix: str | None, rank: int, log) -> None:
    """Write this rank's Flight Recorder buffer (its last collectives) as ``<prefix><rank>``, atomically."""
    if not prefix:
        return
    try:
        data = torch._C._distributed_c10d._dump_fr_trace()
        os.makedirs(os.path.dirname(prefix) or ".", exist_ok=True)
        tmp = f"{prefix}{rank}.tmp{os.getpid()}"
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, f"{prefix}{rank}")
        log(f"flight recorder: dumped {prefix}{rank}")
    except Exception as exc:  # noqa: BLE001 - a failed dump must not hide the real failure
        log(f"flight recorder: no dump ({type(exc).__name__}: {exc})")


def _dump_on_term(prefix: str | None, rank: int, log) -> None:
    """A hung rank is stopped with SIGTERM by its launcher: dump first, so the dumps show where it was."""
    import signal

    if not prefix:
        return

    def handler(signum, frame):
        dump_flight_recorder(prefix, rank, log)
        os._exit(128 + signum)

    try:
        signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        pass


def _init_group(backend: str, timeout: timedelta) -> None:
    """``init_process_group`` on the launcher's store, in a namespace of this restart attempt.

    Under torchrun the workers of every attempt share the agent's store: the keys the previous
    attempt's ranks wrote (gloo's per-rank listening addresses) are still there, and a new rank
    can read a dead rank's address before its peer overwrites it ("connectFullMesh failed ...
    Connection refused" to the old rank's port, or a hang). A prefix per
    ``TORCHELASTIC_RESTART_COUNT`` keeps attempts apart."""
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or "0"
    store, rank, world = next(dist.rendezvous("env://", timeout=timeout))
    dist.init_process_group(backend, store=dist.PrefixStore(f"llmdiag/attempt_{attempt}", store), rank=rank,
                            world_size=world, timeout=timeout)


def run_worker(args) -> int:
    """One process of a job launched by torchrun or by ``launch.py``: init, train, report, exit code."""
    rank = int(os.environ.get("RANK", "0"))
    log = RankLog(rank, args.log_file)
    if args.threads:
        torch.set_num_threads(args.threads)
    prefix = fr_prefix(args)
    if prefix:
        os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")  # record collectives (read at group creation)
    try:
        use_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
        backend = args.backend if args.backend != "auto" else ("nccl" if use_cuda else "gloo")
        _init_group(backend, timedelta(seconds=args.collective_timeout))
        _dump_on_term(prefix, rank, log)
        gathered = train(args, log=log)
        if rank == 0 and args.summary_file:
            from llmdiag.util.files import write_output

            write_output(args.summary_file, json.dumps({"ranks": gathered, "args": vars(args)}, indent=1),
                         "--summary-file")
        dist.destroy_process_group()
        return 0
    except BaseException as exc:  # noqa: BLE001 - every failure is logged with the rank prefix
        if isinstance(exc, KeyboardInterrupt):
            return 130
        from llmdiag.trainer.failures import note_failure

        note_failure(rank, exc)  # the moment it failed, before any cleanup (the launcher's root cause)
        if is_collective_timeout(exc):
            log(f"error: collective timeout after {args.collective_timeout:g}s (a peer rank stopped "
                f"participating): {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            dump_flight_recorder(prefix, rank, log)
        log("Traceback (most recent call last):\n" + "".join(traceback.format_tb(exc.__traceback__)).rstrip()
            + f"\n{type(exc).__module__ + '.' if type(exc).__module__ not in ('builtins',) else ''}"
              f"{type(exc).__qualname__}: {exc}")
        return 1
