"""System probe on the real machine: real /dev/shm, a real 64 MiB tmpfs, real rlimits in children."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from llmdiag.result import Status
from llmdiag.probes.system import SystemProbe
from tests.conftest import cli_env
from tests.probes.nodeutil import assert_actionable, by_check, context

CHILD = """
import json, resource, sys
from llmdiag.config import Config
from llmdiag.context import Context
from llmdiag.probes.system import SystemProbe
args = json.loads(sys.argv[1])
for name, (soft, hard) in args["limits"].items():
    resource.setrlimit(getattr(resource, name), (soft, hard))
ctx = Context.create(config=Config.from_mapping(args["config"]), env=args["env"], node="child")
if args.get("root"):
    ctx.root = __import__("pathlib").Path(args["root"])
p = SystemProbe()
print(json.dumps([getattr(p, "check_" + c)(ctx).to_dict() for c in args["checks"]]))
"""


def in_child(checks, limits, config=None, env=None, root=None):
    """Run checks in a child process whose resource limits were really lowered."""
    arg = json.dumps({"checks": checks, "limits": limits, "config": config or {}, "env": env or {}, "root": root})
    out = subprocess.run([sys.executable, "-c", CHILD, arg], capture_output=True, text=True, timeout=30, env=cli_env())
    assert out.returncode == 0, out.stderr
    return {r["check"]: r for r in json.loads(out.stdout)}


def test_real_machine_every_check_reports():
    results = list(SystemProbe().run(context()))
    r = by_check(results)
    assert set(r) == {"shm", "nofile", "memlock", "memory", "cpu"}
    st = os.statvfs("/dev/shm")
    assert r["shm"].data["shm_mib"] == st.f_blocks * st.f_frsize // (1024 * 1024)
    assert r["nofile"].data["nofile_soft"] in (resource.getrlimit(resource.RLIMIT_NOFILE)[0], "unlimited")
    assert r["cpu"].data["cpus_usable"] >= 1
    assert r["memory"].data["host_memory_gib"] > 0
    assert_actionable(results)


@pytest.fixture
def small_shm_root():
    """A fake root whose dev/shm is a real 64 MiB tmpfs, like a container's default."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    root = Path(tempfile.mkdtemp(prefix="llmdiag-shm-"))
    shm = root / "dev" / "shm"
    shm.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(shm)], capture_output=True, text=True)
    if mounted.returncode != 0:
        os.rmdir(shm)
        pytest.skip(f"cannot mount tmpfs here: {mounted.stderr.strip()}")
    try:
        yield root
    finally:
        subprocess.run(["umount", str(shm)], check=False)
        for p in (shm, shm.parent, root):
            os.rmdir(p)


def test_container_default_shm_fails(small_shm_root):
    ctx = context()
    ctx.root = small_shm_root
    r = SystemProbe().check_shm(ctx)
    assert r.status is Status.FAIL
    assert r.evidence[0].observed == 64 and r.evidence[0].unit == "MiB"
    assert "--shm-size" in r.remediation and r.runbook == "shm-too-small"
    # With a threshold the 64 MiB satisfies, it passes; filling it then warns.
    ctx.config = ctx.config.from_mapping({"thresholds": {"shm_min_mib": 32}})
    assert SystemProbe().check_shm(ctx).status is Status.PASS
    (small_shm_root / "dev" / "shm" / "nccl-stale").write_bytes(b"\0" * (40 * 1024 * 1024))
    r = SystemProbe().check_shm(ctx)
    assert r.status is Status.WARN and "free" in r.summary


def test_missing_shm_fails(tmp_path):
    ctx = context()
    ctx.root = tmp_path
    r = SystemProbe().check_shm(ctx)
    assert r.status is Status.FAIL and "not usable" in r.summary


def test_low_open_files_limit_in_a_child():
    r = in_child(["nofile"], {"RLIMIT_NOFILE": (1024, 4096)})["nofile"]
    assert r["status"] == "warn" and r["evidence"][0]["observed"] == 1024
    assert "limits.conf" in r["remediation"]  # the hard limit is too low as well
    # The hard limit allows the threshold: raising the soft limit in the script is enough.
    r = in_child(["nofile"], {"RLIMIT_NOFILE": (1024, 4096)}, config={"thresholds": {"nofile_min": 2048}})["nofile"]
    assert r["status"] == "warn" and "ulimit -n 2048" in r["remediation"]
    r = in_child(["nofile"], {"RLIMIT_NOFILE": (1024, 4096)}, config={"thresholds": {"nofile_min": 1000}})["nofile"]
    assert r["status"] == "pass"


def test_memlock_limited_fails_only_with_rdma_devices(tmp_path):
    lim = 8 * 1024 * 1024
    r = in_child(["memlock"], {"RLIMIT_MEMLOCK": (lim, lim)}, root=str(tmp_path))["memlock"]
    assert r["status"] == "pass" and "no RDMA devices" in r["summary"]
    (tmp_path / "sys" / "class" / "infiniband" / "mlx5_0").mkdir(parents=True)
    r = in_child(["memlock"], {"RLIMIT_MEMLOCK": (lim, lim)}, root=str(tmp_path))["memlock"]
    assert r["status"] == "fail" and "mlx5_0" in r["summary"] and r["runbook"] == "memlock-limited"
    assert r["evidence"][0]["observed"] == 8
    # A configured minimum the limit meets is accepted even with RDMA.
    r = in_child(["memlock"], {"RLIMIT_MEMLOCK": (lim, lim)}, config={"thresholds": {"memlock_min_mib": 4}},
                 root=str(tmp_path))["memlock"]
    assert r["status"] == "pass" and "8 MiB" in r["summary"]
    r = in_child(["memlock"], {"RLIMIT_MEMLOCK": (lim, lim)}, config={"thresholds": {"memlock_min_mib": 64}},
                 root=str(tmp_path / "no-rdma"))["memlock"]
    assert r["status"] == "warn"  # no RDMA here, but below the configured minimum


def test_cpu_cores_against_ranks_per_node(tmp_path):
    cores = len(os.sched_getaffinity(0))
    ctx = context(env={"MASTER_ADDR": "127.0.0.1", "NNODES": "1", "NODE_RANK": "0", "NPROC_PER_NODE": str(cores)})
    r = SystemProbe().check_cpu(ctx)
    assert r.status is Status.WARN and f"{cores} usable CPU cores for {cores} ranks" in r.summary
    assert SystemProbe().check_cpu(context(config={"cluster": {"nproc_per_node": 1}})).status is (
        Status.PASS if cores >= 2 else Status.WARN)
    # A recorded cgroup quota of one CPU limits the usable cores.
    (tmp_path / "sys" / "fs" / "cgroup").mkdir(parents=True)
    (tmp_path / "sys" / "fs" / "cgroup" / "cpu.max").write_text("100000 100000\n")
    ctx = context(config={"cluster": {"nproc_per_node": 1}})
    ctx.root = tmp_path
    r = SystemProbe().check_cpu(ctx)
    assert r.data["cpus_usable"] == 1 and r.status is Status.WARN


def test_host_memory_threshold():
    r = SystemProbe().check_memory(context(config={"thresholds": {"host_memory_min_gib": 100000}}))
    assert r.status is Status.FAIL and r.evidence[0].unit == "GiB"
