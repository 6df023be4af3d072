"""GPU readings through the NVML adapter (:mod:`llmdiag.nvml`), the same one the GPU probe uses.

Each sample flattens a :class:`~llmdiag.nvml.GpuSnapshot` into the fields the timeline, the
Prometheus metrics and the rules need, plus what only a sequence of readings shows: Xid
events not seen in an earlier sample (``new_xids``) and their running count (``xid_count``).
A GPU that NVML lists but cannot read becomes ``{"index": i, "error": ...}``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

#: Snapshot fields copied as they are.
FIELDS = (
    "name", "uuid", "pci_bus_id", "utilization_gpu_pct", "utilization_mem_pct", "memory_used_bytes",
    "memory_total_bytes", "memory_free_bytes", "temperature_c", "temperature_slowdown_c", "power_w", "power_limit_w",
    "sm_clock_mhz", "max_sm_clock_mhz", "ecc_uncorrectable_volatile", "ecc_corrected_volatile",
)


def _event_key(event: Any) -> tuple:
    return tuple(sorted((str(k), str(v)) for k, v in dict(event).items()))


class GpuSampler:
    """Open the adapter once (``factory()``), then :meth:`sample` reads every GPU.

    ``factory`` raises :class:`llmdiag.nvml.NvmlUnavailable` on a machine without a driver: the
    sampler then has no GPUs and ``note`` says why.
    """

    def __init__(self, factory: Callable[[], Any] | None, slowing: Iterable[str] = ()) -> None:
        from llmdiag import nvml  # noqa: PLC0415

        self._nvml = nvml
        self._slowing = frozenset(slowing)
        self._seen: dict[int, set[tuple]] = {}
        self._xid_count: dict[int, int] = {}
        self.api: Any = None
        self.count = 0
        self.driver: str | None = None
        try:
            self.api = (factory or (lambda: nvml.load(watch_xid=True)))()
            self.count = self.api.device_count()
            self.driver = self.api.driver_version()
        except nvml.NvmlUnavailable as exc:
            self.note = f"GPUs absent: {exc}; monitoring the host only"
        else:
            self.note = (f"{self.count} GPU(s), driver {self.driver or 'unknown'}" if self.count
                         else "GPUs absent: NVML lists no GPU; monitoring the host only")

    def sample(self) -> list[dict[str, Any]]:
        return [self._one(i) for i in range(self.count)]

    def _one(self, i: int) -> dict[str, Any]:
        try:
            s = self.api.snapshot(i)
        except self._nvml.GpuUnreadable as exc:
            return {"index": i, "error": str(exc) or "unreadable"}
        g: dict[str, Any] = {"index": s.index}
        g.update({f: getattr(s, f) for f in FIELDS})
        if s.memory_used_bytes is not None and s.memory_total_bytes:
            g["memory_used_pct"] = round(100.0 * s.memory_used_bytes / s.memory_total_bytes, 2)
        reasons = tuple(s.throttle_reasons or ())
        g["throttle_reasons"] = list(reasons)
        g["throttled"] = None if s.throttle_reasons is None else int(bool(self._slowing.intersection(reasons)))
        seen = self._seen.setdefault(i, set())
        new = []
        for event in s.xid_events or ():
            key = _event_key(event)
            if key not in seen:
                seen.add(key)
                new.append(dict(event))
        self._xid_count[i] = self._xid_count.get(i, 0) + len(new)
        g["new_xids"] = new
        g["xid_count"] = self._xid_count[i]
        return g

    def close(self) -> None:
        if self.api is not None:
            self.api.close()
