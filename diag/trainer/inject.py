"""Faults on purpose, for rehearsals: ``--inject KIND@STEP[:rank=R][:factor=F]``.

| kind  | effect at STEP on the chosen rank(s)                                 | default rank |
|-------|----------------------------------------------------------------------|--------------|
| nan   | the loss becomes NaN (backward too, so gradients are NaN)            | all          |
| spike | the loss is multiplied by ``factor`` (default 20) for that step      | all          |
| slow  | from STEP on, each step is stretched to ``factor`` × (default 5)     | 0            |
| hang  | the rank sleeps before its collectives; the others hit the timeout   | 0            |
| crash | a Python exception (RuntimeError) ends the rank                      | 0            |
| oom   | an out-of-memory error: a real allocation on CUDA, raised on CPU     | 0            |
| corrupt | after the optimizer step one weight of the rank's replica changes (a silent data corruption, as a bad GPU or a flipped bit gives): the replicas stop being identical | 0 |

``crash``, ``oom`` and ``hang`` fire once per run: after a restart (``TORCHELASTIC_RESTART_COUNT``
> 0, set by torchrun and by ``--max-restarts``) the resumed workers pass that step, so a restart
can be rehearsed to recover.

The faults are real where they can be (a real NaN through backward, a real sleep, a real
collective timeout, a real exception); only ``oom`` on a CPU run raises
``torch.OutOfMemoryError`` itself, because exhausting host memory would hurt the machine.
"""

from __future__ import annotations

import dataclasses
import math
import time

KINDS = ("nan", "spike", "slow", "hang", "crash", "oom", "corrupt")
_ALL_RANKS = ("nan", "spike")
ONE_SHOT = ("crash", "oom", "hang", "corrupt")


class InjectError(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class Fault:
    kind: str
    step: int
    rank: int | None  # None: every rank
    factor: float

    def applies(self, step: int, rank: int) -> bool:
        on_rank = self.rank is None or self.rank == rank
        if self.kind == "slow":
            return on_rank and step >= self.step
        return on_rank and step == self.step


def parse(spec: str) -> Fault:
    """``"slow@10:rank=1:factor=5"`` → Fault; InjectError with the accepted syntax otherwise."""
    head, *opts = spec.strip().split(":")
    kind, sep, step = head.partition("@")
    if kind not in KINDS or not sep:
        raise InjectError(f"--inject {spec!r}: expected KIND@STEP[:rank=R][:factor=F] with KIND one of {', '.join(KINDS)}")
    try:
        step_n = int(step)
    except ValueError:
        raise InjectError(f"--inject {spec!r}: step {step!r} is not an integer") from None
    if step_n < 1:
        raise InjectError(f"--inject {spec!r}: step must be >= 1")
    rank: int | None = None if kind in _ALL_RANKS else 0
    factor = {"spike": 20.0, "slow": 5.0}.get(kind, 1.0)
    for opt in opts:
        key, _, value = opt.partition("=")
        try:
            if key == "rank":
                rank = None if value == "all" else int(value)
            elif key == "factor":
                factor = float(value)
            else:
                raise InjectError(f"--inject {spec!r}: unknown option {key!r} (accepted: rank, factor)")
        except ValueError:
            raise InjectError(f"--inject {spec!r}: bad value for {key}: {value!r}") from None
    if rank is not None and rank < 0:
        raise InjectError(f"--inject {spec!r}: rank must be >= 0")
    if not factor > 0 or math.isinf(factor):
        raise InjectError(f"--inject {spec!r}: factor must be a positive number")
    return Fault(kind, step_n, rank, factor)


class Injector:
    """The faults of one run, consulted by the training loop at fixed points of a step."""

    def __init__(self, faults: list[Fault], rank: int, world_size: int, log):
        for f in faults:
            if f.rank is not None and f.rank >= world_size:
                raise InjectError(f"--inject {f.kind}@{f.step}: rank {f.rank} does not exist (world size {world_size})")
        import os

        restarted = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0) > 0
        # one-shot faults fire in the first attempt only, so that a restart recovers
        self.faults = [f for f in faults if not (restarted and f.kind in ONE_SHOT)]
        self.rank, self.log = rank, log

    def _active(self, step: int, kinds: tuple[str, ...]):
        return [f for f in self.faults if f.kind in kinds and f.applies(step, self.rank)]

    def before_step(self, step: int, device) -> None:
        """Crash, OOM and hang happen before the step's forward pass."""
        import torch

        for f in self._active(step, ("crash", "oom", "hang")):
            self.log(f"inject: {f.kind} at step {step}")
            if f.kind == "crash":
                raise RuntimeError(f"injected crash at step {step} (llmdiag --inject crash@{f.step})")
            if f.kind == "oom":
                if device.type == "cuda":
                    free, _ = torch.cuda.mem_get_info(device)
                    torch.empty(free * 2, dtype=torch.uint8, device=device)  # really does not fit
                raise torch.OutOfMemoryError(
                    f"CUDA out of memory. Tried to allocate 64.00 GiB. GPU {max(device.index or 0, 0)} has a total "
                    f"capacity of 0 bytes of which 0 bytes is free. (raised by llmdiag --inject oom@{f.step} "
                    "on a run without a GPU)"
                )
            if f.kind == "hang":
                # Sleep instead of entering the step's collectives: the peers' all-reduce waits
                # for this rank until the process group timeout fires on them.
                while True:
                    time.sleep(3600)

    def scale_loss(self, step: int, loss):
        for f in self._active(step, ("nan", "spike")):
            self.log(f"inject: {f.kind} at step {step}")
            loss = loss * (float("nan") if f.kind == "nan" else f.factor)
        return loss

    def stretch(self, step: int, elapsed_s: float) -> None:
        """A straggler: sleep so that this rank's step takes ``factor`` times as long."""
        for f in self._active(step, ("slow",)):
            time.sleep(elapsed_s * (f.factor - 1))

    def corrupt(self, step: int, model) -> None:
        """A silent data corruption: one weight of this replica moves, nothing else notices.

        DDP synchronises gradients, never weights, so the replicas stay different from here on:
        what the smoke run's checksum comparison exists to catch."""
        import torch

        for f in self._active(step, ("corrupt",)):
            self.log(f"inject: corrupt at step {step}")
            with torch.no_grad():
                p = next(q for q in model.parameters() if q.numel())
                p.view(-1)[0].add_(1.0)
