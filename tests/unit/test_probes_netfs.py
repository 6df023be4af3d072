"""Network, ports and filesystem probes on real inputs: real sockets, mounts, interfaces."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from llmdiag.config import Config
from llmdiag.context import Context
from llmdiag.runbooks import exists
from llmdiag.probes.filesystem import FilesystemProbe
from llmdiag.util.mounts import classify, mount_of, parse_mountinfo
from llmdiag.probes.network import NetworkProbe
from llmdiag.probes.ports import PortsProbe, compact
from llmdiag.util.ports import sample_ports

ROOT = os.geteuid() == 0


def ctx_for(cfg: dict | None = None, env: dict | None = None, **kw) -> Context:
    return Context.create(config=Config.from_mapping(cfg or {}), env=env or {}, node="n0", **kw)


def by_check(results):
    out = {r.check: r for r in results}
    for r in results:
        assert r.status.value == "pass" or exists(r.runbook), r
    return out


# -- ports ---------------------------------------------------------------------------------
@pytest.fixture
def listening_port():
    """A port this test process really holds (listening on loopback)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    yield s.getsockname()[1]
    s.close()


def test_busy_port_is_reported_with_this_process_as_holder(listening_port):
    port = listening_port
    res = by_check(list(PortsProbe().run(ctx_for({"network": {"port_range": f"{port}-{port + 2}"}},
                                                  env={"MASTER_PORT": str(port)}))))
    mp = res["master_port"]
    assert mp.status.value == "fail" and mp.runbook == "port-in-use"
    assert f"pid {os.getpid()}" in mp.summary
    assert mp.data["busy"][str(port)][0]["pid"] == os.getpid()


def _agent_ctx(port: int) -> Context:
    ctx = ctx_for({"network": {"port_range": f"{port + 1}-{port + 2}"}}, env={"MASTER_PORT": str(port)})
    ctx.services["cluster_agent"] = True
    return ctx


def test_agent_port_inherited_by_its_own_child_is_the_jobs_own():
    """A child the agent is forking holds the store's socket until it execs (seen in CI as
    'MASTER_PORT busy: held by pid N (python)' on a healthy cluster): that is this job."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], pass_fds=[s.fileno()])
    try:
        res = by_check(list(PortsProbe().run(_agent_ctx(port))))
        assert res["master_port"].status.value == "pass", res["master_port"]
        assert res["master_port"].data.get("own") is True
    finally:
        child.kill()
        child.wait()
        s.close()


def test_agent_port_transient_holder_is_resampled(monkeypatch):
    """psutil names one pid per socket (the highest): during a fork the socket is reported under
    a child that is gone by the time its name is read. A holder seen once is not a finding."""
    import llmdiag.probes.ports as ports_mod

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    real, calls = ports_mod.holders, []

    def flaky(ps):
        calls.append(1)
        return {port: [{"pid": 999_999_999, "name": None, "status": "LISTEN"}]} if len(calls) == 1 else real(ps)

    monkeypatch.setattr(ports_mod, "holders", flaky)
    try:
        res = by_check(list(PortsProbe().run(_agent_ctx(port))))
        assert res["master_port"].status.value == "pass" and len(calls) >= 2, res["master_port"]
    finally:
        s.close()


def test_agent_port_held_by_a_stranger_still_fails(tmp_path):
    """A process that is not this agent's descendant (a leftover, reparented to init) is busy."""
    ready = tmp_path / "port"
    code = ("import socket, sys, time; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1); "
            f"open({str(ready)!r}, 'w').write(str(s.getsockname()[1])); time.sleep(30)")
    # sh starts the holder in the background and exits: the holder is nobody's child here
    subprocess.run(["sh", "-c", f'"{sys.executable}" -c "{code}" >/dev/null 2>&1 & echo $! > {tmp_path}/pid'],
                   check=True)
    pid = int((tmp_path / "pid").read_text())
    try:
        for _ in range(200):
            if ready.exists() and ready.read_text():
                break
            import time
            time.sleep(0.05)
        port = int(ready.read_text())
        res = by_check(list(PortsProbe().run(_agent_ctx(port))))
        mp = res["master_port"]
        assert mp.status.value == "fail" and f"pid {pid}" in mp.summary, mp
    finally:
        os.kill(pid, 9)


def test_busy_port_inside_range_named(listening_port):
    port = listening_port
    res = by_check(list(PortsProbe().run(ctx_for({"network": {"port_range": f"{port - 1}-{port + 1}"},
                                                  "cluster": {"master_port": 1}}))))
    pr = res["port_range"]
    assert pr.status.value == "fail" and str(port) in pr.data["busy"]
    assert pr.data["busy"][str(port)][0]["pid"] == os.getpid()


def test_large_range_is_sampled_and_sockets_closed():
    lo, hi = 40000, 45000
    res = by_check(list(PortsProbe().run(ctx_for({"network": {"port_range": f"{lo}-{hi}"}}))))
    assert len(sample_ports(lo, hi)) == 128
    assert "sampled" in res["port_range"].summary
    # in the default ephemeral range 32768-60999: warns, with a fix
    eph = res["ephemeral_overlap"]
    assert eph.status.value == "warn" and eph.runbook == "port-range-ephemeral"
    assert len(os.listdir("/proc/self/fd")) < 64  # no sockets left open


def test_ephemeral_reserved_ports_do_not_warn(tmp_path):
    d = tmp_path / "proc/sys/net/ipv4"
    d.mkdir(parents=True)
    (d / "ip_local_port_range").write_text("32768\t60999\n")
    (d / "ip_local_reserved_ports").write_text("40000-40010\n")
    ctx = ctx_for({"network": {"port_range": "40000-40010"}}, root=tmp_path)
    assert PortsProbe().ephemeral(ctx, 40000, 40010).status.value == "pass"
    assert PortsProbe().ephemeral(ctx, 40000, 40011).status.value == "warn"


def test_compact():
    assert compact([1, 2, 3, 7, 9, 10]) == "1-3,7,9-10"


# -- network -------------------------------------------------------------------------------
def test_network_on_real_interfaces_selection_rules():
    res = by_check(list(NetworkProbe().run(ctx_for(env={"NCCL_SOCKET_IFNAME": "lo"}))))
    assert res["nccl_ifname"].status.value == "warn" and "loopback" in res["nccl_ifname"].summary
    assert "lo" in res["interfaces"].data["interfaces"]
    res = by_check(list(NetworkProbe().run(ctx_for(env={"NCCL_SOCKET_IFNAME": "=nosuch0",
                                                        "GLOO_SOCKET_IFNAME": "lo"}))))
    assert res["nccl_ifname"].status.value == "fail" and res["nccl_ifname"].runbook == "nic-selection"
    assert res["gloo_ifname"].status.value == "warn"


def test_expected_interface_missing_and_mtu(tmp_path):
    import psutil

    lo_mtu = psutil.net_if_stats()["lo"].mtu
    res = by_check(list(NetworkProbe().run(ctx_for({"network": {"interfaces": ["lo", "nosuch9"], "mtu": 1500}}))))
    assert res["interface:lo"].status.value == "pass"
    assert res["interface:nosuch9"].status.value == "fail"
    assert res["mtu:lo"].status.value == ("pass" if lo_mtu == 1500 else "warn")


def test_master_route_on_loopback():
    res = by_check(list(NetworkProbe().run(ctx_for(env={"MASTER_ADDR": "127.0.0.1"}))))
    assert res["master_route"].status.value == "pass"
    assert res["master_route"].data["master_route_dev"] == "lo"


def test_fake_infiniband_tree(tmp_path):
    """Recorded sysfs layout (there is no IB here): one port ACTIVE, one DOWN."""
    for dev, state, phys in (("mlx5_0", "4: ACTIVE", "5: LinkUp"), ("mlx5_1", "1: DOWN", "3: Disabled")):
        p = tmp_path / "sys/class/infiniband" / dev / "ports/1"
        p.mkdir(parents=True)
        (p / "state").write_text(state + "\n")
        (p / "phys_state").write_text(phys + "\n")
        (p / "rate").write_text("200 Gb/sec (4X HDR)\n")
        (p / "link_layer").write_text("InfiniBand\n")
    res = by_check(list(NetworkProbe().infiniband(ctx_for(root=tmp_path))))
    assert res["ib_port:mlx5_0/1"].status.value == "pass"
    assert res["ib_port:mlx5_1/1"].status.value == "fail" and res["ib_port:mlx5_1/1"].runbook == "ib-port-down"


NETNS_SCRIPT = """
import json
from llmdiag.config import Config
from llmdiag.context import Context
from llmdiag.probes.network import NetworkProbe
ctx = Context.create(config=Config.from_mapping({}), env={"MASTER_ADDR": "10.77.0.2"}, node="ns")
print(json.dumps([r.to_dict() for r in NetworkProbe().run(ctx)]))
"""


@pytest.mark.cluster
@pytest.mark.skipif(not ROOT or not shutil.which("ip"), reason="needs root and iproute2 for a network namespace")
def test_network_in_namespace_with_docker_bridge_and_veth():
    """A namespace with a real veth (eth0 there) and a veth named docker0: NCCL default picks eth0."""
    import json

    ns = f"llmdiagnet{os.getpid()}"
    run = lambda *a: subprocess.run(["ip", *a], check=True, capture_output=True, timeout=10)  # noqa: E731
    run("netns", "add", ns)
    try:
        host_end = f"vx{os.getpid() % 100000}"
        run("link", "add", host_end, "type", "veth", "peer", "name", "eth0", "netns", ns)
        run("link", "set", host_end, "up")  # carrier for eth0 inside
        run("-n", ns, "link", "add", "docker0", "type", "veth", "peer", "name", "vdk0")  # no dummy module here
        run("-n", ns, "addr", "add", "10.77.0.1/24", "dev", "eth0")
        run("-n", ns, "addr", "add", "172.17.0.1/16", "dev", "docker0")
        for dev in ("lo", "eth0", "docker0", "vdk0"):
            run("-n", ns, "link", "set", dev, "up")
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
        out = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", NETNS_SCRIPT], env=env,
                             capture_output=True, text=True, timeout=30, check=True).stdout
        res = {r["check"]: r for r in json.loads(out)}
        selected = res["nccl_ifname"]["data"]["nccl_ifname_selected"]
        assert "eth0" in selected and "docker0" not in selected and "lo" not in selected
        assert res["master_route"]["data"]["master_route_dev"] == "eth0"
        assert res["master_route"]["status"] == "pass"
        assert set(res["interfaces"]["data"]["interfaces"]) >= {"lo", "eth0", "docker0"}
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)


# -- filesystem ----------------------------------------------------------------------------
def test_writable_tmp_dir_passes_and_leaves_nothing(tmp_path):
    before = sorted(os.listdir(tmp_path))
    ctx = ctx_for({"filesystem": {"paths": [{"path": str(tmp_path), "required_free_gb": 0.001}],
                                  "throughput_test_mb": 2}})
    res = by_check(list(FilesystemProbe().run(ctx)))
    r = res[f"path:{tmp_path}"]
    assert r.status.value == "pass", r
    assert r.data["write_mb_s"] > 0 and r.data["read_method"]
    assert sorted(os.listdir(tmp_path)) == before
    assert ctx.cleanup.run() == []


@pytest.mark.skipif(not ROOT, reason="needs root to mount a read-only tmpfs")
def test_read_only_mount_fails_writability_and_leaves_nothing():
    d = tempfile.mkdtemp(prefix="llmdiag-ro-")
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", d], check=True, timeout=10)
        Path(d, "existing.txt").write_text("user data")
        subprocess.run(["mount", "-o", "remount,ro", d], check=True, timeout=10)
        before = sorted(os.listdir(d))
        res = by_check(list(FilesystemProbe().run(ctx_for({"filesystem": {"paths": [{"path": d}]}}))))
        r = res[f"path:{d}"]
        assert r.status.value == "fail" and r.runbook == "path-not-writable"
        assert r.data["fstype"] == "tmpfs"
        assert sorted(os.listdir(d)) == before
        assert Path(d, "existing.txt").read_text() == "user data"
    finally:
        subprocess.run(["umount", d], timeout=10)
        shutil.rmtree(d, ignore_errors=True)


def test_missing_path_low_space_and_shared_local(tmp_path):
    cfg = {"filesystem": {"paths": [{"path": str(tmp_path / "absent")},
                                    {"path": str(tmp_path), "required_free_gb": 1e9, "shared": True,
                                     "writable": False}]}}
    res = by_check(list(FilesystemProbe().run(ctx_for(cfg))))
    assert res[f"path:{tmp_path / 'absent'}"].runbook == "path-missing"
    assert res[f"path:{tmp_path}:space"].status.value == "fail"
    assert res[f"path:{tmp_path}:shared"].status.value == "warn"


def test_defaults_check_cwd_and_tmp():
    res = by_check(list(FilesystemProbe().run(ctx_for({"filesystem": {"throughput_test_mb": 0}}))))
    assert "defaults" in res["paths"].summary
    assert res["path:tempdir"].summary.startswith(f"{os.path.abspath(tempfile.gettempdir())}:")
    assert res["path:workdir"].summary.startswith(f"{os.getcwd()}:")


def test_default_tempdir_is_the_systems_not_llmdiags_private_one():
    """Under the CLI, tempfile points at llmdiag's private llmdiag-XXXX directory: the check
    is of the system's temp dir the job uses, named by role, the same name every run."""
    from llmdiag.util.procs import private_tempdir

    root = tempfile.gettempdir()
    names = []
    for _ in range(2):
        with private_tempdir() as private:
            assert private and os.path.dirname(private) == root
            res = by_check(list(FilesystemProbe().run(ctx_for({"filesystem": {"throughput_test_mb": 0}}))))
            assert res["path:tempdir"].summary.startswith(f"{root}:")
            names.append(sorted(res))
    assert names[0] == names[1] and not any("llmdiag-" in n for n in names[0])


def test_mountinfo_parsing_and_classes():
    text = ("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
            "30 22 0:40 / /mnt/my\\040data rw - nfs4 srv:/export rw\n"
            "31 22 0:41 / /lustre rw - lustre 10.0.0.1@o2ib:/fs rw\n")
    mounts = parse_mountinfo(text)
    assert mount_of("/mnt/my data/x", mounts)["fstype"] == "nfs4"
    assert mount_of("/mnt/myother", mounts)["fstype"] == "ext4"
    assert mount_of("/lustre", mounts)["source"].startswith("10.0.0.1")
    assert [classify(t) for t in ("nfs4", "lustre", "gpfs", "beegfs", "ceph", "overlay", "tmpfs", "xfs")] == \
        ["nfs", "lustre", "gpfs", "beegfs", "cephfs", "overlay", "tmpfs", "local"]


def test_bounded_call_gives_up_on_a_blocking_syscall():
    """A read on an empty pipe blocks in the kernel, like stat on a dead NFS mount."""
    import time

    from llmdiag.util.bounded import Hung, call_bounded

    r, w = os.pipe()
    try:
        t0 = time.monotonic()
        with pytest.raises(Hung):
            call_bounded(os.read, 0.2, r, 1)
        assert time.monotonic() - t0 < 1.0
    finally:
        os.write(w, b"x")  # let the abandoned thread finish
        os.close(w)


def test_io_files_are_tracked_for_cleanup_while_they_exist(tmp_path):
    from llmdiag.probes.filesystem import _probe_io

    seen = []

    def track(p):
        seen.append(p)
        assert Path(p).exists() and Path(p).parent == tmp_path and Path(p).name.startswith(".llmdiag-")

    out = _probe_io(str(tmp_path), 1, 5.0, track, lambda p: seen.remove(p))
    assert out["written_mb"] == 1 and seen == [] and os.listdir(tmp_path) == []


def test_min_speed_floor_on_a_real_interface():
    import psutil

    fast = [(n, s.speed) for n, s in psutil.net_if_stats().items() if s.isup and s.speed and n != "lo"]
    if not fast:
        pytest.skip("no up interface here reports a link speed")
    name, speed = fast[0]
    r = by_check(list(NetworkProbe().run(ctx_for({"network": {"min_speed_mbps": speed + 1}},
                                                 env={"NCCL_SOCKET_IFNAME": f"={name}"}))))["nccl_ifname"]
    assert r.status.value == "warn" and "min_speed_mbps" in r.summary
