"""``preflight --hostfile``: agents started over real OpenSSH into namespace hosts.

Each host runs its own throwaway sshd (tmp host key, tmp authorized_keys, tmp config, its own
``/run`` in a private mount namespace); the client uses a tmp key and a tmp ``ssh_config``
(``-F``), so neither ``~/.ssh`` nor the system sshd is touched. Host 2 does not accept the key:
passwordless ssh to it is reported as failed and the node as missing, by its hostfile name.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.cluster import testbed
from tests.cluster.helpers import write_config
from tests.cluster.testbed import Testbed, wait_until
from tests.conftest import REPO

OK, WHY = testbed.available()
if OK and not (shutil.which("sshd") or shutil.which("/usr/sbin/sshd")):
    OK, WHY = False, "sshd not found (apt-get install openssh-server)"
if OK and not shutil.which("ssh-keygen"):
    OK, WHY = False, "ssh-keygen not found (apt-get install openssh-client)"
pytestmark = [pytest.mark.cluster, pytest.mark.skipif(not OK, reason=WHY or "test bed unavailable")]

CONNECT = "import socket,sys;socket.create_connection((sys.argv[1],22),timeout=0.5).close()"


def _keys(tmp):
    for name in ("id", "hostkey"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / name)], check=True)
    (tmp / "authorized_keys").write_text((tmp / "id.pub").read_text())
    (tmp / "authorized_keys_other").write_text("")  # host 2: our key is not authorised there


def _sshd_config(tmp, k):
    keys = "authorized_keys_other" if k == 2 else "authorized_keys"
    p = tmp / f"sshd_config_{k}"
    p.write_text(f"""Port 22
ListenAddress 0.0.0.0
HostKey {tmp / 'hostkey'}
AuthorizedKeysFile {tmp / keys}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
PidFile none
""")
    return p


def _start_sshd(tb, tmp, n):
    run_dir = tmp / "run"
    (run_dir / "sshd").mkdir(parents=True)
    run_dir.chmod(0o755)
    (run_dir / "sshd").chmod(0o755)
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    for k in range(n):
        tb.popen(k, [sshd, "-D", "-e", "-f", str(_sshd_config(tmp, k))], binds={"/run": str(run_dir)},
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for k in range(n):
        assert wait_until(lambda k=k: tb.run(0, [sys.executable, "-c", CONNECT, tb.addr(k)],
                                             timeout=5).returncode == 0, 10), f"sshd on host {k} did not start"
    # host-1, host-2, ... exist only as ssh aliases: the ssh config must be honoured
    aliases = "".join(f"Host host-{k}\n  HostName {tb.addr(k)}\n" for k in range(1, n))
    (tmp / "ssh_config").write_text(aliases + f"""Host *
  User root
  IdentityFile {tmp / 'id'}
  IdentitiesOnly yes
  UserKnownHostsFile {tmp / 'known_hosts'}
  StrictHostKeyChecking no
  LogLevel ERROR
""")


def test_hostfile_fan_out_over_ssh(tmp_path):
    tmp = tmp_path
    _keys(tmp)
    cfg = write_config(tmp)
    with Testbed(3) as tb:
        _start_sshd(tb, tmp, 3)
        hostfile = tmp / "hostfile"
        hostfile.write_text(f"# DeepSpeed format\n{tb.addr(0)} slots=8\nhost-1 slots=8\nhost-2 slots=8\n")
        remote = f"env PYTHONPATH={REPO} {sys.executable} -m llmdiag"
        argv = [sys.executable, "-m", "llmdiag", "preflight", "-c", str(cfg), "--hostfile", str(hostfile),
                "--ssh-config", str(tmp / "ssh_config"), "--remote-command", remote, "--timeout", "16",
                "--probe", "software", "-f", "json"]
        out = tb.run(0, argv, timeout=60, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"})
    assert out.returncode == 1, out.stderr[-2000:]
    doc = json.loads(out.stdout)
    ssh = {r["node"]: r for r in doc["results"] if r["check"] == "ssh"}
    assert ssh[tb.addr(0)]["status"] == "pass" and ssh["host-1"]["status"] == "pass"
    assert ssh["host-2"]["status"] == "fail" and ssh["host-2"]["runbook"] == "cluster-ssh-failed"
    assert "Permission denied" in ssh["host-2"]["summary"]
    assert doc["missing_nodes"] == ["node rank 2 (host-2)"]
    missing = [r for r in doc["results"] if r["check"] == "node-missing"][0]
    assert "ssh failed" in missing["summary"] and missing["runbook"] == "cluster-ssh-failed"
    assert [n["node"] for n in doc["nodes"]] == ["node-0", "node-1"]
    assert doc["sections"]["port_matrix"]["tested"] > 0 and not doc["sections"]["port_matrix"]["problems"]



def test_healthy_cluster_over_ssh_full_default_probes(tmp_path):
    """4 hosts, every key accepted, the full default probe set, hosts given as a Slurm-style range."""
    import time

    tmp = tmp_path
    _keys(tmp)
    (tmp / "authorized_keys_other").write_text((tmp / "id.pub").read_text())  # host 2 accepts the key too
    shared = tmp / "shared"
    shared.mkdir()
    cfg = write_config(tmp, f'\n[thresholds]\nnofile_min = 16384\n\n[[filesystem.paths]]\npath = "{shared}"\n'
                            'shared = true\n')
    cfg.write_text(cfg.read_text().replace("[cluster]\n", "[cluster]\ntimeout_s = 150\n"))
    with Testbed(4) as tb:
        _start_sshd(tb, tmp, 4)
        hostfile = tmp / "hostfile"
        hostfile.write_text(f"{tb.addr(0)} slots=1\nhost-[1-3] slots=1\n")
        remote = f"env PYTHONPATH={REPO} GLOO_SOCKET_IFNAME=eth0 {sys.executable} -m llmdiag"
        argv = [sys.executable, "-m", "llmdiag", "preflight", "-c", str(cfg), "--hostfile", str(hostfile),
                "--ssh-config", str(tmp / "ssh_config"), "--remote-command", remote, "-f", "json"]
        t0 = time.monotonic()
        out = tb.run(0, argv, timeout=240, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"})
        wall = time.monotonic() - t0
    print(f"\nssh fan-out: 4 hosts, full default probe set, wall {wall:.1f} s")
    doc = json.loads(out.stdout)
    bad = [(r["node"], r["probe"], r["check"], r["summary"]) for r in doc["results"] if r["status"] in ("fail", "warn")]
    assert not bad and out.returncode == 0, (bad, out.stderr[-2000:])
    assert [n["node"] for n in doc["nodes"]] == ["node-0", "node-1", "node-2", "node-3"]
    assert {r["node"] for r in doc["results"] if r["check"] == "ssh" and r["status"] == "pass"} == {
        tb.addr(0), "host-1", "host-2", "host-3"}
    assert {r["probe"] for r in doc["results"] if r["status"] == "pass"} >= {"software", "ports", "filesystem", "nccl"}
