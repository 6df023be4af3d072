"""The preflight `nccl` probe on this machine: a real short gloo run, thresholds from the config,
findings in the report with a runbook. (Its cluster-group path, with auto pairwise, is tested
across namespace hosts in tests/cluster/test_nccl_bench_hosts.py.)"""

import json
import subprocess

import pytest

from llmdiag import runbooks
from tests.conftest import cli_env, llmdiag_argv

pytestmark = pytest.mark.distributed

SHORT = '[nccl_bench]\nprobe_max_bytes = "64K"\nprobe_iters = 3\n'


def preflight(tmp_path, config: str | None):
    argv = ["preflight", "--probe", "nccl", "-f", "json"]
    if config is not None:
        (tmp_path / "llmdiag.toml").write_text(config)
        argv[1:1] = ["-c", str(tmp_path / "llmdiag.toml")]
    proc = subprocess.run(llmdiag_argv(*argv), capture_output=True, text=True, env=cli_env(), timeout=180,
                          cwd=tmp_path)
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"no JSON report (exit {proc.returncode}); stderr:\n{proc.stderr[-2000:]}") from None
    return proc, {r["check"]: r for r in doc["results"] if r["probe"] == "nccl"}


def test_skips_without_section(tmp_path):
    proc, res = preflight(tmp_path, None)
    assert proc.returncode == 0, proc.stderr
    assert res["run"]["status"] == "skip" and "[nccl_bench]" in res["run"]["summary"]


def test_below_expected_busbw_fails_with_runbook(tmp_path):
    proc, res = preflight(tmp_path, SHORT + "expected_busbw_gbps = 1000\nmin_fraction = 0.8\n")
    assert proc.returncode == 1, proc.stderr
    busbw = res["all_reduce/busbw"]
    assert busbw["status"] == "fail" and busbw["runbook"] == "nccl-low-bandwidth"
    assert "800 GB/s" in busbw["summary"] and "local 2-process gloo run" in busbw["summary"]
    assert busbw["evidence"][0]["expected"] == 1000 and busbw["evidence"][0]["unit"] == "GB/s"
    assert busbw["remediation"] and "--pairwise" in busbw["remediation"]
    assert runbooks.exists("nccl-low-bandwidth")
    assert res["all_reduce/correctness"]["status"] == "pass"
    # the short version: 1K, 4K, 16K, 64K (up to probe_max_bytes); the plateau is its 2 largest sizes
    assert busbw["data"]["world_size"] == 2 and busbw["data"]["collectives"][0]["plateau_sizes"] == [16384, 65536]


def test_within_expected_busbw_passes(tmp_path):
    proc, res = preflight(tmp_path, SHORT + "expected_busbw_gbps = 0.000001\n")
    assert proc.returncode == 0, proc.stderr
    assert res["all_reduce/busbw"]["status"] == "pass"
    assert res["all_reduce/correctness"]["status"] == "pass"
