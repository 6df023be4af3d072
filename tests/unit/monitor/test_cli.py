"""``llmdiag monitor`` as a real process: host sampling here, recorded GPUs, --on-alert, exit codes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import cli_env, llmdiag_argv
from tests.unit.monitor.util import FIXTURES

FAULTS = str(FIXTURES / "timeline-h100-faults.json")


def run(*args, timeout=60, **kw):
    return subprocess.run(llmdiag_argv("monitor", *args), capture_output=True, text=True, env=cli_env(),
                          timeout=timeout, **kw)


def write_recorder(tmp_path: Path) -> Path:
    """An alert command that appends its stdin and its argv to a file."""
    script = tmp_path / "recorder.py"
    script.write_text(
        "import json, sys\n"
        "data = sys.stdin.read()\n"
        "with open(sys.argv[1], 'a') as fh:\n"
        "    fh.write(json.dumps({'stdin': data, 'argv': sys.argv[2:]}) + '\\n')\n"
    )
    return script


def test_host_monitoring_writes_timeline_metrics_and_report(tmp_path):
    csv, prom, report = tmp_path / "t.csv", tmp_path / "m.prom", tmp_path / "r.json"
    proc = run("--count", "3", "--interval", "0.2", "--timeline", str(csv), "--prometheus-file", str(prom),
               "-f", "json", "-o", str(report))
    assert proc.returncode == 0, proc.stderr
    assert "GPUs absent" in proc.stderr and "monitoring the host only" in proc.stderr
    doc = json.loads(report.read_text())
    assert doc["kind"] == "monitor" and doc["samples"] == 3 and doc["gpu_count"] == 0
    assert doc["timeline"] == {"path": str(csv), "rows": 3}
    frame = pd.read_csv(csv)
    assert list(frame["device"]) == ["host"] * 3 and 0.35 <= frame["elapsed_s"].iloc[-1] < 10
    assert frame["mem_used_bytes"].gt(0).all() and frame["net_rx_bytes"].notna().all()
    assert frame["net_rx_bps"].iloc[1:].notna().all()  # a rate needs two readings
    fams = {f.name: f for f in text_string_to_metric_families(prom.read_text())}
    assert fams["llmdiag_gpu_present"].samples[0].value == 0
    assert 0 < fams["llmdiag_host_memory_used_ratio"].samples[0].value <= 1


def test_parquet_timeline(tmp_path):
    pq = tmp_path / "t.parquet"
    proc = run("--count", "2", "--interval", "0.1", "--timeline", str(pq), "--replay-nvml", FAULTS)
    assert proc.returncode == 1, proc.stderr  # critical alerts: ECC
    frame = pd.read_parquet(pq)
    assert len(frame) == 2 * 9 and set(frame["device"]) >= {"host", "gpu5"}


@pytest.mark.parametrize("value", ["0", "-1", "abc", "1e9"])
def test_bad_interval_is_exit_2_with_a_clear_message(value):
    proc = run("--interval", value, "--count", "1")
    assert proc.returncode == 2
    assert "--interval" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("content,needle", [
    ("[monitor]\ninterval_s = 0\n", "monitor.interval_s"),
    ("[monitor]\ngpu_memory_max_pct = 120\n", "monitor.gpu_memory_max_pct"),
    ("[monitor]\nthrottle_reasons = [\"hw_slowdwn\"]\n", "unknown throttle reason"),
    ("[monitor]\nintervall_s = 5\n", "unknown key"),
])
def test_bad_config_is_exit_2(tmp_path, content, needle):
    cfg = tmp_path / "llmdiag.toml"
    cfg.write_text(content)
    proc = run("--config", str(cfg), "--count", "1")
    assert proc.returncode == 2 and needle in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("args,needle", [
    (["--timeline", "x.txt"], ".csv or .parquet"),
    (["--timeline", "/nonexistent-dir/t.csv"], "--timeline '/nonexistent-dir/t.csv': directory"),
    (["--prometheus-file", "/nonexistent-dir/m.prom"], "--prometheus-file '/nonexistent-dir/m.prom': directory"),
    (["--pid", "999999999"], "no such process"),
    (["--on-alert", "'unclosed"], "--on-alert"),
])
def test_bad_outputs_are_exit_2(tmp_path, args, needle):
    proc = run("--count", "1", *args, cwd=tmp_path)
    assert proc.returncode == 2 and needle in proc.stderr and "Traceback" not in proc.stderr


def test_on_alert_gets_each_alert_as_json_on_stdin_without_a_shell(tmp_path):
    log = tmp_path / "alerts.jsonl"
    recorder = write_recorder(tmp_path)
    # Shell syntax in the arguments stays literal text: nothing runs it.
    cmd = f"{sys.executable} {recorder} {log} '$(touch {tmp_path}/pwned)' ';' 'x|y'"
    proc = run("--count", "4", "--interval", "0.1", "--replay-nvml", FAULTS, "--on-alert", cmd, "-f", "json")
    assert proc.returncode == 1, proc.stderr  # critical alerts fired
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    alerts = [json.loads(c["stdin"]) for c in calls]
    assert [a["rule"] for a in alerts] == ["gpu-ecc", "gpu-memory", "gpu-xid", "gpu-temperature", "gpu-throttle"]
    assert calls[0]["argv"] == [f"$(touch {tmp_path}/pwned)", ";", "x|y"]
    assert not (tmp_path / "pwned").exists()
    xid = alerts[2]
    assert xid["device"] == "gpu5" and xid["severity"] == "critical" and xid["observed"] == 48
    assert xid["runbook"] == "ecc-xid" and xid["node"] and xid["time"] > 0
    doc = json.loads(proc.stdout)
    assert doc["on_alert"] == {"sent": 5, "failed": 0, "dropped": 0}
    assert "ALERT [critical] gpu-xid gpu5" in proc.stderr


def test_on_alert_command_is_killed_after_its_timeout(tmp_path):
    cfg = tmp_path / "llmdiag.toml"
    cfg.write_text("[monitor]\non_alert_timeout_s = 0.5\n")
    sleeper = f"{sys.executable} -c 'import time; time.sleep(60)'"
    start = time.monotonic()
    proc = run("--config", str(cfg), "--count", "2", "--interval", "0.1", "--replay-nvml", FAULTS,
               "--on-alert", sleeper, "-f", "json")
    elapsed = time.monotonic() - start
    assert elapsed < 30, elapsed  # 2 alerts x 0.5 s, not 2 x 60 s
    assert "killed after 0.5 s" in proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["on_alert"]["failed"] == doc["on_alert"]["sent"] >= 1


def test_warning_only_is_exit_0_and_strict_makes_it_1(tmp_path):
    cfg = tmp_path / "llmdiag.toml"
    cfg.write_text("[monitor]\nhost_memory_max_pct = 1\n")  # any host is above 1%
    proc = run("--config", str(cfg), "--count", "1", "-f", "json")
    assert proc.returncode == 0, proc.stderr
    assert [a["rule"] for a in json.loads(proc.stdout)["alerts"]] == ["host-memory"]
    assert run("--config", str(cfg), "--count", "1", "--strict").returncode == 1


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_signals_stop_sampling_and_outputs_are_still_written(tmp_path, sig, code):
    csv, report = tmp_path / "t.csv", tmp_path / "r.json"
    proc = subprocess.Popen(llmdiag_argv("monitor", "--interval", "0.1", "--timeline", str(csv), "-f", "json",
                                         "-o", str(report)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env())
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (not csv.exists() or len(csv.read_text().splitlines()) < 3):
            time.sleep(0.05)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    doc = json.loads(report.read_text())
    assert doc["stop_reason"] == "stopped by signal" and doc["samples"] >= 2
    assert len(pd.read_csv(csv)) == doc["samples"]
    assert ("interrupted" in err) == (sig == signal.SIGINT)


def test_pid_stops_when_the_job_exits(tmp_path):
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.6)"])
    try:
        proc = run("--pid", str(job.pid), "--interval", "0.1", "-f", "json")
    finally:
        job.wait(10)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["stop_reason"] == "the watched process exited"


@pytest.mark.parametrize("fmt", ["terminal", "markdown", "html", "prometheus", "junit"])
def test_every_format(fmt):
    proc = run("--count", "2", "--interval", "0.1", "--replay-nvml", FAULTS, "-f", fmt, "--width", "120")
    assert proc.returncode == 1 and proc.stdout.strip(), proc.stderr
    if fmt == "terminal":
        assert proc.stdout.startswith("FAIL") and "gpu-memory gpu3" in proc.stdout
    if fmt == "prometheus":
        names = {f.name for f in text_string_to_metric_families(proc.stdout)}
        assert {"llmdiag_report_status", "llmdiag_gpu_memory_used_bytes"} <= names
    if fmt == "junit":
        import xml.etree.ElementTree as ET

        root = ET.fromstring(proc.stdout)
        failed = {c.get("name") for c in root.iter("testcase") if c.find("failure") is not None}
        assert any(name.startswith("gpu-ecc[") for name in failed)
    if fmt == "html":
        assert proc.stdout.lstrip().startswith("<!DOCTYPE html>") and "<script" not in proc.stdout.lower()


def test_help_does_not_import_heavy_modules():
    probe = subprocess.run([sys.executable, "-X", "importtime", "-m", "llmdiag", "monitor", "--help"],
                           capture_output=True, text=True, env=cli_env())
    assert probe.returncode == 0 and "--timeline" in probe.stdout
    heavy = [m for m in ("pandas", "pynvml", "psutil", "matplotlib", "numpy") if f" {m}\n" in probe.stderr]
    assert heavy == [], heavy


def test_on_alert_command_that_cannot_run_is_exit_2(tmp_path):
    proc = run("--count", "1", "--on-alert", "no-such-command-llmdiag --flag")
    assert proc.returncode == 2 and "no-such-command-llmdiag" in proc.stderr and "Traceback" not in proc.stderr


def test_busy_port_is_exit_2_and_creates_no_timeline(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = run("--count", "1", "--bind", "127.0.0.1", "--port", str(port), "--timeline", str(tmp_path / "t.csv"))
    assert proc.returncode == 2 and f"--port {port}: cannot listen" in proc.stderr
    assert not (tmp_path / "t.csv").exists()


def test_two_nodes_share_a_heartbeat_dir_and_the_one_that_stops_is_reported_silent(tmp_path):
    hb = tmp_path / "hb"
    hb.mkdir()
    short = subprocess.run(llmdiag_argv("monitor", "--count", "1", "--heartbeat-dir", str(hb)),
                           capture_output=True, text=True, env=cli_env(LLMDIAG_NODE_NAME="node-a"), timeout=60)
    assert short.returncode == 0, short.stderr
    proc = subprocess.run(llmdiag_argv("monitor", "--duration", "2.5", "--interval", "0.2", "--heartbeat-dir", str(hb),
                                       "-f", "json"),
                          capture_output=True, text=True, env=cli_env(LLMDIAG_NODE_NAME="node-b"), timeout=60)
    assert proc.returncode == 1, proc.stderr  # node-silent is critical
    silent = [a for a in json.loads(proc.stdout)["alerts"] if a["rule"] == "node-silent"]
    assert [a["device"] for a in silent] == ["node-a"] and silent[0]["node"] == "node-b"
    assert sorted(p.name for p in hb.iterdir()) == ["node-a.json", "node-b.json"]
