"""Slurm health check against a real Slurm (Debian slurm-wlm + munge): a failing node is drained
with the finding as the reason, a healthy one is left in service.

The Slurm is the ``slurm`` fixture of tests/slurm.py. preflight runs as a real job step (``srun``), so the node name comes from Slurm itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster.testbed import wait_until
from tests.conftest import cli_env
from tests.slurm import OK

pytestmark = [pytest.mark.cluster,
              pytest.mark.skipif(not OK, reason="needs root and Slurm (apt-get install slurm-wlm munge)")]


def _reason(env):
    p = subprocess.run(["sinfo", "-R", "-h", "-o", "%E|%t"], env=env, capture_output=True, text=True, timeout=10)
    return p.stdout.strip()


def _srun(env, *args):
    argv = ["srun", "-N1", "-n1", "--quiet", sys.executable, "-m", "llmdiag", "preflight", "--slurm-drain", *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)


def test_failing_node_is_drained_with_the_finding_and_a_healthy_one_is_not(slurm):
    env = slurm["env"]
    ok = _srun(env, "--probe", "launcher", "-f", "json")
    assert ok.returncode == 0, ok.stderr
    assert _reason(env) == ""  # healthy: nothing drained
    # this machine has no NVIDIA driver: expecting 8 GPUs fails the gpu probe for real
    bad = _srun(env, "--probe", "gpu", "--gpus-per-node", "8", "-f", "json")
    assert bad.returncode == 1, bad.stderr
    assert f"drained {slurm['host']}: llmdiag: gpu/count" in bad.stderr
    reason, state = _reason(env).split("|")
    assert reason.startswith("llmdiag: gpu/count: 0 GPU(s) usable, 8 expected") and state in ("drain", "drng")
    subprocess.run(["scontrol", "update", f"nodename={slurm['host']}", "state=resume"], env=env, check=True,
                   timeout=30)
    assert _reason(env) == ""


def _prolog(d: Path) -> str:
    """docs/node-health.md's prolog: llmdiag node-health's exit code, and no scontrol."""
    script = d / "prolog.sh"
    script.write_text(f"""#!/bin/sh
PYTHONPATH={cli_env()["PYTHONPATH"]} exec {sys.executable} -m llmdiag node-health --protocol nhc --timeout 20 \\
    --probe gpu --gpus-per-node 8 --report {d}/prolog.json > {d}/prolog.out
""")
    script.chmod(0o755)
    return f"Prolog={script}\nPrologFlags=Alloc\n"


@pytest.mark.parametrize("slurm", [_prolog], indirect=True)
def test_prolog_recipe_drains_the_failing_node_without_scontrol(slurm, tmp_path):
    env = slurm["env"]
    job = subprocess.run(["srun", "-N1", "-n1", "--quiet", "true"], env=env, capture_output=True, text=True, timeout=120)
    assert job.returncode != 0
    assert wait_until(lambda: _reason(env) != "", 30, 0.5)
    reason, state = _reason(env).split("|")
    assert reason == "Prolog error" and state in ("drain", "drng"), (reason, state)
    d = tmp_path / "slurm"
    assert (d / "prolog.out").read_text().startswith("gpu/count: 0 GPU(s) usable, 8 expected")
    assert any(r["status"] == "fail" for r in json.loads((d / "prolog.json").read_text())["results"])
