"""Checkpoints that never lose data: a partial checkpoint is never loaded.

A save of step N writes into ``DIR/.tmp-step_N-PID/``: ``state.pt`` (model, optimizer, scaler,
step; the data position *is* the step, see ``data.py``), ``rng.pt`` (Python, NumPy and torch
CPU/CUDA generator states of every rank) and, last, ``manifest.json`` with the size and SHA-256
of each file. Every file is flushed and fsync'd, the directory is renamed atomically to
``DIR/step_N`` and ``DIR`` is fsync'd so the rename itself survives a power cut.

On start, :meth:`CheckpointManager.latest` walks ``step_*`` newest first and returns the first
whose manifest exists and whose files match it; temporary directories are never considered.
So a process SIGKILLed mid-save loses at most the steps since the previous complete save.

Only rank 0 writes (data-parallel ranks hold identical model and optimizer state); the other
ranks' RNG states reach it through one ``all_gather_object`` before the write starts. With
``background=True`` the write runs in a thread while training continues on the CPU snapshot.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import re
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

MANIFEST = "manifest.json"
_STEP_RE = re.compile(r"^step_(\d+)$")
#: Test hook: seconds to pause between the payload and the manifest, so a test can SIGKILL a
#: rank at exactly that moment. Never set in real runs.
PAUSE_ENV = "LLMDIAG_CHECKPOINT_PAUSE_S"


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    step: int
    path: Path


class _HashingFile:
    """A write-only file wrapper that hashes what passes through (no second read of GBs)."""

    def __init__(self, f):
        self.f, self.sha, self.size = f, hashlib.sha256(), 0

    def write(self, b) -> int:
        self.sha.update(b)
        self.size += len(b)
        return self.f.write(b)

    def flush(self) -> None:
        self.f.flush()


def rng_state() -> dict[str, Any]:
    """This process's generator states (CUDA only when it is initialised)."""
    import numpy as np

    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    import numpy as np

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


class CheckpointManager:
    """Periodic, atomic, verified checkpoints in one directory; keeps the newest ``keep``."""

    def __init__(self, directory: str | Path, *, keep: int = 3, background: bool = False,
                 log: Callable[[str], None] | None = None):
        self.dir = Path(directory)
        self.keep, self.background = keep, background
        self.log = log or (lambda msg: None)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    # -- reading -----------------------------------------------------------------------------
    def complete(self) -> list[Checkpoint]:
        """Complete checkpoints (manifest present and matching), newest first."""
        out = []
        for step, path in self._candidates():
            if self.verify(path) is None:
                out.append(Checkpoint(step, path))
        return out

    def latest(self) -> Checkpoint | None:
        """The newest complete checkpoint; incomplete or corrupt ones are reported and skipped."""
        for step, path in self._candidates():
            problem = self.verify(path)
            if problem is None:
                return Checkpoint(step, path)
            self.log(f"checkpoint: skipping {path.name}: {problem}")
        return None

    def _candidates(self) -> list[tuple[int, Path]]:
        if not self.dir.is_dir():
            return []
        found = [(int(m.group(1)), p) for p in self.dir.iterdir() if (m := _STEP_RE.match(p.name)) and p.is_dir()]
        return sorted(found, reverse=True)

    @staticmethod
    def verify(path: Path) -> str | None:
        """None when ``path`` is a complete checkpoint, else what is wrong with it."""
        try:
            manifest = json.loads((path / MANIFEST).read_text())
        except FileNotFoundError:
            return "no manifest (the save did not finish)"
        except (OSError, ValueError) as exc:
            return f"unreadable manifest: {exc}"
        for name, meta in manifest.get("files", {}).items():
            f = path / name
            if not f.is_file():
                return f"{name} is missing"
            if f.stat().st_size != meta["size"]:
                return f"{name} has {f.stat().st_size} bytes, manifest says {meta['size']}"
            if _sha256(f) != meta["sha256"]:
                return f"{name} does not match its checksum"
        return None

    def load(self, ckpt: Checkpoint, rank: int) -> dict[str, Any]:
        """The saved state, with this rank's RNG states restored (when the world size matches)."""
        state = torch.load(ckpt.path / "state.pt", map_location="cpu", weights_only=False)
        rngs = torch.load(ckpt.path / "rng.pt", map_location="cpu", weights_only=False)
        if rank < len(rngs):
            set_rng_state(rngs[rank])
        return state

    # -- writing -----------------------------------------------------------------------------
    def save(self, step: int, state: dict[str, Any], rngs: list[dict[str, Any]]) -> None:
        """Write checkpoint ``step`` (rank 0 only). ``state`` must already be a CPU snapshot."""
        self.wait()
        if self.background:
            self._thread = threading.Thread(target=self._save_guarded, args=(step, state, rngs),
                                            name=f"checkpoint-{step}", daemon=True)
            self._thread.start()
        else:
            self._write(step, state, rngs)

    def wait(self) -> None:
        """Block until a background save finished; re-raise its error here, in the trainer."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            err, self._error = self._error, None
            raise RuntimeError(f"background checkpoint save failed: {err}") from err

    def _save_guarded(self, step, state, rngs) -> None:
        try:
            self._write(step, state, rngs)
        except BaseException as exc:  # noqa: BLE001 - handed to the training thread by wait()
            self._error = exc

    def _write(self, step: int, state: dict[str, Any], rngs: list[dict[str, Any]]) -> None:
        start = time.monotonic()
        self.dir.mkdir(parents=True, exist_ok=True)
        final = self.dir / f"step_{step:08d}"
        tmp = self.dir / f".tmp-step_{step:08d}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        files = {}
        for name, obj in (("state.pt", state), ("rng.pt", rngs)):
            with (tmp / name).open("wb") as raw:
                hf = _HashingFile(raw)
                torch.save(obj, hf)
                raw.flush()
                os.fsync(raw.fileno())
            files[name] = {"size": hf.size, "sha256": hf.sha.hexdigest()}
        pause = float(os.environ.get(PAUSE_ENV) or 0)
        if pause:
            self.log(f"checkpoint: saving step {step}: payload written, manifest pending")
            time.sleep(pause)
        manifest = {"format": 1, "step": step, "world_size": len(rngs), "files": files, "created": time.time()}
        with (tmp / MANIFEST).open("w") as f:
            json.dump(manifest, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        _fsync_dir(tmp)
        if final.exists():  # a save of the same step from a run that died after its rename
            shutil.rmtree(final)
        os.rename(tmp, final)
        _fsync_dir(self.dir)
        self.log(f"checkpoint: saved step {step} to {final} in {time.monotonic() - start:.2f}s")
        self._prune()

    def _prune(self) -> None:
        for _, path in self._candidates()[self.keep:]:
            shutil.rmtree(path, ignore_errors=True)

    def remove_stale_temporaries(self) -> None:
        """Delete ``.tmp-*`` directories left by saves that were killed (never loaded anyway)."""
        if self.dir.is_dir():
            for p in self.dir.glob(".tmp-step_*"):
                self.log(f"checkpoint: removing partial save {p.name}")
                shutil.rmtree(p, ignore_errors=True)
