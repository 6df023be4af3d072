"""Node-health hooks tested as their callers call them.

node-problem-detector: the rule of examples/node-health/npd-llmdiag.json run as NPD runs it
(path + args, killed at the rule's timeout): the exit code is the verdict (0 OK, 1 NonOK, 2
Unknown) and stdout one line within max_output_length bytes. LBNL NHC: examples/node-health/
llmdiag.nhc sourced by bash beside a ``die`` that behaves as NHC's (an optional numeric exit
code first; exits with it, or returns 0 in check-all mode ``nhc -a``), run against the real
llmdiag on a failing and a passing node.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llmdiag.health.verdict import Verdict, fit, judge, line
from llmdiag.result import Result, Status
from tests.conftest import REPO, cli_env, llmdiag_argv
from tests.unit.test_plugins import install_fake_distribution

EXAMPLES = REPO / "examples" / "node-health"
RULE = json.loads((EXAMPLES / "npd-llmdiag.json").read_text())
MAX = RULE["pluginConfig"]["max_output_length"]


def _seconds(text: str) -> float:
    return float(text[:-1]) * {"s": 1, "m": 60}[text[-1]]


def npd_run(*args: str, timeout: float = _seconds(RULE["rules"][0]["timeout"]), env=None):
    """What NPD does with a rule: exec path+args, wait up to the timeout, read exit code and stdout."""
    start = time.monotonic()
    proc = subprocess.run(llmdiag_argv(*args), capture_output=True, text=True, env=env or cli_env(), timeout=timeout)
    return proc, time.monotonic() - start


def assert_npd_message(proc, limit: int = MAX) -> str:
    assert proc.stdout.endswith("\n") and proc.stdout.count("\n") == 1, proc.stdout
    msg = proc.stdout.rstrip("\n")
    assert msg.strip() and len(msg.encode()) <= limit, msg
    return msg


def test_the_shipped_rule_as_npd_runs_it():
    rule = RULE["rules"][0]
    assert rule["path"].endswith("/llmdiag") and rule["type"] == "permanent"
    assert rule["condition"] in {c["type"] for c in RULE["conditions"]}
    budget = float(rule["args"][rule["args"].index("--timeout") + 1])
    assert budget < _seconds(rule["timeout"])  # llmdiag answers before NPD kills it
    proc, wall = npd_run(*rule["args"])
    assert proc.returncode in (Verdict.OK, Verdict.NONOK), proc.stdout + proc.stderr
    assert_npd_message(proc)
    assert wall < _seconds(rule["timeout"])


def test_daemonset_carries_the_same_plugin_config():
    yaml = pytest.importorskip("yaml")
    docs = list(yaml.safe_load_all((EXAMPLES / "daemonset.yaml").read_text()))
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    assert json.loads(cm["data"]["llmdiag-plugin-monitor.json"]) == RULE
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    cmd = ds["spec"]["template"]["spec"]["containers"][0]["command"]
    assert "--config.custom-plugin-monitor=/config/llmdiag-plugin-monitor.json" in cmd


def test_npd_a_failing_node_is_nonok_with_the_finding():
    # no GPU here: 8 expected is the finding
    proc, _ = npd_run("node-health", "--protocol", "npd", "--gpus-per-node", "8", "--probe", "gpu", "--probe",
                      "launcher")
    assert proc.returncode == Verdict.NONOK, proc.stdout + proc.stderr
    msg = assert_npd_message(proc)
    assert msg.startswith("gpu/count: 0 GPU(s) usable, 8 expected")


def test_npd_a_healthy_node_is_ok(tmp_path):
    report = tmp_path / "r.json"
    proc, _ = npd_run("node-health", "--probe", "launcher", "--report", str(report))
    assert proc.returncode == Verdict.OK, proc.stdout + proc.stderr
    assert assert_npd_message(proc).startswith("OK: ")
    doc = json.loads(report.read_text())
    assert doc["command"] == "node-health" and {r["probe"] for r in doc["results"]} == {"launcher"}


def test_npd_bad_usage_is_unknown_on_stdout():
    proc, _ = npd_run("node-health", "--probe", "nosuch", "--max-output-length", "40")
    assert proc.returncode == Verdict.UNKNOWN
    assert assert_npd_message(proc, 40).startswith("Unknown: unknown probe 'nosuch'")


HANG_PLUGIN = '''
import time
from llmdiag.probe import BaseProbe

class HangProbe(BaseProbe):
    name = "hang"
    description = "sleeps past every deadline (a hung driver call)"
    timeout_s = 600.0

    def run(self, ctx):
        time.sleep(120)
        return []
'''


def test_npd_a_hung_probe_is_bounded_and_unknown(tmp_path):
    """A third-party probe stuck in a call: the run still ends within --timeout, and the node is
    Unknown (llmdiag could not tell), not NonOK."""
    site = tmp_path / "site"
    install_fake_distribution(site, {"hang": "hello_plugin:HangProbe"}, source=HANG_PLUGIN)
    env = cli_env()
    env["PYTHONPATH"] = f"{site}{os.pathsep}{env['PYTHONPATH']}"
    proc, wall = npd_run("node-health", "--probe", "hang", "--probe", "launcher", "--timeout", "5", env=env)
    assert proc.returncode == Verdict.UNKNOWN, proc.stdout + proc.stderr
    assert assert_npd_message(proc).startswith("Unknown: hang/probe: timed out after")
    assert wall < 5 + 15, wall  # the budget plus interpreter start-up on a loaded machine


def _result(check, status, runbook=None, summary="x"):
    fix = "do it" if status in (Status.WARN, Status.FAIL) else None
    return Result(probe="p", check=check, node="n", status=status, summary=summary, remediation=fix,
                  runbook=runbook or (None if status is Status.PASS else "check-skipped"))


def test_verdict_rules():
    ok, warn = _result("a", Status.PASS), _result("w", Status.WARN, "nofile-low")
    timeout = _result("probe", Status.FAIL, "probe-timeout")
    fail = _result("f", Status.FAIL, "gpu-ecc-errors", summary="ECC " + "é" * 100)
    assert judge([ok, warn]) == (Verdict.OK, [])
    assert judge([ok, warn], strict=True) == (Verdict.NONOK, [warn])
    assert judge([ok, timeout]) == (Verdict.UNKNOWN, [timeout])
    verdict, behind = judge([warn, timeout, fail], strict=True)
    assert verdict is Verdict.NONOK and behind == [fail, warn]
    msg = line(verdict, behind, [warn, timeout, fail], "n", 80)
    assert len(msg.encode()) <= 80 and msg.endswith("... (+1 more)") and msg.startswith("p/f: ECC é")
    msg.encode().decode()  # never a split character
    assert fit("a\nb\tc", 80) == "a b c"
    assert len(fit("x" * 100, 20, " (+5 more)").encode()) == 20


# ---------------------------------------------------------------------------------------- NHC

NHC_SHIM = r'''
shopt -s extglob
CHECK_DIED=0
# as NHC's die(): an optional numeric exit code first, the rest is the message; it logs, then
# exits with the code, except in check-all mode (nhc -a), where it counts and returns 0
function die() {
    local RET
    if [[ -n "$1" && "$1" == +([0-9]) ]]; then RET="$1"; shift; else RET=1; fi
    CHECK_DIED=1
    echo "$*" > "$DIE_FILE"
    if [[ "$NHC_CHECK_ALL" == "1" ]]; then ((FAIL_CNT++)); return 0; fi
    exit "$RET"
}
function log() { echo "$*" >> "$LOG_FILE"; }
source "$NHC_SCRIPT"
check_llmdiag "$@"
echo "returned $? died $CHECK_DIED"
'''


def nhc(tmp_path: Path, *args: str, llmdiag: str | None = None, check_all: bool = False):
    wrapper = tmp_path / "llmdiag"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} -m llmdiag \"$@\"\n")
    wrapper.chmod(0o755)
    env = cli_env(NHC_SCRIPT=str(EXAMPLES / "llmdiag.nhc"), DIE_FILE=str(tmp_path / "die"),
                  LOG_FILE=str(tmp_path / "log"), LLMDIAG=llmdiag or str(wrapper), NHC_CHECK_ALL="1" if check_all else "")
    (tmp_path / "die").unlink(missing_ok=True)
    proc = subprocess.run(["bash", "-c", NHC_SHIM, "nhc", *args], capture_output=True, text=True, env=env, timeout=120)
    died = (tmp_path / "die").read_text().strip() if (tmp_path / "die").exists() else None
    return proc, died


def test_nhc_failing_node_dies_with_the_finding(tmp_path):
    proc, died = nhc(tmp_path, "-t", "20", "--", "--gpus-per-node", "8", "--probe", "gpu")
    assert proc.returncode == 1 and "returned" not in proc.stdout  # NHC's die exits
    assert died.startswith("check_llmdiag:  gpu/count: 0 GPU(s) usable, 8 expected"), died


def test_nhc_failing_node_in_check_all_mode_returns_failure(tmp_path):
    proc, died = nhc(tmp_path, "--", "--gpus-per-node", "8", "--probe", "gpu", check_all=True)
    assert proc.stdout.strip() == "returned 1 died 1" and died.startswith("check_llmdiag:  gpu/count:")


def test_nhc_passing_node_returns_0_without_die(tmp_path):
    proc, died = nhc(tmp_path, "-t", "20", "--", "--probe", "launcher")
    assert proc.stdout.strip() == "returned 0 died 0", proc.stdout + proc.stderr
    assert died is None


def test_nhc_llmdiag_that_cannot_check(tmp_path):
    proc, died = nhc(tmp_path, "--", "--probe", "nosuch")
    assert proc.returncode == 1 and "could not check this node (exit 2): Unknown: unknown probe" in died
    proc, died = nhc(tmp_path, "-U", "--", "--probe", "nosuch")
    assert proc.stdout.strip() == "returned 0 died 0" and "could not check" in (tmp_path / "log").read_text()
    proc, died = nhc(tmp_path, llmdiag=str(tmp_path / "missing"))
    assert proc.returncode == 1 and died == f"check_llmdiag:  {tmp_path / 'missing'} not found or not runnable"
    proc, died = nhc(tmp_path, "-x")
    assert proc.returncode == 1 and died == "check_llmdiag:  unknown option -x"
