"""A real Slurm for tests (Debian slurm-wlm + munge): the ``slurm`` fixture.

slurmctld and slurmd run from a temporary directory with their own config, free ports, spool and
pid files (``SLURM_CONF``), as root, on this machine; the fixture stops them by their pid files.
A test may add slurm.conf lines: ``@pytest.mark.parametrize("slurm", [fn], indirect=True)``
with ``fn(slurm_dir) -> str``. Loaded for every test by tests/conftest.py (``pytest_plugins``).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.cluster.testbed import wait_until
from tests.conftest import cli_env

NEED = ("slurmctld", "slurmd", "scontrol", "sinfo", "srun", "munge")
OK = os.name == "posix" and os.geteuid() == 0 and all(shutil.which(t) for t in NEED)
def _free_port() -> int:
    """A port nobody listens on now: two test runs on one machine (or a site's own Slurm) keep
    their daemons apart."""
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


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
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
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
