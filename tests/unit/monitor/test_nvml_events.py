"""Xid events on the real-NVML path, against a stand-in for pynvml with its API's shape
(``nvmlEventSetWait_v2(set, timeout_ms)`` returns ``device``/``eventType``/``eventData`` or
raises ``NVMLError_Timeout``). The real driver is exercised by the ``gpu`` tests only."""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace

import pytest

from llmdiag import nvml
from llmdiag.monitor.config import Rules
from llmdiag.monitor.gpus import GpuSampler
from llmdiag.monitor.host import HostSampler
from llmdiag.monitor.loop import Monitor


class NVMLError(Exception):
    pass


class NVMLError_Timeout(NVMLError):  # noqa: N801 - pynvml's name
    pass


def fake_pynvml(pending: list, gpus: int = 2) -> types.ModuleType:
    m = types.ModuleType("pynvml")
    m.NVMLError = NVMLError
    m.NVMLError_Timeout = NVMLError_Timeout
    m.NVMLError_LibraryNotFound = type("NVMLError_LibraryNotFound", (NVMLError,), {})
    m.NVMLError_DriverNotLoaded = type("NVMLError_DriverNotLoaded", (NVMLError,), {})
    for name in ("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", "NVML_MEMORY_ERROR_TYPE_CORRECTED", "NVML_VOLATILE_ECC",
                 "NVML_AGGREGATE_ECC", "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", "NVML_TEMPERATURE_GPU",
                 "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", "NVML_CLOCK_SM", "NVML_NVLINK_MAX_LINKS"):
        setattr(m, name, 0)
    m.nvmlEventTypeXidCriticalError = 8
    handles = [SimpleNamespace(index=i) for i in range(gpus)]
    m.registered = []
    m.nvmlInit = lambda: None
    m.nvmlShutdown = lambda: None
    m.nvmlDeviceGetCount = lambda: gpus
    m.nvmlDeviceGetHandleByIndex = lambda i: handles[i]
    m.nvmlDeviceGetIndex = lambda h: h.index
    m.nvmlDeviceGetName = lambda h: b"NVIDIA H100 80GB HBM3"
    m.nvmlDeviceGetMemoryInfo = lambda h: SimpleNamespace(total=80 * 2**30, used=2**30, free=79 * 2**30)
    m.nvmlEventSetCreate = lambda: "event-set"
    m.nvmlEventSetFree = lambda s: None

    def register(handle, types_, event_set):
        m.registered.append((handle.index, types_, event_set))

    def wait(event_set, timeout_ms):
        assert timeout_ms == 0, "sampling must never block on events"
        if not pending:
            raise NVMLError_Timeout("Timeout")
        index, xid = pending.pop(0)
        return SimpleNamespace(device=handles[index], eventType=8, eventData=xid)

    m.nvmlDeviceRegisterEvents = register
    m.nvmlEventSetWait_v2 = wait
    return m


@pytest.fixture
def pending(monkeypatch):
    events: list = []
    module = fake_pynvml(events)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    return events, module


def test_xid_events_are_collected_only_when_watching(pending):
    events, module = pending
    events.append((1, 79))
    api = nvml.load()  # a one-shot probe: no event set
    assert api.snapshot(1).xid_events == () and module.registered == []
    api.close()
    api = nvml.load(watch_xid=True)
    assert module.registered == [(0, 8, "event-set"), (1, 8, "event-set")]
    assert [e["xid"] for e in api.snapshot(1).xid_events] == [79]
    assert api.snapshot(0).xid_events == ()
    events.append((0, 48))
    assert [e["xid"] for e in api.snapshot(0).xid_events] == [48]
    assert [e["xid"] for e in api.snapshot(1).xid_events] == [79]  # kept, not drained twice
    api.close()


def test_monitor_alerts_once_per_live_xid(pending):
    events, _ = pending
    mon = Monitor(node="n", interval_s=0.05, rules=Rules(), gpus=GpuSampler(None), host=HostSampler())
    events.append((1, 94))
    doc = mon.run(count=3)
    xids = [(a["device"], a["observed"]) for a in doc["alerts"] if a["rule"] == "gpu-xid"]
    assert xids == [("gpu1", 94)]
    assert doc["latest"]["gpus"][1]["xid_count"] == 1 and doc["gpu_count"] == 2
