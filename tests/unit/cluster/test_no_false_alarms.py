"""A healthy cluster raises no alarm: each defect that used to fail a healthy node, tested for real.

Own rendezvous port (a real listening socket in this process, and in the parent that started
a child), config defaults never compared with launcher values, the shared-path fingerprint
blind to llmdiag's own temp files, a timed-out torch import kept out of the consistency
comparison, GPUs expected on a node without a driver, one node check per node under torchrun.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

from llmdiag.cluster import facts, merge, sharedfs
from llmdiag.probes.gpu import GpuProbe
from llmdiag.probes.launcher import LauncherProbe
from llmdiag.probes.ports import PortsProbe
from llmdiag.probes.software import SoftwareProbe
from llmdiag.result import Status
from llmdiag.runner import run_probe
from tests.conftest import cli_env
from tests.probes.nodeutil import by_check, context, nvml_fixture


def _listen() -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", 0))
    s.listen()
    return s


def test_master_port_held_by_this_process_is_expected_not_busy():
    s = _listen()
    port = s.getsockname()[1]
    try:
        ctx = context(env={"MASTER_PORT": str(port)})
        alone = PortsProbe().master_port(ctx, port)
        ctx.services["cluster_agent"] = True  # as the cluster agent (rank 0 hosts the store) sets it
        r = PortsProbe().master_port(ctx, port)
    finally:
        s.close()
    assert alone.status is Status.FAIL  # not a cluster agent: a port this process holds is busy for the job
    assert r.status is Status.PASS, r.summary
    assert "this job's own rendezvous" in r.summary and f"pid {os.getpid()}" in r.summary


def test_master_port_held_by_the_launcher_that_started_us_is_expected():
    """A parent (like torchrun's agent with its store) holds the port; its child runs the probe."""
    code = textwrap.dedent("""
        import socket, subprocess, sys
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", 0)); s.listen(); port = s.getsockname()[1]
        child = ("from llmdiag.probes.ports import PortsProbe; from tests.probes.nodeutil import context; "
                 "env = dict(TORCHELASTIC_RUN_ID='j', RANK='0', LOCAL_RANK='0', WORLD_SIZE='2', MASTER_ADDR='h'); "
                 f"r = PortsProbe().master_port(context(env=env), {port}); print(r.status.value, r.summary)")
        print(subprocess.run([sys.executable, "-c", child], capture_output=True, text=True).stdout)
    """)
    out = subprocess.run([sys.executable, "-c", code], env=cli_env(), capture_output=True, text=True, timeout=60)
    assert out.stdout.startswith("pass "), out.stdout + out.stderr
    assert "the launcher that started this process" in out.stdout


def test_master_port_held_by_another_program_still_fails():
    code = "import socket,time; s=socket.socket(); s.bind(('0.0.0.0',0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(30)"
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        port = int(p.stdout.readline())
        r = PortsProbe().master_port(context(), port)
    finally:
        p.kill()
        p.wait()
    assert r.status is Status.FAIL and f"pid {p.pid}" in r.summary


def test_port_range_ports_held_by_this_process_are_not_busy():
    s = _listen()
    port = s.getsockname()[1]
    try:
        ctx = context()
        ctx.services["cluster_agent"] = True  # the port-matrix listeners of this agent
        r = PortsProbe().port_range(ctx, port, port + 1, 1)
    finally:
        s.close()
    assert r.status is Status.PASS, r.summary


def test_config_without_master_port_is_not_compared_with_the_real_one():
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29611", "NNODES": "2", "NODE_RANK": "1"}
    r = by_check(LauncherProbe().run(context(env=env, config={"cluster": {"share_wait_s": 2.0}})))["config"]
    assert r.status is Status.PASS, r.summary
    r = by_check(LauncherProbe().run(context(env=env, config={"cluster": {"master_port": 29500}})))["config"]
    assert r.status is Status.FAIL and "29611 != 29500" in r.summary


def test_fingerprint_ignores_llmdiags_own_temp_files(tmp_path):
    (tmp_path / "data.bin").write_bytes(b"x" * 100)
    before = sharedfs.fingerprint(str(tmp_path))
    (tmp_path / ".llmdiag-abc123.tmp").write_bytes(b"y" * 4096)  # the filesystem probe's throughput file
    assert sharedfs.fingerprint(str(tmp_path)) == before
    (tmp_path / "user.txt").write_text("z")
    assert sharedfs.fingerprint(str(tmp_path)) != before


def test_timed_out_torch_import_is_not_a_version(tmp_path):
    pkg = tmp_path / "torch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import time\ntime.sleep(60)\n")
    probe = SoftwareProbe()
    probe.torch_timeout_s = 1.0
    env = {"PYTHONPATH": str(tmp_path), "PATH": os.environ.get("PATH", "")}
    results = list(probe.run(context(env=env, nvml=nvml_fixture("no-driver"))))
    r = by_check(results)
    assert r["torch"].status is Status.FAIL and "within 1 s" in r["torch"].summary
    got = facts.probe_facts([x.to_dict() for x in results])
    assert "torch" not in got, got  # not "torch (none)": unknown, so never compared


def test_one_timed_out_majority_does_not_blame_the_healthy_node():
    def doc(rank, data):
        return {"node": f"node-{rank}", "node_rank": rank, "results": [],
                "meta": {"facts": {"probes": data}, "world": {"nnodes": 4}}}
    docs = [doc(0, {"torch": "2.13.0+cpu"})] + [doc(k, {}) for k in (1, 2, 3)]
    report = merge.build_report(docs, nnodes=4)
    assert not [r for r in report.cluster_results if r.check.startswith("consistency:")]


def test_gpus_expected_on_a_node_without_a_driver_fail():
    ctx = context(config={"cluster": {"gpus_per_node": 8}}, nvml=nvml_fixture("no-driver"))
    (r,) = run_probe(GpuProbe(), ctx)
    assert r.status is Status.FAIL and r.check == "count" and "8 expected" in r.summary
    assert r.data["gpu_count"] == 0
    (r,) = run_probe(GpuProbe(), context(nvml=nvml_fixture("no-driver")))
    assert r.status is Status.SKIP  # nothing expected: a CPU node is not a fault


def test_torchrun_local_rank_1_on_one_node_runs_no_node_checks():
    env = cli_env(TORCHELASTIC_RUN_ID="j", RANK="1", LOCAL_RANK="1", WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
                  MASTER_ADDR="127.0.0.1", MASTER_PORT="29511")
    p = subprocess.run([sys.executable, "-m", "llmdiag", "preflight", "--probe", "system", "-f", "json"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout == "", p.stdout
    assert "only local rank 0 runs the node checks" in p.stderr
    p = subprocess.run([sys.executable, "-m", "llmdiag", "preflight", "--probe", "system", "-f", "json"],
                       env=dict(env, RANK="0", LOCAL_RANK="0"), capture_output=True, text=True, timeout=60)
    assert [r for r in json.loads(p.stdout)["results"] if r["probe"] == "system"], p.stderr


def test_token_seen_everywhere_supersedes_the_local_fstype_guess():
    path = "/data/shared"

    def doc(rank, seen):
        warn = {"probe": "filesystem", "check": f"path:{path}:shared", "node": f"node-{rank}", "status": "warn",
                "summary": f"{path} should be shared but is on ext4 (local)", "runbook": "path-not-shared",
                "remediation": "mount it", "evidence": [{"name": "class", "observed": "local"}]}
        f = {"exists": True, "fstype": "ext4", "source": "/dev/sda1", "mount_root": "/", "writable": True,
             "shared": True, "must_write": True, "token_seen": seen, "fingerprint": {"digest": "d"}}
        return {"node": f"node-{rank}", "node_rank": rank, "results": [warn],
                "meta": {"facts": {"paths": {path: f}}, "world": {"nnodes": 3}}}

    report = merge.build_report([doc(0, True), doc(1, True), doc(2, True)], nnodes=3)
    assert {r.status for n in report.nodes for r in n.results} == {Status.PASS}
    assert report.status is Status.PASS
    report = merge.build_report([doc(0, True), doc(1, True), doc(2, False)], nnodes=3)
    assert {r.status for n in report.nodes for r in n.results} == {Status.WARN}  # not proven: kept
