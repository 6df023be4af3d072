"""Each format for each command: the real commands' documents (not hand-built fixtures) in
``--format html|prometheus|junit``, each output parsed back by a real parser.

preflight, analyze-log and monitor run once per format through the CLI; nccl-bench (gloo
processes, slower) runs once through the CLI with ``--format prometheus`` and once as JSON,
whose document is then rendered in the other formats exactly as ``emit`` would.
"""

from __future__ import annotations

import json
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from llmdiag.reports.base import render
from tests.conftest import cli_env, llmdiag_argv

FIX = Path(__file__).resolve().parent.parent / "fixtures"
COMMANDS = {
    "preflight": ["preflight", "--probe", "system", "--probe", "launcher", "--probe", "ports"],
    "analyze-log": ["analyze-log", str(FIX / "logs" / "healthy" / "megatron_old.log"),
                    str(FIX / "logs" / "failing" / "megatron_nan.log")],
    "monitor": ["monitor", "--count", "3", "--interval", "0.1", "--replay-nvml",
                str(FIX / "nvml" / "timeline-h100-faults.json")],
}
NCCL_BENCH = ["nccl-bench", "--nproc", "2", "-b", "1K", "-e", "16K", "-n", "2", "-w", "1"]


def cli(args: list[str], timeout: float = 180) -> subprocess.CompletedProcess:
    proc = subprocess.run(llmdiag_argv(*args), capture_output=True, text=True, env=cli_env(), timeout=timeout)
    assert proc.returncode in (0, 1), proc.stderr  # 1: the fixture log / readings have failures
    assert "Traceback" not in proc.stderr and proc.stdout.strip(), proc.stderr
    return proc


def check_prometheus(text: str, command: str) -> dict:
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    status = fams["llmdiag_report_status"].samples[0]
    assert status.labels["command"] == command and status.value in (0, 1, 2, 3)
    assert len(fams) >= 2, "more than the status: the command's own metrics"
    return fams


def check_junit(text: str, failed: bool) -> ET.Element:
    root = ET.fromstring(text)
    cases = list(root.iter("testcase"))
    assert root.tag == "testsuites" and cases
    assert int(root.get("tests")) == len(cases)
    assert (int(root.get("failures")) > 0) == failed
    return root


def check_html(text: str) -> None:
    assert text.lstrip().lower().startswith("<!doctype html>")
    assert "<script" not in text.lower()
    # Self-contained: nothing is fetched (no http(s) or protocol-relative src/href/url()).
    assert not re.search(r"""(?:src|href)\s*=\s*["'](?:https?:)?//""", text, re.I)
    assert not re.search(r"url\(\s*['\"]?(?:https?:)?//", text, re.I)


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("fmt", ["html", "prometheus", "junit"])
def test_format_for_command(command, fmt):
    proc = cli(COMMANDS[command] + ["--format", fmt])
    failed = proc.returncode == 1
    if fmt == "html":
        check_html(proc.stdout)
        if command in ("analyze-log", "monitor"):  # the loss curve; one plot per GPU and the host
            assert proc.stdout.count('<svg class="chart"') >= (1 if command == "analyze-log" else 9)
    elif fmt == "prometheus":
        fams = check_prometheus(proc.stdout, command)
        expect = {"preflight": "llmdiag_check_status", "analyze-log": "llmdiag_log_last_step",
                  "monitor": "llmdiag_gpu_memory_used_bytes"}[command]
        assert expect in fams
    else:
        check_junit(proc.stdout, failed)


@pytest.mark.distributed
def test_nccl_bench_in_every_format():
    fams = check_prometheus(cli(NCCL_BENCH + ["--format", "prometheus"]).stdout, "nccl-bench")
    busbw = fams["llmdiag_nccl_busbw_bytes_per_second"].samples
    assert {s.labels["size_bytes"] for s in busbw} >= {"1024", "16384"}
    assert {s.labels["placement"] for s in busbw} == {"out_of_place", "in_place"}
    doc = json.loads(cli(NCCL_BENCH + ["--format", "json"]).stdout)
    assert doc["kind"] == "nccl-bench"
    check_html(render(doc, "html"))
    root = check_junit(render(doc, "junit"), failed=doc["status"] == "fail")
    assert any(c.get("name") == "all_reduce[16384 B]" for c in root.iter("testcase"))
    check_prometheus(render(doc, "prometheus"), "nccl-bench")
