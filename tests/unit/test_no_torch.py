"""nccl-bench and train in a Python where ``import torch`` fails: one line, exit 2, no traceback.

torch stays installed; a directory put first on PYTHONPATH holds a ``torch`` package whose import
raises ModuleNotFoundError exactly as a missing torch does, so the real CLI runs in a real
subprocess that cannot import torch.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO, cli_env


@pytest.fixture
def no_torch_env(tmp_path):
    shim = tmp_path / "shim" / "torch"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    env = cli_env()
    env["PYTHONPATH"] = os.pathsep.join([str(shim.parent), str(REPO), env.get("PYTHONPATH", "")])
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RUN_ID", "NNODES", "NODE_RANK", "MASTER_ADDR"):
        env.pop(name, None)
    probe = subprocess.run([sys.executable, "-c", "import torch"], env=env, capture_output=True, text=True)
    assert probe.returncode != 0 and "No module named 'torch'" in probe.stderr  # the shim is what Python sees
    return env


@pytest.mark.parametrize("argv", [["-m", "llmdiag", "nccl-bench"], ["-m", "llmdiag", "nccl-bench", "--nproc", "2"],
                                  ["-m", "llmdiag", "train", "--steps", "1"], ["-m", "llmdiag.trainer"]])
def test_without_torch_one_line_and_exit_2(no_torch_env, argv):
    p = subprocess.run([sys.executable, *argv], env=no_torch_env, capture_output=True, text=True, timeout=120)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, (p.returncode, p.stderr[-2000:])
    assert "Traceback" not in p.stderr and "needs PyTorch" in lines[0] and "No module named 'torch'" in lines[0]


def test_without_torch_the_help_still_shows(no_torch_env):
    for argv in (["nccl-bench", "--help"], ["train", "-h"]):
        p = subprocess.run([sys.executable, "-m", "llmdiag", *argv], env=no_torch_env, capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 0 and "usage" in p.stdout.lower(), p.stderr
