"""Helpers of the live-framework matrix: launch a real training job the way a user does
(``torchrun ... > train.log 2>&1``), then read that one file back through the real CLI."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from tests.conftest import cli_env, llmdiag_argv

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent


def launcher(name: str) -> list[str]:
    """The launcher's console script next to this interpreter (as a user's venv has it), else the module."""
    exe = BIN / name
    if exe.exists():
        return [str(exe)]
    found = shutil.which(name)
    if found:
        return [found]
    return [sys.executable, "-m", {"torchrun": "torch.distributed.run",
                                   "accelerate": "accelerate.commands.accelerate_cli"}[name]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(tmp_path: Path, argv: list[str], env: dict[str, str], timeout: float = 240) -> tuple[int, Path]:
    """Run one job with stdout and stderr in one file, as ``> train.log 2>&1`` writes it."""
    log = tmp_path / "train.log"
    full = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **env}
    with open(log, "wb") as out:
        proc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=full, cwd=tmp_path, timeout=timeout)
    return proc.returncode, log


def analyze(log: Path) -> tuple[int, dict]:
    """``llmdiag analyze-log train.log --format json`` through the real CLI: exit code and document."""
    proc = subprocess.run(llmdiag_argv("analyze-log", str(log), "--format", "json"), env=cli_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip(), f"analyze-log printed nothing (rc {proc.returncode}): {proc.stderr[-2000:]}"
    return proc.returncode, json.loads(proc.stdout)
