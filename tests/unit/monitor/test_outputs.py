"""Timeline files read back with pandas, Prometheus text parsed by prometheus_client, the
HTTP endpoint scraped while the monitor runs, heartbeats of silent peers."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import pandas as pd
import pytest
from prometheus_client.parser import text_string_to_metric_families

from llmdiag.errors import UsageError
from llmdiag.monitor import sinks as S
from llmdiag.monitor.heartbeat import Heartbeat
from llmdiag.monitor.loop import Sinks
from llmdiag.reports.base import render
from tests.unit.monitor.util import make_monitor


def families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_timeline_has_one_row_per_sample_and_device(tmp_path, suffix):
    path = tmp_path / f"timeline{suffix}"
    sinks = Sinks(timeline=S.Timeline(str(path)))
    doc = make_monitor("timeline-h100-faults", sinks=sinks).run(count=3)
    frame = pd.read_csv(path) if suffix == ".csv" else pd.read_parquet(path)
    assert len(frame) == 3 * (1 + 8) == sinks.timeline.rows_written
    assert list(frame.columns) == list(S.COLUMNS)
    assert sorted(frame["device"].unique()) == ["gpu0", "gpu1", "gpu2", "gpu3", "gpu4", "gpu5", "gpu6", "gpu7", "host"]
    host = frame[frame.device == "host"]
    assert (host["mem_total_bytes"] > 0).all() and host["cpu_pct"].between(0, 100).all()
    gpu3 = frame[frame.device == "gpu3"].sort_values("elapsed_s")
    assert list(gpu3["memory_used_pct"].round(1)) == [83.0, 97.0, 97.0]
    assert (frame["node"] == "node-0").all() and frame["time"].is_monotonic_increasing
    assert doc["samples"] == 3


def test_csv_timeline_is_readable_while_the_monitor_runs(tmp_path):
    path = tmp_path / "t.csv"
    sinks = Sinks(timeline=S.Timeline(str(path)))
    mon = make_monitor(sinks=sinks, interval_s=0.05)
    t = threading.Thread(target=mon.run, kwargs={"count": 1000})
    t.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(path.read_text().splitlines()) < 4:
            time.sleep(0.05)
        assert len(pd.read_csv(path)) >= 3  # flushed row by row
    finally:
        mon.stop.set()
        t.join(10)


def test_timeline_suffix_is_checked(tmp_path):
    with pytest.raises(UsageError, match=r"\.csv or \.parquet"):
        S.Timeline(str(tmp_path / "timeline.txt"))


def test_prometheus_file_is_parsed_by_prometheus_client(tmp_path):
    prom = tmp_path / "llmdiag.prom"
    sinks = Sinks(prometheus_file=S.PrometheusFile(str(prom)), render_metrics=lambda d: render(d, "prometheus"))
    make_monitor("timeline-h100-faults", sinks=sinks).run(count=3)
    fams = families(prom.read_text())
    used = {s.labels["gpu"]: s.value for s in fams["llmdiag_gpu_memory_used_bytes"].samples}
    assert used["3"] == 82955185684 and len(used) == 8
    assert fams["llmdiag_gpu_present"].samples[0].value == 8
    assert fams["llmdiag_monitor_samples"].samples[0].value == 3
    throttled = {s.labels["gpu"]: s.value for s in fams["llmdiag_gpu_throttled"].samples}
    assert throttled["6"] == 1 and throttled["0"] == 0
    alerts = {s.labels["rule"]: s.value for s in fams["llmdiag_monitor_alerts"].samples}
    assert alerts["gpu-ecc"] == 1 and alerts["gpu-xid"] == 1 and alerts["host-memory"] == 0
    active = {(s.labels["rule"], s.labels["device"]) for s in fams["llmdiag_monitor_alert_active"].samples}
    assert ("gpu-memory", "gpu3") in active and ("gpu-throttle", "gpu6") in active
    assert fams["llmdiag_host_memory_total_bytes"].samples[0].value > 0
    assert not list(tmp_path.glob(".llmdiag.prom.*"))  # no temporary file left behind


def test_host_only_metrics_say_gpus_absent(tmp_path):
    doc = make_monitor("no-driver").run(count=2)
    fams = families(render(doc, "prometheus"))
    assert fams["llmdiag_gpu_present"].samples[0].value == 0
    assert "llmdiag_gpu_temperature_celsius" not in fams
    assert fams["llmdiag_host_cpu_utilization_ratio"].samples[0].labels["node"] == "node-0"


def test_metrics_endpoint_serves_the_latest_sample():
    server = S.MetricsServer(0, "127.0.0.1")
    mon = make_monitor("timeline-h100-faults", sinks=Sinks(server=server, render_metrics=lambda d: render(d, "prometheus")), interval_s=0.05)
    t = threading.Thread(target=mon.run, kwargs={"count": 10000})
    t.start()
    try:
        url = f"http://127.0.0.1:{server.port}/metrics"
        deadline = time.monotonic() + 10
        body = b""
        while time.monotonic() < deadline and b"llmdiag_gpu_memory_used_bytes" not in body:
            with urllib.request.urlopen(url, timeout=5) as resp:
                body = resp.read()
                ctype = resp.headers["Content-Type"]
            time.sleep(0.02)
        assert ctype.startswith("text/plain; version=0.0.4")
        assert families(body.decode())["llmdiag_gpu_present"].samples[0].value == 8
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/other", timeout=5)
    finally:
        mon.stop.set()
        t.join(10)
    assert mon.stop_reason == "stopped by signal"


def test_port_in_use_is_a_usage_error():
    first = S.MetricsServer(0, "127.0.0.1")
    try:
        with pytest.raises(UsageError, match=f"--port {first.port}: cannot listen"):
            S.MetricsServer(first.port, "127.0.0.1")
    finally:
        first.close()


def test_silent_peer_node_is_alerted(tmp_path):
    now = time.time()
    (tmp_path / "node-1.json").write_text(json.dumps({"node": "node-1", "time": now, "samples": 5}))
    (tmp_path / "node-2.json").write_text(json.dumps({"node": "node-2", "time": now - 120, "samples": 9}))
    (tmp_path / "junk.json").write_text("{half a file")
    hb = Heartbeat(str(tmp_path), "node-0", silent_after_s=30)
    doc = make_monitor(sinks=Sinks(heartbeat=hb)).run(count=2)
    silent = [a for a in doc["alerts"] if a["rule"] == "node-silent"]
    assert [a["device"] for a in silent] == ["node-2"] and silent[0]["observed"] >= 120
    mine = json.loads((tmp_path / "node-0.json").read_text())
    assert mine["node"] == "node-0" and mine["samples"] == 2


def test_duration_stops_the_monitor():
    start = time.monotonic()
    doc = make_monitor(interval_s=0.1).run(duration_s=0.35)
    assert 0.3 <= time.monotonic() - start < 5
    # At 0, 0.1, 0.2 and 0.3 s; a heavily loaded machine may skip a beat (the grid restarts).
    assert 2 <= doc["samples"] <= 4 and doc["stop_reason"] == "0.35 s elapsed"
