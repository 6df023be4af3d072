"""The NVML adapter: one thin layer between the GPU probe and ``pynvml``.

Everything the GPU checks need is read once per device into a frozen :class:`GpuSnapshot`;
the checks only ever look at snapshots. That keeps the logic testable on machines without a
GPU: :class:`RecordedNvml` replays snapshots recorded on real nodes (JSON files in
``tests/fixtures/nvml/``), and ``python -m llmdiag.nvml record`` writes such a file from the real
NVML of a GPU node.

Contract (``CONTRACTS.md``): :func:`load` returns an object with ``driver_version()``,
``cuda_driver_version()``, ``device_count()``, ``snapshot(i)`` and ``close()``, or raises
:class:`NvmlUnavailable` with a reason a person understands ("no NVIDIA driver ...").
Every snapshot field may be ``None`` when the GPU or driver does not support the query.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: NVML clock-event ("throttle") reason bits, in the order nvidia-smi prints them.
THROTTLE_BITS: tuple[tuple[int, str], ...] = (
    (0x001, "gpu_idle"),
    (0x002, "applications_clocks_setting"),
    (0x004, "sw_power_cap"),
    (0x008, "hw_slowdown"),
    (0x010, "sync_boost"),
    (0x020, "sw_thermal_slowdown"),
    (0x040, "hw_thermal_slowdown"),
    (0x080, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)

COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}


def decode_throttle_reasons(mask: int) -> tuple[str, ...]:
    """Names of the bits set in an NVML clocks-event-reasons bitmask (unknown bits as hex)."""
    names = [name for bit, name in THROTTLE_BITS if mask & bit]
    known = 0
    for bit, _ in THROTTLE_BITS:
        known |= bit
    if mask & ~known:
        names.append(f"unknown_0x{mask & ~known:x}")
    return tuple(names)


class NvmlUnavailable(RuntimeError):
    """NVML cannot be used here (no driver, no library, driver/library mismatch)."""


class GpuUnreadable(RuntimeError):
    """NVML lists the GPU but cannot read it (typically "GPU is lost" after an Xid 79)."""


@dataclasses.dataclass(frozen=True)
class GpuSnapshot:
    """One GPU's readings at one moment. ``None`` means "not supported / could not read"."""

    index: int
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    memory_free_bytes: int | None = None
    utilization_gpu_pct: int | None = None
    utilization_mem_pct: int | None = None
    temperature_c: int | None = None
    temperature_slowdown_c: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: int | None = None
    max_sm_clock_mhz: int | None = None
    throttle_reasons: tuple[str, ...] | None = None
    ecc_mode_enabled: bool | None = None
    ecc_uncorrectable_volatile: int | None = None
    ecc_uncorrectable_aggregate: int | None = None
    ecc_corrected_volatile: int | None = None
    retired_pages_pending: bool | None = None
    retired_pages_dbe: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    nvlink_total: int | None = None
    nvlink_down: tuple[int, ...] | None = None
    persistence_mode: bool | None = None
    compute_mode: str | None = None
    processes: tuple[Mapping[str, Any], ...] | None = None
    xid_events: tuple[Mapping[str, Any], ...] = ()
    # Beyond the contract's list (additive): the board's default power limit, so that a
    # power cap someone set with `nvidia-smi -pl` can be told from the design limit.
    power_default_limit_w: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        for k, v in d.items():
            if isinstance(v, tuple):
                d[k] = [dict(x) if isinstance(x, Mapping) else x for x in v]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GpuSnapshot:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown GPU snapshot fields: {', '.join(sorted(unknown))}")
        values = dict(d)
        for k in ("throttle_reasons", "nvlink_down"):
            if values.get(k) is not None:
                values[k] = tuple(values[k])
        for k in ("processes", "xid_events"):
            if values.get(k) is not None:
                values[k] = tuple(dict(p) for p in values[k])
        return cls(**values)


class RecordedNvml:
    """Replays recorded readings: ``{"driver_version", "cuda_driver_version", "devices": [...]}``.

    ``devices`` holds :meth:`GpuSnapshot.to_dict` dicts; ``{"index": 3, "error": "GPU is lost"}``
    stands for a GPU NVML cannot read. A document with ``"unavailable": "reason"`` behaves
    like a node without a driver (the constructor raises).
    """

    def __init__(self, doc: Mapping[str, Any]):
        if doc.get("unavailable"):
            raise NvmlUnavailable(str(doc["unavailable"]))
        self._driver = doc.get("driver_version")
        self._cuda = doc.get("cuda_driver_version")
        self._devices: list[GpuSnapshot | str] = [
            str(d["error"]) if "error" in d else GpuSnapshot.from_dict(dict(d, index=d.get("index", i)))
            for i, d in enumerate(doc.get("devices") or ())
        ]
        self.description = doc.get("description", "")

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> RecordedNvml:
        return cls(json.loads(Path(path).read_text(encoding="utf-8")))

    def driver_version(self) -> str | None:
        return self._driver

    def cuda_driver_version(self) -> int | None:
        return self._cuda

    def device_count(self) -> int:
        return len(self._devices)

    def snapshot(self, i: int) -> GpuSnapshot:
        d = self._devices[i]
        if isinstance(d, str):
            raise GpuUnreadable(d)
        return d

    def close(self) -> None:
        pass


class RecordedTimeline:
    """Successive recorded readings, for what changes over time (``llmdiag monitor``'s tests).

    ``{"base": "h100-healthy.json" | {RecordedNvml document}, "frames": [frame, ...]}``, where a
    frame is ``{"devices": {"3": {field: value, ...}}, "delay_s": 0.0}``: the base readings with
    those fields of those devices replaced (``{"error": "GPU is lost"}`` makes a device
    unreadable). Frames do not accumulate: each is base + its own patch. Each read of a device
    returns its next frame; the last frame repeats. ``delay_s`` makes the first read of that
    frame take that long, as NVML does when it blocks on a failing GPU.
    """

    def __init__(self, doc: Mapping[str, Any], base_dir: str | os.PathLike[str] = "."):
        base = doc.get("base") or {}
        if isinstance(base, str):
            base = json.loads((Path(base_dir) / base).read_text(encoding="utf-8"))
        if base.get("unavailable"):
            raise NvmlUnavailable(str(base["unavailable"]))
        self.description = doc.get("description", "")
        self._driver = base.get("driver_version")
        self._cuda = base.get("cuda_driver_version")
        devices = [dict(d, index=d.get("index", i)) for i, d in enumerate(base.get("devices") or ())]
        self._frames: list[tuple[RecordedNvml, float]] = []
        for frame in doc.get("frames") or [{}]:
            patched = []
            for d in devices:
                patch = (frame.get("devices") or {}).get(str(d["index"]))
                patched.append({"index": d["index"], **patch} if patch and "error" in patch else {**d, **(patch or {})})
            self._frames.append((RecordedNvml({"devices": patched}), float(frame.get("delay_s") or 0.0)))
        self._reads = [0] * len(devices)
        self._delayed: set[int] = set()

    def driver_version(self) -> str | None:
        return self._driver

    def cuda_driver_version(self) -> int | None:
        return self._cuda

    def device_count(self) -> int:
        return len(self._reads)

    def snapshot(self, i: int) -> GpuSnapshot:
        k = min(self._reads[i], len(self._frames) - 1)
        frame, delay = self._frames[k]
        self._reads[i] += 1
        if delay and k not in self._delayed:
            self._delayed.add(k)
            time.sleep(delay)
        return frame.snapshot(i)

    def close(self) -> None:
        pass


def replay(path: str | os.PathLike[str]) -> RecordedNvml | RecordedTimeline:
    """The recorded adapter for a fixture file: a timeline when it has ``frames``."""
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    if "frames" in doc:
        return RecordedTimeline(doc, Path(path).parent)
    return RecordedNvml(doc)


# ---------------------------------------------------------------------------
# The real NVML (pynvml from nvidia-ml-py), imported lazily.

_INIT_LOCK = threading.Lock()


class RealNvml:
    """pynvml behind the adapter. Each query that the GPU does not support yields ``None``.

    With ``watch_xid=True`` (the monitor) it also registers for NVML's critical-Xid events and
    reports those that arrive while it is open in ``GpuSnapshot.xid_events``; without it (a
    one-shot probe) Xid events are not collected and ``xid_events`` stays empty.
    """

    #: Xid events kept per GPU (oldest dropped): a flapping GPU must not grow memory forever.
    MAX_XIDS = 100

    def __init__(self, watch_xid: bool = False) -> None:
        try:
            import pynvml  # noqa: PLC0415 - lazy: a CPU machine never imports it
        except ImportError as exc:
            raise NvmlUnavailable(f"the pynvml module is missing (pip install nvidia-ml-py): {exc}") from None
        self._nv = pynvml
        with _INIT_LOCK:
            try:
                pynvml.nvmlInit()
            except pynvml.NVMLError_LibraryNotFound:
                raise NvmlUnavailable(
                    "libnvidia-ml.so.1 not found: no NVIDIA driver is installed here, or the container "
                    "was started without the GPU runtime (--gpus all)"
                ) from None
            except pynvml.NVMLError_DriverNotLoaded:
                raise NvmlUnavailable("the NVIDIA kernel driver is not loaded (lsmod | grep nvidia)") from None
            except pynvml.NVMLError as exc:
                raise NvmlUnavailable(f"NVML initialisation failed: {exc}") from None
        self._events = None
        self._xids: dict[int, list[dict[str, Any]]] = {}
        if watch_xid:
            self._watch_xid()

    def _watch_xid(self) -> None:
        nv = self._nv
        event_type = getattr(nv, "nvmlEventTypeXidCriticalError", None)
        self._events = None if event_type is None else self._try("nvmlEventSetCreate")
        if self._events is None:
            return
        for i in range(self.device_count()):
            try:
                nv.nvmlDeviceRegisterEvents(nv.nvmlDeviceGetHandleByIndex(i), event_type, self._events)
            except nv.NVMLError:
                continue  # this GPU does not deliver events (e.g. some vGPU setups): no claim

    def _drain_xid(self) -> None:
        """Collect the events waiting in the event set, without blocking."""
        nv = self._nv
        wait = getattr(nv, "nvmlEventSetWait_v2", None) or getattr(nv, "nvmlEventSetWait", None)
        if self._events is None or wait is None:
            return
        for _ in range(1000):  # bounded: a storm of events must not stall sampling
            try:
                data = wait(self._events, 0)
            except nv.NVMLError:  # NVML_ERROR_TIMEOUT: nothing pending (or the set broke)
                return
            index = self._try("nvmlDeviceGetIndex", data.device)
            if index is None:
                continue
            events = self._xids.setdefault(int(index), [])
            events.append({"xid": int(data.eventData), "time": time.time()})
            del events[:-self.MAX_XIDS]

    def _try(self, fn_name: str, *args: Any) -> Any:
        """Call ``pynvml.<fn_name>``; None when unsupported or absent from this pynvml."""
        fn = getattr(self._nv, fn_name, None)
        if fn is None:
            return None
        try:
            return fn(*args)
        except self._nv.NVMLError:
            return None

    def driver_version(self) -> str | None:
        v = self._try("nvmlSystemGetDriverVersion")
        return v.decode() if isinstance(v, bytes) else v

    def cuda_driver_version(self) -> int | None:
        return self._try("nvmlSystemGetCudaDriverVersion")

    def device_count(self) -> int:
        return int(self._nv.nvmlDeviceGetCount())

    def snapshot(self, i: int) -> GpuSnapshot:
        nv, t = self._nv, self._try
        try:
            h = nv.nvmlDeviceGetHandleByIndex(i)
        except nv.NVMLError as exc:
            raise GpuUnreadable(str(exc)) from None
        mem = t("nvmlDeviceGetMemoryInfo", h)
        util = t("nvmlDeviceGetUtilizationRates", h)
        pci = t("nvmlDeviceGetPciInfo", h)
        mask = t("nvmlDeviceGetCurrentClocksEventReasons", h)
        if mask is None:
            mask = t("nvmlDeviceGetCurrentClocksThrottleReasons", h)
        ecc = t("nvmlDeviceGetEccMode", h)
        unc = nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
        pending = t("nvmlDeviceGetRetiredPagesPendingStatus", h)
        dbe = t("nvmlDeviceGetRetiredPages", h, nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
        rows = t("nvmlDeviceGetRemappedRows", h)
        links_up: list[int] = []
        links_down: list[int] = []
        for link in range(nv.NVML_NVLINK_MAX_LINKS):
            state = t("nvmlDeviceGetNvLinkState", h, link)
            if state is None:
                continue  # link not present on this board
            (links_up if state else links_down).append(link)
        mode = t("nvmlDeviceGetComputeMode", h)
        power = t("nvmlDeviceGetPowerUsage", h)
        limit = t("nvmlDeviceGetEnforcedPowerLimit", h)
        default_limit = t("nvmlDeviceGetPowerManagementDefaultLimit", h)
        return GpuSnapshot(
            index=i,
            name=_str(t("nvmlDeviceGetName", h)),
            uuid=_str(t("nvmlDeviceGetUUID", h)),
            pci_bus_id=_str(getattr(pci, "busId", None)) if pci is not None else None,
            memory_total_bytes=getattr(mem, "total", None),
            memory_used_bytes=getattr(mem, "used", None),
            memory_free_bytes=getattr(mem, "free", None),
            utilization_gpu_pct=getattr(util, "gpu", None),
            utilization_mem_pct=getattr(util, "memory", None),
            temperature_c=t("nvmlDeviceGetTemperature", h, nv.NVML_TEMPERATURE_GPU),
            temperature_slowdown_c=t("nvmlDeviceGetTemperatureThreshold", h, nv.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN),
            power_w=None if power is None else power / 1000.0,
            power_limit_w=None if limit is None else limit / 1000.0,
            power_default_limit_w=None if default_limit is None else default_limit / 1000.0,
            sm_clock_mhz=t("nvmlDeviceGetClockInfo", h, nv.NVML_CLOCK_SM),
            max_sm_clock_mhz=t("nvmlDeviceGetMaxClockInfo", h, nv.NVML_CLOCK_SM),
            throttle_reasons=None if mask is None else decode_throttle_reasons(int(mask)),
            ecc_mode_enabled=None if ecc is None else bool(ecc[0]),
            ecc_uncorrectable_volatile=t("nvmlDeviceGetTotalEccErrors", h, unc, nv.NVML_VOLATILE_ECC),
            ecc_uncorrectable_aggregate=t("nvmlDeviceGetTotalEccErrors", h, unc, nv.NVML_AGGREGATE_ECC),
            ecc_corrected_volatile=t("nvmlDeviceGetTotalEccErrors", h, nv.NVML_MEMORY_ERROR_TYPE_CORRECTED,
                                     nv.NVML_VOLATILE_ECC),
            retired_pages_pending=None if pending is None else bool(pending),
            retired_pages_dbe=None if dbe is None else len(dbe),
            remapped_rows_pending=None if rows is None else bool(rows[2]),
            remapped_rows_failure=None if rows is None else bool(rows[3]),
            pcie_gen=t("nvmlDeviceGetCurrPcieLinkGeneration", h),
            pcie_gen_max=t("nvmlDeviceGetMaxPcieLinkGeneration", h),
            pcie_width=t("nvmlDeviceGetCurrPcieLinkWidth", h),
            pcie_width_max=t("nvmlDeviceGetMaxPcieLinkWidth", h),
            nvlink_total=len(links_up) + len(links_down),
            nvlink_down=tuple(links_down),
            persistence_mode=None if (pm := t("nvmlDeviceGetPersistenceMode", h)) is None else bool(pm),
            compute_mode=None if mode is None else COMPUTE_MODES.get(mode, str(mode)),
            processes=self._processes(h),
            xid_events=self._xid_events(i),
        )

    def _xid_events(self, i: int) -> tuple[dict[str, Any], ...]:
        if self._events is None:
            return ()
        self._drain_xid()
        return tuple(self._xids.get(i, ()))

    def _processes(self, h: Any) -> tuple[dict[str, Any], ...] | None:
        procs = self._try("nvmlDeviceGetComputeRunningProcesses", h)
        if procs is None:
            return None
        out = []
        for p in procs:
            used = getattr(p, "usedGpuMemory", None)
            out.append({"pid": int(p.pid), "name": self._process_name(int(p.pid)), "used_bytes": used})
        return tuple(out)

    def _process_name(self, pid: int) -> str | None:
        name = _str(self._try("nvmlSystemGetProcessName", pid))
        if name:
            return name
        try:  # NVML cannot name processes of other PID namespaces; /proc sometimes can
            return Path(f"/proc/{pid}/comm").read_text().strip() or None
        except OSError:
            return None

    def close(self) -> None:
        if self._events is not None:
            self._try("nvmlEventSetFree", self._events)
            self._events = None
        try:
            self._nv.nvmlShutdown()
        except self._nv.NVMLError:
            pass


def _str(v: Any) -> str | None:
    if isinstance(v, bytes):
        return v.decode(errors="replace")
    return v


def load(watch_xid: bool = False) -> RealNvml:
    """The real NVML; raises :class:`NvmlUnavailable` (with the reason) when there is none."""
    return RealNvml(watch_xid=watch_xid)


def record(api: Any, description: str = "") -> dict[str, Any]:
    """A :class:`RecordedNvml` document of what ``api`` reads now (for new test fixtures)."""
    return {
        "description": description,
        "driver_version": api.driver_version(),
        "cuda_driver_version": api.cuda_driver_version(),
        "devices": [api.snapshot(i).to_dict() for i in range(api.device_count())],
    }


def main(argv: list[str]) -> int:
    """``python -m llmdiag.nvml record [DESCRIPTION]``: print this node's readings as JSON."""
    if not argv or argv[0] != "record":
        print("usage: python -m llmdiag.nvml record [DESCRIPTION]", file=sys.stderr)
        return 2
    try:
        api = load()
    except NvmlUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        print(json.dumps(record(api, " ".join(argv[1:])), indent=2))
    finally:
        api.close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
