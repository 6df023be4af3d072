"""The alerting rules, checked by Prometheus' own tools: ``promtool check rules`` on what
``llmdiag alerting rules`` writes, and ``promtool test rules`` with a firing and a quiet case for
every rule (input series as llmdiag writes them, the exact labels and annotations expected)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from llmdiag import runbooks
from llmdiag.alerting import rules as R
from llmdiag.reports import prometheus
from tests.conftest import cli_env, llmdiag_argv

pytestmark = pytest.mark.skipif(not shutil.which("promtool"), reason="promtool (Debian: prometheus) not installed")

MON = 'command="monitor",node="gpu-07"'
GPU = MON + ',gpu="3",uuid="GPU-3a"'
LOG = 'command="analyze-log",node="gpu-07",log="/jobs/42/train.log"'

#: rule -> (firing: input series, eval time, the labels of each expected alert), (quiet: series, eval time)
CASES: dict[str, dict] = {
    "LlmdiagLossNaN": dict(
        fire=([(f'llmdiag_log_findings{{{LOG},kind="nan_loss",severity="error"}}', "1x5")], "2m",
              [dict(command="analyze-log", node="gpu-07", log="/jobs/42/train.log", kind="nan_loss")]),
        quiet=([(f'llmdiag_log_findings{{{LOG},kind="loss_spike",severity="warning"}}', "1x5")], "2m")),
    "LlmdiagLossSpike": dict(
        fire=([(f'llmdiag_log_findings{{{LOG},kind="loss_spike",severity="warning"}}', "1x5")], "2m",
              [dict(command="analyze-log", node="gpu-07", log="/jobs/42/train.log", kind="loss_spike")]),
        quiet=([(f'llmdiag_log_findings{{{LOG},kind="nan_loss",severity="error"}}', "1x5")], "2m")),
    "LlmdiagGpuMemoryHigh": dict(  # 96 % for 2 minutes; the quiet case is 87.5 %
        fire=([(f"llmdiag_gpu_memory_used_bytes{{{GPU}}}", "77000000000x5"),
               (f"llmdiag_gpu_memory_total_bytes{{{GPU}}}", "80000000000x5")], "3m",
              [dict(command="monitor", node="gpu-07", gpu="3", uuid="GPU-3a")]),
        quiet=([(f"llmdiag_gpu_memory_used_bytes{{{GPU}}}", "70000000000x5"),
                (f"llmdiag_gpu_memory_total_bytes{{{GPU}}}", "80000000000x5")], "3m")),
    "LlmdiagGpuXid": dict(  # a new event fires; an old count that does not grow is quiet
        fire=([(f"llmdiag_gpu_xid_events_total{{{GPU}}}", "0 0 1 1 1")], "3m",
              [dict(command="monitor", node="gpu-07", gpu="3", uuid="GPU-3a")]),
        quiet=([(f"llmdiag_gpu_xid_events_total{{{GPU}}}", "2x30")], "25m")),
    "LlmdiagGpuEccUncorrectable": dict(
        fire=([(f"llmdiag_gpu_ecc_uncorrectable_errors_total{{{GPU}}}", "0 0 2 2")], "3m",
              [dict(command="monitor", node="gpu-07", gpu="3", uuid="GPU-3a")]),
        quiet=([(f"llmdiag_gpu_ecc_uncorrectable_errors_total{{{GPU}}}", "0x5")], "3m")),
    "LlmdiagGpuThrottled": dict(  # 5 minutes on; flapping never holds for 5 minutes
        fire=([(f"llmdiag_gpu_throttled{{{GPU}}}", "1x10")], "6m",
              [dict(command="monitor", node="gpu-07", gpu="3", uuid="GPU-3a")]),
        quiet=([(f"llmdiag_gpu_throttled{{{GPU}}}", "1 0 1 0 1 0 1 0 1 0")], "8m")),
    "LlmdiagGpuOverheating": dict(
        fire=([(f"llmdiag_gpu_temperature_celsius{{{GPU}}}", "90x5"),
               (f"llmdiag_gpu_temperature_slowdown_celsius{{{GPU}}}", "87x5")], "2m",
              [dict(command="monitor", node="gpu-07", gpu="3", uuid="GPU-3a")]),
        quiet=([(f"llmdiag_gpu_temperature_celsius{{{GPU}}}", "80x5"),
                (f"llmdiag_gpu_temperature_slowdown_celsius{{{GPU}}}", "87x5")], "2m")),
    "LlmdiagHostMemoryHigh": dict(
        fire=([(f"llmdiag_host_memory_used_ratio{{{MON}}}", "0.97x10")], "6m",
              [dict(command="monitor", node="gpu-07")]),
        quiet=([(f"llmdiag_host_memory_used_ratio{{{MON}}}", "0.90x10")], "6m")),
    "LlmdiagNodeSilent": dict(  # samples (Unix time = the eval clock) stop at 3 min: silent from 5 min on
        fire=([(f"llmdiag_monitor_last_sample_timestamp_seconds{{{MON}}}", "0+60x3 180x6")], "8m",
              [dict(command="monitor", node="gpu-07")]),
        quiet=([(f"llmdiag_monitor_last_sample_timestamp_seconds{{{MON}}}", "0+60x20")], "15m"),
        # the node and its node_exporter gone: the series ends (past Prometheus' 5 min lookback at 20 min)
        more=[([(f"llmdiag_monitor_last_sample_timestamp_seconds{{{MON}}}", "0+60x5")], "20m",
               [dict(command="monitor", node="gpu-07")])]),
    "LlmdiagPreflightFailed": dict(
        fire=([('llmdiag_check_status{command="preflight",node="gpu-07",probe="gpu",check="ecc"}', "3x3")], "1m",
              [dict(command="preflight", node="gpu-07", probe="gpu", check="ecc")]),
        quiet=([('llmdiag_check_status{command="preflight",node="gpu-07",probe="gpu",check="ecc"}', "2x3")], "1m")),
    "LlmdiagNodeMissing": dict(
        fire=([('llmdiag_node_missing{command="preflight",node="gpu-09"}', "1x3")], "1m",
              [dict(command="preflight", node="gpu-09")]),
        quiet=([('llmdiag_node_missing{command="preflight",node="gpu-09"}', "0x3")], "1m")),
    "LlmdiagBusbwBelowExpected": dict(
        fire=([('llmdiag_nccl_plateau_busbw_bytes_per_second{command="nccl-bench",node="gpu-07",'
                'collective="all_reduce"}', "150000000000x3"),
               ('llmdiag_nccl_expected_busbw_bytes_per_second{command="nccl-bench",node="gpu-07"}',
                "180000000000x3")], "1m",
              [dict(command="nccl-bench", node="gpu-07", collective="all_reduce")]),
        quiet=([('llmdiag_nccl_plateau_busbw_bytes_per_second{command="nccl-bench",node="gpu-07",'
                 'collective="all_reduce"}', "190000000000x3"),
                ('llmdiag_nccl_expected_busbw_bytes_per_second{command="nccl-bench",node="gpu-07"}',
                 "180000000000x3")], "1m")),
}

_LABEL = re.compile(r"\{\{ \$labels\.(\w+) \}\}")


def expand(template: str, labels: dict[str, str]) -> str:
    """What Prometheus makes of a template that uses only ``{{ $labels.NAME }}`` (checked here)."""
    out = _LABEL.sub(lambda m: labels.get(m.group(1), ""), template)
    assert "{{" not in out, f"a template action this test does not model: {template}"
    return out


def write_rules(tmp_path, *args: str):
    path = tmp_path / "llmdiag-rules.yml"
    proc = subprocess.run(llmdiag_argv("alerting", "rules", "-o", str(path), *args), capture_output=True, text=True,
                          env=cli_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    return path


def test_every_rule_reads_declared_metrics_and_names_a_runbook():
    assert set(CASES) == {r.alert for r in R.RULES}, "every rule has its promtool cases below"
    for r in R.RULES:
        names = set(re.findall(r"\bllmdiag_[a-z0-9_]+", r.expr))
        assert names and names <= set(prometheus.METRICS), (r.alert, names - set(prometheus.METRICS))
        assert runbooks.exists(r.runbook), r.runbook
        assert r.severity in ("critical", "warning")
        assert not {"job", "instance", "run"} & set(re.findall(r"\$labels\.(\w+)", r.summary + r.description))


def test_promtool_checks_the_written_rules(tmp_path):
    path = write_rules(tmp_path, "--runbook-url", "https://wiki.example/runbooks", "--label", "team=training")
    proc = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0 and f"{len(R.RULES)} rules found" in proc.stdout, proc.stdout + proc.stderr
    rule = yaml.safe_load(path.read_text())["groups"][0]["rules"][0]
    assert rule["labels"]["team"] == "training"
    assert rule["annotations"]["runbook_url"] == f"https://wiki.example/runbooks/{R.RULES[0].runbook}.md"


def _test_case(rule: R.Rule, series, eval_time, expected) -> dict:
    alerts = []
    for labels in expected or ():
        full = {**labels, "severity": rule.severity}
        alerts.append({"exp_labels": full,
                       "exp_annotations": {k: expand(v, full) for k, v in R.annotations(rule).items()}})
    return {"interval": "1m", "input_series": [{"series": s, "values": v} for s, v in series],
            "alert_rule_test": [{"eval_time": eval_time, "alertname": rule.alert, "exp_alerts": alerts}]}


def test_promtool_unit_tests_fire_and_stay_quiet_for_every_rule(tmp_path):
    rules_file = write_rules(tmp_path)
    tests = []
    for rule in R.RULES:
        case = CASES[rule.alert]
        tests.append(_test_case(rule, *case["fire"]))
        tests.append(_test_case(rule, *case["quiet"], None))
        tests += [_test_case(rule, *more) for more in case.get("more", ())]
    spec = tmp_path / "llmdiag-rules.test.yml"
    spec.write_text(yaml.safe_dump({"rule_files": [rules_file.name], "evaluation_interval": "1m", "tests": tests}))
    proc = subprocess.run(["promtool", "test", "rules", spec.name], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_promtool_sees_a_rule_that_waits_for_its_duration(tmp_path):
    """The cases above could pass with `for` ignored; one that must not fire yet at 1 minute."""
    rule = next(r for r in R.RULES if r.alert == "LlmdiagGpuMemoryHigh")
    rules_file = write_rules(tmp_path)
    series, _, _ = CASES[rule.alert]["fire"]
    spec = tmp_path / "t.yml"
    spec.write_text(yaml.safe_dump({"rule_files": [rules_file.name], "evaluation_interval": "1m",
                                    "tests": [_test_case(rule, series, "1m", None)]}))
    proc = subprocess.run(["promtool", "test", "rules", spec.name], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # and the same file with a wrong expectation fails: promtool really compares
    bad = _test_case(rule, series, "1m", [dict(command="monitor", node="gpu-07", gpu="3", uuid="GPU-3a")])
    spec.write_text(yaml.safe_dump({"rule_files": [rules_file.name], "evaluation_interval": "1m", "tests": [bad]}))
    proc = subprocess.run(["promtool", "test", "rules", spec.name], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode != 0


@pytest.mark.skipif(not shutil.which("amtool"), reason="amtool (Debian: prometheus-alertmanager) not installed")
def test_alerting_write_gives_files_the_tools_accept(tmp_path):
    import json

    proc = subprocess.run(llmdiag_argv("alerting", "write", str(tmp_path), "--webhook-url-file",
                                       str(tmp_path / "url")), capture_output=True, text=True, env=cli_env(),
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alertmanager-llmdiag.yml", "llmdiag-dashboard.json",
                                                          "llmdiag-rules.yml"]
    assert subprocess.run(["promtool", "check", "rules", str(tmp_path / "llmdiag-rules.yml")]).returncode == 0
    (tmp_path / "url").write_text("http://127.0.0.1:9/hook\n")
    am = subprocess.run(["amtool", "check-config", str(tmp_path / "alertmanager-llmdiag.yml")], capture_output=True,
                        text=True)
    assert am.returncode == 0, am.stdout + am.stderr
    board = json.loads((tmp_path / "llmdiag-dashboard.json").read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", ())]
    assert exprs and all(set(re.findall(r"\bllmdiag_[a-z0-9_]+", e)) <= set(prometheus.METRICS) for e in exprs)
    again = subprocess.run(llmdiag_argv("alerting", "rules", "--label", "severity=x"), capture_output=True, text=True,
                           env=cli_env(), timeout=120)
    assert again.returncode == 2 and again.stderr.count("\n") == 1
