"""Alert rules driven by recorded NVML readings through the same adapter as the GPU probe."""

from __future__ import annotations

import dataclasses

import pytest

from llmdiag.monitor import rules as R
from llmdiag.monitor.config import Rules
from tests.unit.monitor.util import make_monitor, recorded


def fired(doc):
    return [(a["rule"], a["device"], a["severity"]) for a in doc["alerts"]]


def test_faults_over_time_fire_once_each_in_order():
    events = []
    doc = make_monitor("timeline-h100-faults", events=events).run(count=4)
    assert doc["samples"] == 4 and doc["gpu_count"] == 8
    assert fired(doc) == [
        ("gpu-ecc", "gpu5", "critical"),  # sample 2: 0 -> 1 uncorrectable
        ("gpu-memory", "gpu3", "warning"),  # sample 2: 97% > 95%
        ("gpu-xid", "gpu5", "critical"),  # sample 3: Xid 48 appears
        ("gpu-temperature", "gpu6", "critical"),  # 89 C >= its 87 C slowdown temperature
        ("gpu-throttle", "gpu6", "critical"),  # hw_slowdown, hw_thermal_slowdown (not sw_power_cap)
    ]
    by_rule = {a["rule"]: a for a in doc["alerts"]}
    assert by_rule["gpu-memory"]["observed"] == pytest.approx(97.0) and by_rule["gpu-memory"]["threshold"] == 95.0
    assert by_rule["gpu-ecc"]["observed"] == 1 and by_rule["gpu-ecc"]["runbook"] == "gpu-ecc-errors"
    assert "Xid 48" in by_rule["gpu-xid"]["message"]
    assert all(a["node"] == "node-0" and a["time"] > 0 for a in doc["alerts"])
    # The ECC count stays at 1 and the Xid stays listed in sample 4: no repeat. Conditions cleared.
    assert doc["active_alerts"] == []
    resolved = [(w["rule"], w["device"]) for k, w in events if k == "resolved"]
    assert sorted(resolved) == [("gpu-memory", "gpu3"), ("gpu-temperature", "gpu6"), ("gpu-throttle", "gpu6")]
    assert doc["status"] == "fail" and doc["alerts_by_rule"]["gpu-xid"] == 1
    assert doc["latest"]["gpus"][5]["xid_count"] == 1


def test_sw_power_cap_is_not_throttling_by_default_but_can_be_made_one():
    g = recorded("timeline-h100-faults").sample()[0]
    assert g["throttle_reasons"] == ["sw_power_cap"] and g["throttled"] == 0
    assert R.gpu_conditions(g, Rules()) == []
    strict = dataclasses.replace(Rules(), throttle_reasons=("sw_power_cap",))
    assert [a["severity"] for a in R.gpu_conditions(g, strict)] == ["warning"]


def test_thresholds_come_from_the_rules():
    g = recorded("timeline-h100-faults").sample()[0]  # 83% memory, 64 C, 655 of 700 W
    loose = [a["rule"] for a in R.gpu_conditions(g, Rules())]
    assert loose == []
    tight = Rules(gpu_memory_max_pct=80, gpu_temp_max_c=60, gpu_power_max_fraction=0.9)
    got = {a["rule"]: a for a in R.gpu_conditions(g, tight)}
    assert set(got) == {"gpu-memory", "gpu-temperature", "gpu-power"}
    assert got["gpu-temperature"]["severity"] == "warning"  # 64 C is above 60 but below the 87 C slowdown
    assert got["gpu-power"]["threshold"] == pytest.approx(630.0)


def test_ecc_already_nonzero_at_start_alerts_once():
    doc = make_monitor("h100-faulty").run(count=2)
    ecc = [a for a in doc["alerts"] if a["rule"] == "gpu-ecc"]
    assert len(ecc) == 1 and ecc[0]["device"] == "gpu5" and "since the last reset" in ecc[0]["message"]
    xid = [a for a in doc["alerts"] if a["rule"] == "gpu-xid"]
    assert [a["observed"] for a in xid] == [94]  # the recorded Xid 94, reported once


def test_lost_gpu_is_one_critical_alert_and_the_others_are_still_sampled():
    doc = make_monitor("timeline-gpu-lost").run(count=3)
    lost = [a for a in doc["alerts"] if a["rule"] == "gpu-unreadable"]
    assert len(lost) == 1 and lost[0]["device"] == "gpu2" and "GPU is lost" in lost[0]["message"]
    latest = {g["index"]: g for g in doc["latest"]["gpus"]}
    assert latest[2] == {"index": 2, "error": "GPU is lost"} and latest[3]["temperature_c"] is not None


def test_blocked_nvml_read_raises_sampling_stalled_and_sampling_goes_on():
    # The second frame's first read takes 2.5 s; the deadline is max(1 s, 3 x 0.1 s).
    events = []
    mon = make_monitor("timeline-nvml-stall", interval_s=0.1, events=events)
    doc = mon.run(count=45)  # 4.5 s: the blocked read returns after about 2.6 s
    stalled = [a for a in doc["alerts"] if a["rule"] == "sampling-stalled"]
    assert stalled and stalled[0]["device"] == "gpu" and stalled[0]["severity"] == "critical"
    assert doc["samples"] == 45  # the host kept being sampled meanwhile
    assert doc["latest"]["gpus"], "GPU readings resume once the blocked read returns"
    assert ("resolved", stalled[0]) in [(k, w) for k, w in events] or any(
        k == "resolved" and w["rule"] == "sampling-stalled" for k, w in events)


def test_host_gap_is_a_stall_event():
    mon = make_monitor(interval_s=0.05)
    mon._alerts({"time": 1.0, "elapsed_s": 0.0, "host": {}, "gpus": []}, gap_s=0.9)
    assert mon.alerts == []  # under the 1 s floor of the stall deadline
    mon._alerts({"time": 1.0, "elapsed_s": 0.0, "host": {}, "gpus": []}, gap_s=1.5)
    assert [a["rule"] for a in mon.alerts] == ["sampling-stalled"] and mon.alerts[0]["device"] == "host"


def test_host_rules():
    host = {"mem_pct": 97.5, "mem_used_bytes": 97 * 2**30, "mem_total_bytes": 100 * 2**30, "cpu_pct": 99.0}
    assert [a["rule"] for a in R.host_conditions(host, Rules())] == ["host-memory"]
    assert [a["rule"] for a in R.host_conditions(host, Rules(host_cpu_max_pct=90))] == ["host-memory", "host-cpu"]
    assert R.host_conditions({"mem_pct": 50.0}, Rules()) == []
    assert "host-cpu" not in R.rule_names(Rules()) and "host-cpu" in R.rule_names(Rules(host_cpu_max_pct=90))


def test_without_a_driver_the_host_is_monitored_and_gpus_are_absent():
    doc = make_monitor("no-driver").run(count=2)
    assert doc["gpu_count"] == 0 and doc["gpu_note"].startswith("GPUs absent:")
    assert "libnvidia-ml.so.1" in doc["gpu_note"]
    host = doc["latest"]["host"]
    assert 0 < host["mem_total_bytes"] and 0 <= host["mem_pct"] <= 100 and host["cpu_count"] >= 1
    assert doc["latest"]["gpus"] == [] and doc["status"] == "pass"


def test_gpu_conditions_hold_while_gpu_reads_are_stalled():
    events = []
    mon = make_monitor("timeline-h100-faults", events=events)
    gpus = mon.gpus.sample() and mon.gpus.sample()  # the second frame: GPU 3 at 97%
    mon._alerts({"time": 1.0, "elapsed_s": 0.0, "host": {}, "gpus": gpus}, gap_s=None)
    started = mon.active[("gpu-memory", "gpu3")]["time"]
    mon._alerts({"time": 2.0, "elapsed_s": 1.0, "host": {}, "gpus": [], "gpu_error": "blocked"}, gap_s=None)
    assert ("gpu-memory", "gpu3") in mon.active and mon.active[("gpu-memory", "gpu3")]["time"] == started
    assert ("sampling-stalled", "gpu") in mon.active
    assert not [w for k, w in events if k == "resolved"]
    assert [a["rule"] for a in mon.alerts].count("gpu-memory") == 1
