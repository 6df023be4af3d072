"""The monitor on a real GPU (marker ``gpu``): skipped with the reason where NVML has no GPU."""

from __future__ import annotations

import pytest

from llmdiag import nvml
from llmdiag.monitor.config import Rules
from llmdiag.monitor.gpus import GpuSampler
from llmdiag.monitor.host import HostSampler
from llmdiag.monitor.loop import Monitor


@pytest.mark.gpu
def test_real_gpus_are_sampled_with_xid_watching():
    try:
        api = nvml.load(watch_xid=True)
    except nvml.NvmlUnavailable as exc:
        pytest.skip(f"no GPU visible: {exc}")
    if api.device_count() == 0:
        api.close()
        pytest.skip("NVML answers but reports no GPU")
    mon = Monitor(node="gpu-node", interval_s=0.2, rules=Rules(), gpus=GpuSampler(lambda: api), host=HostSampler())
    doc = mon.run(count=3)
    gpus = doc["latest"]["gpus"]
    assert doc["gpu_count"] == len(gpus) >= 1 and doc["driver"]
    g = gpus[0]
    assert g["memory_total_bytes"] > 0 and 0 <= g["memory_used_pct"] <= 100
    assert g["temperature_c"] is not None and g["xid_count"] == 0
    assert not [a for a in doc["alerts"] if a["rule"] in ("sampling-stalled", "gpu-unreadable")]
    assert doc["overhead"]["round_ms_mean"] < 1000
