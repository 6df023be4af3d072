"""The preflight memory probe with a [job] plan; NVML replaced by a recorded-readings object."""

from __future__ import annotations

import dataclasses

from llmdiag.config import Config
from llmdiag.context import Context
from llmdiag.memory import estimate
from llmdiag.result import Status
from llmdiag.probes.memory import MemoryPlanProbe

GIB = 2**30


@dataclasses.dataclass
class _Snap:
    memory_free_bytes: int
    memory_total_bytes: int


class _FakeNvml:
    """Recorded readings of a node with two GPUs (the real adapter cannot exist without a GPU)."""

    def __init__(self, free):
        self.free = free

    def device_count(self):
        return len(self.free)

    def snapshot(self, i):
        return _Snap(self.free[i], 80 * GIB)

    def close(self):
        pass


def run(job, nvml=None):
    cfg = Config.from_mapping({"job": job})
    ctx = Context.create(config=cfg, env={}, node="n0", nvml=nvml)
    return {r.check: r for r in MemoryPlanProbe().run(ctx)}


def test_fits_on_measured_free_memory():
    rs = run({"model": "llama2-7b", "tp": 2, "world_size": 16, "zero": 1, "seq_len": 4096, "recompute": "selective"},
             nvml=lambda: _FakeNvml([79 * GIB, 78 * GIB]))
    assert rs["plan"].status is Status.PASS
    assert rs["fit"].status is Status.PASS and "NVML" in rs["fit"].summary
    assert rs["fit"].data["peak"]["phase"] in rs["fit"].summary and rs["fit"].data["peak"]["reserved"] > 0


def test_busy_gpu_fails_with_suggestions():
    rs = run({"model": "llama2-7b", "tp": 2, "world_size": 16, "seq_len": 4096},
             nvml=lambda: _FakeNvml([79 * GIB, 20 * GIB]))  # another process holds 60 GiB on GPU 1
    fit = rs["fit"]
    assert fit.status is Status.FAIL and fit.runbook == "plan-does-not-fit"
    assert fit.data["suggestions"] and all(s["total"] <= estimate.FITS_FRACTION * 20 * GIB for s in fit.data["suggestions"])


def test_invalid_plan_and_no_gpu():
    def no_gpu():
        raise OSError("libnvidia-ml.so.1 not found")

    rs = run({"model": "llama2-7b", "tp": 3, "world_size": 16, "gpus_per_node": 8}, nvml=no_gpu)
    assert rs["plan-heads-tp"].status is Status.FAIL and rs["plan-heads-tp"].runbook == "plan-invalid"
    assert rs["plan-tp-within-node"].status is Status.WARN and rs["plan-tp-within-node"].runbook == "tp-spans-nodes"
    assert rs["fit"].status is Status.SKIP and "gpu_memory" in rs["fit"].summary
    rs = run({"model": "llama2-7b", "world_size": 8, "gpu_memory": "24GiB"}, nvml=no_gpu)
    assert rs["fit"].status is Status.FAIL
