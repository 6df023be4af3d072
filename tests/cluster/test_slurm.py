"""Slurm health check against a real Slurm (Debian slurm-wlm + munge): a failing node is drained
with the finding as the reason, a healthy one is left in service.

slurmctld and slurmd run from a temporary directory with their own config, ports, spool and
pid files (``SLURM_CONF``), as root, on this machine; the test stops them by their pid files.
preflight runs as a real job step (``srun``), so the node name comes from Slurm itself.
"""

from __future__ import annotations

import os
import shutil
import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cluster.testbed import wait_until
from tests.conftest import cli_env

NEED = ("slurmctld", "slurmd", "scontrol", "sinfo", "srun", "munge")
OK = os.name == "posix" and os.geteuid() == 0 and all(shutil.which(t) for t in NEED)
pytestmark = [pytest.mark.cluster,
              pytest.mark.skipif(not OK, reason="needs root and Slurm (apt-get install slurm-wlm munge)")]


def _munge_ok() -> bool:
    p = subprocess.run("munge -n | unmunge", shell=True, capture_output=True, timeout=10)
    return p.returncode == 0


@pytest.fixture
def slurm(tmp_path, request):
    extra = getattr(request, "param", None)  # a function of the Slurm directory: more slurm.conf lines
    started_munge = None
    if not _munge_ok():
        os.makedirs("/run/munge", exist_ok=True)
        shutil.chown("/run/munge", "munge", "munge")
        subprocess.run(["su", "-s", "/bin/sh", "munge", "-c", "/usr/sbin/munged"], check=True, timeout=30)
        assert wait_until(_munge_ok, 10), "munged did not start"
        started_munge = True
    host = socket.gethostname()
    d = tmp_path / "slurm"
    for sub in ("spool", "state", "log"):
        (d / sub).mkdir(parents=True)
    conf = d / "slurm.conf"
    conf.write_text(f"""ClusterName=llmdiagtest
SlurmctldHost={host}
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
ReturnToService=2
SlurmUser=root
SlurmdUser=root
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmdSpoolDir={d}/spool
StateSaveLocation={d}/state
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
SlurmctldPort=26817
SlurmdPort=26818
NodeName={host} CPUs=2 RealMemory=2000 State=UNKNOWN
PartitionName=p Nodes={host} Default=YES MaxTime=INFINITE State=UP
""" + (extra(d) if extra else ""))
    env = cli_env(SLURM_CONF=str(conf))
    subprocess.run(["slurmctld", "-i"], env=env, check=True, timeout=30)
    subprocess.run(["slurmd"], env=env, check=True, timeout=30)

    def idle():
        p = subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True, text=True, timeout=10)
        return p.stdout.strip() == "idle"

    try:
        assert wait_until(idle, 30, 0.5), (d / "log" / "slurmctld.log").read_text()[-2000:]
        yield {"env": env, "host": host}
    finally:
        for name in ("slurmd", "slurmctld"):
            pid = d / f"{name}.pid"
            if pid.exists():
                try:
                    os.kill(int(pid.read_text().split()[0]), signal.SIGTERM)
                except (ProcessLookupError, ValueError):
                    pass
        time.sleep(1)
        if started_munge and os.path.exists("/run/munge/munged.pid"):
            try:
                os.kill(int(Path("/run/munge/munged.pid").read_text().split()[0]), signal.SIGTERM)
            except (ProcessLookupError, ValueError):
                pass


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
