"""Hostfile parsing, host-name validation, world resolution from launchers, ssh command lines."""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest

from llmdiag.cluster.hostfile import host_problem, parse_hostfile, parse_target
from llmdiag.cluster.ssh import ssh_argv
from llmdiag.cluster.world import expand_nodelist, resolve_world
from llmdiag.config import Config
from llmdiag.errors import UsageError
from llmdiag.launcher import parse_launcher
from tests.conftest import cli_env


def test_deepspeed_mpi_and_mpich_formats():
    text = """
# comment
worker-1 slots=8
worker-2   slots=4 max_slots=8   # trailing comment
10.0.0.3:2
alice@gpu-04.cluster.local
fe80::1
"""
    e = parse_hostfile(text)
    assert [(x.host, x.slots, x.user) for x in e] == [
        ("worker-1", 8, None), ("worker-2", 4, None), ("10.0.0.3", 2, None),
        ("gpu-04.cluster.local", None, "alice"), ("fe80::1", None, None)]
    assert e[3].target == "alice@gpu-04.cluster.local"
    assert e[1].line == 4


@pytest.mark.parametrize("bad, why", [
    ("-oProxyCommand=touch", "must not start with '-'"),
    ("host;rm", "not a valid host name"),
    ("a b", "unknown field"),
    ("host$(x)", "not a valid host name"),
    ("host:abc", "HOST:N"),
    ("host slots=0", "at least 1"),
    ("host\nhost", "already listed on line 1"),
    ("bad user@host", "unknown field"),
    ("b@d@host", "not a valid"),
    ("", "lists no hosts"),
])
def test_bad_lines_are_usage_errors_naming_the_line(bad, why):
    with pytest.raises(UsageError, match=None) as ei:
        parse_hostfile(bad)
    assert why in str(ei.value)


def test_host_names():
    assert host_problem("node-1") is None and host_problem("a.b-c_d.example") is None
    assert host_problem("10.1.2.3") is None and host_problem("::1") is None
    for bad in ("-x", "", "a" * 254, "x y", "x/y", "x`y`", "x\ny", "-", "a..b"):
        assert host_problem(bad), bad
    with pytest.raises(UsageError):
        parse_target("ro ot@host")


def test_ssh_argv_keeps_target_after_double_dash_and_quotes_words():
    argv = ssh_argv("root@node-1", ["llmdiag", "preflight", "--path", "/data/my dir;rm -rf /"], connect_timeout=7,
                    config="/tmp/cfg")
    assert argv[:2] == ["ssh", "-o"] and "BatchMode=yes" in argv and "ConnectTimeout=7" in argv
    assert argv[argv.index("-F") + 1] == "/tmp/cfg"
    i = argv.index("--")
    assert argv[i + 1] == "root@node-1"
    assert shlex.split(argv[i + 2]) == ["llmdiag", "preflight", "--path", "/data/my dir;rm -rf /"]
    assert "-F" not in ssh_argv("h", ["x"], connect_timeout=1)  # ~/.ssh/config honoured by default


def test_slurm_nodelist_expansion():
    assert expand_nodelist("gpu[01-03,07],login1") == ["gpu01", "gpu02", "gpu03", "gpu07", "login1"]
    assert expand_nodelist("r[1-2]-n[1-2]") == ["r1-n1", "r1-n2", "r2-n1", "r2-n2"]
    assert expand_nodelist("single") == ["single"]


def _world(env, **kw):
    return resolve_world(parse_launcher(env), env, Config.default(), **kw)


def test_world_from_launchers_and_flags():
    assert _world({}) is None  # a single node: no cluster to coordinate
    w = _world({"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29400", "NNODES": "4", "NODE_RANK": "2"})
    assert (w.node_rank, w.nnodes, w.master_addr, w.master_port, w.launcher) == (2, 4, "10.0.0.1", 29400, "env")
    w = _world({"MASTER_ADDR": "a", "NNODES": "4", "NODE_RANK": "2"}, node_rank=3, master_addr="b")
    assert (w.node_rank, w.master_addr, w.master_port) == (3, "b", 29500)  # flags win; config default port
    slurm = {"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_NNODES": "2", "SLURM_NODEID": "1",
             "SLURM_LOCALID": "0", "SLURM_JOB_NODELIST": "gpu[07-08]"}
    w = _world(slurm)
    assert (w.node_rank, w.master_addr, w.hosts) == (1, "gpu07", ("gpu07", "gpu08"))
    assert w.expected_name(1) == "node rank 1 (gpu08)"
    torchrun = {"TORCHELASTIC_RUN_ID": "x", "LOCAL_RANK": "1", "RANK": "3", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2",
                "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2", "MASTER_ADDR": "h0", "MASTER_PORT": "29500",
                "TORCHELASTIC_USE_AGENT_STORE": "True"}
    w = _world(torchrun)
    assert (w.node_rank, w.nnodes, w.agent_store, w.is_agent) == (1, 2, True, False)
    with pytest.raises(UsageError, match="rendezvous host"):
        _world({"NNODES": "2", "NODE_RANK": "0"})
    with pytest.raises(UsageError, match="0..1"):
        _world({"MASTER_ADDR": "a", "NNODES": "2", "NODE_RANK": "0"}, node_rank=5)


def test_bad_hostfile_via_cli_exits_2_without_traceback(tmp_path):
    hf = tmp_path / "hostfile"
    hf.write_text("good-host slots=2\n-oProxyCommand=evil slots=1\n")
    p = subprocess.run([sys.executable, "-m", "llmdiag", "preflight", "--hostfile", str(hf)], capture_output=True,
                       text=True, timeout=30, env=cli_env())
    assert p.returncode == 2
    assert "line 2" in p.stderr and "must not start with '-'" in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run([sys.executable, "-m", "llmdiag", "preflight", "--hostfile", str(tmp_path / "nope")],
                       capture_output=True, text=True, timeout=30, env=cli_env())
    assert p.returncode == 2 and "does not exist" in p.stderr


def test_slurm_style_ranges_in_a_hostfile():
    from llmdiag.cluster.hostfile import parse_hostfile

    entries = parse_hostfile("gpu[01-03] slots=8\nroot@cpu[9-10]:4\n")
    assert [(e.target, e.slots) for e in entries] == [("gpu01", 8), ("gpu02", 8), ("gpu03", 8), ("root@cpu9", 4),
                                                      ("root@cpu10", 4)]
    with pytest.raises(UsageError, match="line 2: host 'gpu02' already listed on line 1"):
        parse_hostfile("gpu[01-03]\ngpu02\n")
    with pytest.raises(UsageError, match="line 1"):
        parse_hostfile("gpu[05-01]\n")


def test_ssh_fix_follows_what_ssh_said():
    from llmdiag.cluster.coordinator import ssh_fix

    down = ssh_fix("ssh: connect to host h1 port 22: Connection refused", "root@h1")
    assert "sshd is not running" in down and "key" not in down
    key = ssh_fix("root@h1: Permission denied (publickey).", "root@h1")
    assert "authorized_keys" in key and "sshd is not running" not in key
    assert "ssh_window" in ssh_fix("kex_exchange_identification: read: Connection reset by peer", "h1")


def test_fan_out_windows_the_handshakes(tmp_path):
    """A real process per host stands in for ssh on PATH (it prints the line ssh prints once
    authenticated, then runs a while): at most ``window`` are in their handshake at once."""
    import os
    import time

    from llmdiag.cluster import ssh
    from llmdiag.cluster.hostfile import parse_hostfile

    log = tmp_path / "log"
    fake = tmp_path / "ssh"
    fake.write_text(f"""#!/bin/sh
echo start $$ >> {log}
sleep 0.3
echo auth $$ >> {log}
echo "Authenticated to host ([10.0.0.1]:22) using \\"publickey\\"." >&2
sleep 0.5
echo '{{}}'
""")
    fake.chmod(0o755)
    old = os.environ["PATH"]
    os.environ["PATH"] = f"{tmp_path}:{old}"
    try:
        t0 = time.monotonic()
        launches = ssh.fan_out(parse_hostfile("h[1-6]\n"), lambda r: ["true"], connect_timeout=5, config=None,
                               timeout_s=20, window=2)
        took = time.monotonic() - t0
    finally:
        os.environ["PATH"] = old
    assert all(la.returncode == 0 and la.stdout.strip() == "{}" for la in launches)
    assert all("Authenticated" not in la.stderr for la in launches)  # ssh's own line is not kept
    assert ssh.fan_out.peak == 2
    events = log.read_text().split()[0::2]
    open_now = peak = 0
    for e in events:
        open_now += 1 if e == "start" else -1
        peak = max(peak, open_now)
    assert peak <= 2 and took < 6  # 3 waves of 0.3 s handshakes, agents overlapping
