"""Helpers of the monitor tests: recorded GPUs, a real host sampler, a monitor that stops itself."""

from __future__ import annotations

from pathlib import Path

from llmdiag import nvml
from llmdiag.monitor.config import Rules
from llmdiag.monitor.gpus import GpuSampler
from llmdiag.monitor.host import HostSampler
from llmdiag.monitor.loop import Monitor, Sinks

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nvml"


def recorded(name: str) -> GpuSampler:
    return GpuSampler(lambda: nvml.replay(FIXTURES / f"{name}.json"), Rules().throttle_reasons)


def make_monitor(gpus: str = "no-driver", *, interval_s: float = 0.05, rules: Rules | None = None,
                 sinks: Sinks | None = None, events: list | None = None, **kw) -> Monitor:
    notes = events if events is not None else []
    return Monitor(node="node-0", interval_s=interval_s, rules=rules or Rules(), gpus=recorded(gpus),
                   host=HostSampler(), sinks=sinks, notify=lambda kind, what: notes.append((kind, what)), **kw)
