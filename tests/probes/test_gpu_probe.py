"""GPU probe on NVML readings recorded from real nodes (healthy, faulty, mixed, no driver)."""

from __future__ import annotations

import json

import pytest

from llmdiag import nvml
from llmdiag.result import Status
from llmdiag.runner import run_probe
from llmdiag.probes.gpu import GpuProbe
from tests.probes.nodeutil import FIXTURES, assert_actionable, by_check, context, nvml_fixture, statuses


def run(fixture: str, config: dict | None = None, env: dict | None = None):
    return run_probe(GpuProbe(), context(env=env, config=config, nvml=nvml_fixture(fixture)))


def test_healthy_h100_node_passes_every_check():
    results = run("h100-healthy", {"cluster": {"gpus_per_node": 8}})
    assert set(statuses(results).values()) == {"pass"}, statuses(results)
    r = by_check(results)
    assert r["count"].data["gpu_count"] == 8
    assert r["count"].data["driver"] == "550.54.15"
    assert r["model"].summary == "8x NVIDIA H100 80GB HBM3"
    # Gen1 at idle is power saving, not a downtrained link.
    assert r["pcie"].status is Status.PASS


def test_faulty_node_every_fault_found_with_its_gpu():
    results = run("h100-faulty")
    r = by_check(results)
    assert statuses(results) == {
        "count": "pass", "model": "pass", "memory": "warn", "processes": "fail", "ecc": "fail",
        "retired-memory": "fail", "temperature": "warn", "power": "warn", "throttle": "fail", "pcie": "warn",
        "nvlink": "fail", "persistence": "warn", "compute-mode": "fail", "xid": "fail",
    }
    assert "pid 48213 (/usr/bin/python3) on GPU 3" in r["processes"].summary
    assert "kill 48213" in r["processes"].remediation
    assert r["processes"].evidence[0].observed == 61862 and r["processes"].evidence[0].unit == "MiB"
    assert "GPU 5" in r["ecc"].summary and r["ecc"].evidence[0].observed == 2
    assert "row remap pending" in r["retired-memory"].summary
    assert "hw_slowdown" in r["throttle"].summary and "hw_thermal_slowdown" in r["throttle"].summary
    assert "1095 of 1980 MHz" in r["throttle"].evidence[0].observed
    assert r["pcie"].evidence[0].observed == "x8" and r["pcie"].evidence[0].expected == "x16"
    assert "[4, 11]" in r["nvlink"].summary and r["nvlink"].evidence[0].observed == "16 of 18 up"
    assert "GPU 1 capped to 400 W" in r["power"].summary
    assert "GPU 6 91 °C" in r["temperature"].summary
    assert "GPU 3 (exclusive_process)" in r["compute-mode"].summary
    assert_actionable(results)


def test_temperature_thresholds_come_from_config():
    r = by_check(run("h100-faulty", {"thresholds": {"gpu_temp_warn_c": 80, "gpu_temp_fail_c": 90}}))
    assert r["temperature"].status is Status.FAIL
    r = by_check(run("h100-healthy", {"thresholds": {"gpu_temp_warn_c": 33, "gpu_temp_fail_c": 90}}))
    assert r["temperature"].status is Status.WARN and "GPU 4 34 °C" in r["temperature"].summary


def test_mixed_models_warn_and_name_the_odd_gpu():
    results = run("a100-mixed")
    r = by_check(results)
    assert r["model"].status is Status.WARN
    assert "1x NVIDIA A100-SXM4-40GB, 7x NVIDIA A100-SXM4-80GB" in r["model"].summary
    assert r["model"].evidence[0].name.startswith("GPU 4")
    assert_actionable(results)


def test_count_mismatch_against_config_and_ranks():
    r = by_check(run("h100-healthy", {"cluster": {"gpus_per_node": 4}}))
    assert r["count"].status is Status.FAIL and r["count"].summary == "8 GPU(s) visible, 4 expected"
    r = by_check(run("a100-mixed", env={"MASTER_ADDR": "127.0.0.1", "NNODES": "1", "NODE_RANK": "0",
                                        "NPROC_PER_NODE": "16", "WORLD_SIZE": "16"}))
    assert r["count"].status is Status.FAIL and "16 ranks per node" in r["count"].summary


def test_used_memory_threshold():
    r = by_check(run("h100-healthy", {"thresholds": {"gpu_memory_used_max_mib": 100}}))
    assert r["memory"].status is Status.WARN and r["memory"].evidence[0].observed == 552


def test_no_driver_is_a_skip_with_a_clear_reason():
    (r,) = run("no-driver")
    assert r.status is Status.SKIP
    assert "no NVIDIA driver" in r.summary and "libnvidia-ml.so.1 not found" in r.summary


def test_throttle_bitmask_decoding():
    assert nvml.decode_throttle_reasons(0) == ()
    assert nvml.decode_throttle_reasons(0x1) == ("gpu_idle",)
    assert nvml.decode_throttle_reasons(0x8 | 0x40 | 0x80) == ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
    assert nvml.decode_throttle_reasons(0x4 | 0x20) == ("sw_power_cap", "sw_thermal_slowdown")
    assert nvml.decode_throttle_reasons(0x800) == ("unknown_0x800",)


def test_snapshot_round_trip_and_unknown_fields_rejected():
    api = nvml.RecordedNvml.from_file(FIXTURES / "h100-faulty.json")
    s = api.snapshot(3)
    assert nvml.GpuSnapshot.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    doc = nvml.record(api, "copy")
    assert nvml.RecordedNvml(doc).snapshot(7).nvlink_down == (4, 11)
    with pytest.raises(ValueError, match="unknown GPU snapshot fields: temp"):
        nvml.GpuSnapshot.from_dict({"index": 0, "temp": 3})


def test_real_nvml_without_driver_says_why():
    try:
        api = nvml.load()
    except nvml.NvmlUnavailable as exc:
        assert str(exc)
    else:  # a GPU machine: the adapter answers
        assert api.device_count() >= 0
        api.close()


@pytest.mark.gpu
def test_real_gpu_through_the_adapter():
    try:
        api = nvml.load()
    except nvml.NvmlUnavailable as exc:
        pytest.skip(f"no GPU visible: {exc}")
    try:
        if api.device_count() == 0:
            pytest.skip("NVML answers but reports no GPU")
        s = api.snapshot(0)
        assert s.name and s.memory_total_bytes and s.memory_total_bytes > 0
        assert nvml.GpuSnapshot.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    finally:
        api.close()
    results = run_probe(GpuProbe(), context())
    assert results and all(r.check != "probe" for r in results), results
    assert_actionable(results)


def test_gpu_that_fell_off_the_bus():
    results = run("h100-gpu-lost", {"cluster": {"gpus_per_node": 8}})
    r = by_check(results)
    assert r["readable"].status is Status.FAIL and "GPU 3: GPU is lost" in r["readable"].summary
    assert r["count"].status is Status.FAIL and r["count"].summary == "7 GPU(s) visible, 8 expected"
    assert r["ecc"].status is Status.PASS  # the readable GPUs are still checked
    assert_actionable(results)
