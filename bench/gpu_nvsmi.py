"""The NVML adapter's snapshot against ``nvidia-smi -q -x``: parse the XML, compare field by field.

Pure functions, no GPU: :func:`parse_smi_xml` reads the XML that ``nvidia-smi -q -x`` prints
(the element names of its ``nvsmi_device_v12`` DTD and of the older ``clocks_throttle_*`` /
``power_readings`` spellings) into the units of :class:`llmdiag.nvml.GpuSnapshot`;
:func:`compare` sets one snapshot (or two, read just before and just after nvidia-smi, for
the readings that move) against one GPU of that XML and returns one :class:`FieldCheck` per
field: ``equal``, ``explained`` (differs for a reason named in the check), ``unsupported``
(neither side can read it) or ``mismatch`` (differs, no known reason: the adapter or the
comparison is wrong and someone must look). :func:`parse_nvlink_status` reads
``nvidia-smi nvlink -s``, because the ``-q`` XML carries no per-link state.
"""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from typing import Any

MiB = 1024 * 1024
NA = {"", "n/a", "[n/a]", "[not supported]", "not supported", "none", "[unknown error]", "unknown error",
      "requested functionality has been deprecated", "[insufficient permissions]"}

#: nvidia-smi's clock-event element suffix -> the adapter's reason name (llmdiag.nvml.THROTTLE_BITS)
SMI_REASONS = {
    "gpu_idle": "gpu_idle",
    "applications_clocks_setting": "applications_clocks_setting",
    "sw_power_cap": "sw_power_cap",
    "hw_slowdown": "hw_slowdown",
    "hw_thermal_slowdown": "hw_thermal_slowdown",
    "hw_power_brake_slowdown": "hw_power_brake_slowdown",
    "sync_boost": "sync_boost",
    "sw_thermal_slowdown": "sw_thermal_slowdown",
    "display_clocks_setting": "display_clock_setting",
}
COMPUTE_MODES = {"default": "default", "exclusive_thread": "exclusive_thread", "prohibited": "prohibited",
                 "exclusive_process": "exclusive_process"}

#: Tolerances for readings that move between two reads: absolute, in the field's unit.
VOLATILE_TOLERANCE = {"temperature_c": 2, "sm_clock_mhz": 30, "memory_used_bytes": 64 * MiB}

VERDICTS = ("equal", "explained", "unsupported", "mismatch")


class SmiParseError(ValueError):
    """The text is not ``nvidia-smi -q -x`` output."""


@dataclasses.dataclass(frozen=True)
class FieldCheck:
    field: str
    verdict: str  # one of VERDICTS
    nvml: Any
    smi: Any
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ---------------------------------------------------------------------------------------------
# parsing

def _text(el: ET.Element | None, path: str) -> str | None:
    if el is None:
        return None
    node = el.find(path)
    if node is None or node.text is None:
        return None
    value = node.text.strip()
    return None if value.lower() in NA else value


def _number(value: str | None, unit: str = "") -> float | None:
    """``"143771 MiB"`` -> 143771.0; ``"16x"`` -> 16.0; N/A -> None."""
    if value is None:
        return None
    m = re.match(r"^\s*(-?[0-9]+(?:\.[0-9]+)?)\s*" + re.escape(unit), value)
    if not m:
        raise SmiParseError(f"expected a number{' in ' + unit if unit else ''}, got {value!r}")
    return float(m.group(1))


def _int(value: str | None, unit: str = "") -> int | None:
    n = _number(value, unit)
    return None if n is None else int(n)


def _yes(value: str | None, yes: Iterable[str] = ("yes", "enabled", "active")) -> bool | None:
    if value is None:
        return None
    return value.strip().lower() in yes


def _sum(values: Iterable[int | None]) -> int | None:
    vals = [v for v in values if v is not None]
    return sum(vals) if vals else None


def _ecc_counts(block: ET.Element | None) -> tuple[int | None, int | None]:
    """(uncorrectable, corrected) of a ``volatile`` or ``aggregate`` block, either DTD generation."""
    if block is None:
        return None, None
    if block.find("dram_uncorrectable") is not None or block.find("sram_correctable") is not None:
        unc = _sum(_int(_text(block, t)) for t in ("sram_uncorrectable", "sram_uncorrectable_parity",
                                                   "sram_uncorrectable_secded", "dram_uncorrectable"))
        cor = _sum(_int(_text(block, t)) for t in ("sram_correctable", "dram_correctable"))
        return unc, cor
    # before driver 535: <single_bit><total/></single_bit><double_bit><total/></double_bit>
    return _int(_text(block, "double_bit/total")), _int(_text(block, "single_bit/total"))


def _reasons(gpu: ET.Element) -> tuple[str, ...] | None:
    block = gpu.find("clocks_event_reasons")
    if block is None:
        block = gpu.find("clocks_throttle_reasons")
    if block is None:
        return None
    names, seen = [], False
    for child in block:
        m = re.match(r"clocks_(?:event|throttle)_reason_(.+)$", child.tag)
        if not m:
            continue
        value = (child.text or "").strip().lower()
        if value in NA:
            continue
        seen = True
        if value == "active":
            names.append(SMI_REASONS.get(m.group(1), m.group(1)))
    return tuple(sorted(names)) if seen else None


def _processes(gpu: ET.Element) -> tuple[dict[str, Any], ...] | None:
    block = gpu.find("processes")
    if block is None:
        return None
    out = []
    for p in block.findall("process_info"):
        used = _number(_text(p, "used_memory"), "MiB")
        out.append({"pid": _int(_text(p, "pid")), "type": _text(p, "type"), "name": _text(p, "process_name"),
                    "used_bytes": None if used is None else int(used * MiB)})
    return tuple(out)


def parse_gpu(gpu: ET.Element) -> dict[str, Any]:
    """One ``<gpu>`` element in the adapter's field names and units (bytes, W, MHz, C)."""
    power = gpu.find("gpu_power_readings")
    if power is None:
        power = gpu.find("power_readings")  # before driver 530
    limit = _text(power, "current_power_limit") or _text(power, "enforced_power_limit") or _text(power, "power_limit")
    mem = gpu.find("fb_memory_usage")
    link = gpu.find("pci/pci_gpu_link_info")
    vol_unc, vol_cor = _ecc_counts(gpu.find("ecc_errors/volatile"))
    agg_unc, _ = _ecc_counts(gpu.find("ecc_errors/aggregate"))
    pending = _text(gpu, "retired_pages/pending_retirement") or _text(gpu, "retired_pages/pending_blacklist")
    mib = {k: _number(_text(mem, k), "MiB") for k in ("total", "reserved", "used", "free")}
    width = _text(link, "link_widths/current_link_width")
    width_max = _text(link, "link_widths/max_link_width")
    return {
        "pci_bus_id": gpu.get("id"),
        "name": _text(gpu, "product_name"),
        "uuid": _text(gpu, "uuid"),
        "memory_total_mib": mib["total"],
        "memory_reserved_mib": mib["reserved"],
        "memory_used_mib": mib["used"],
        "memory_free_mib": mib["free"],
        "ecc_mode_enabled": _yes(_text(gpu, "ecc_mode/current_ecc")),
        "ecc_uncorrectable_volatile": vol_unc,
        "ecc_uncorrectable_aggregate": agg_unc,
        "ecc_corrected_volatile": vol_cor,
        "retired_pages_dbe": _int(_text(gpu, "retired_pages/double_bit_retirement/retired_count")),
        "retired_pages_pending": _yes(pending),
        "remapped_rows_pending": _yes(_text(gpu, "remapped_rows/remapped_row_pending")),
        "remapped_rows_failure": _yes(_text(gpu, "remapped_rows/remapped_row_failure")),
        "temperature_c": _int(_text(gpu, "temperature/gpu_temp"), "C"),
        "temperature_slowdown_c": _int(_text(gpu, "temperature/gpu_temp_slow_threshold"), "C"),
        "temperature_slowdown_is_relative": (gpu.find("temperature/gpu_temp_slow_threshold") is None
                                             and _text(gpu, "temperature/gpu_temp_slow_tlimit_threshold") is not None),
        "power_limit_w": _number(limit, "W"),
        "power_default_limit_w": _number(_text(power, "default_power_limit"), "W"),
        "sm_clock_mhz": _int(_text(gpu, "clocks/sm_clock"), "MHz"),
        "max_sm_clock_mhz": _int(_text(gpu, "max_clocks/sm_clock"), "MHz"),
        "throttle_reasons": _reasons(gpu),
        "pcie_gen": _int(_text(link, "pcie_gen/current_link_gen")),
        "pcie_gen_max": _int(_text(link, "pcie_gen/max_link_gen")),
        "pcie_gen_max_device": _int(_text(link, "pcie_gen/max_device_link_gen")),
        "pcie_width": _int(width, "x"),
        "pcie_width_max": _int(width_max, "x"),
        "persistence_mode": _yes(_text(gpu, "persistence_mode")),
        "compute_mode": None if (cm := _text(gpu, "compute_mode")) is None else
        COMPUTE_MODES.get(cm.lower(), cm.lower()),
        "processes": _processes(gpu),
    }


def parse_smi_xml(text: str) -> dict[str, Any]:
    """``{"driver_version", "cuda_version", "gpus": [parse_gpu(...) in document order]}``."""
    try:
        root = ET.fromstring(text.encode() if isinstance(text, str) else text)
    except ET.ParseError as exc:
        raise SmiParseError(f"not XML: {exc}") from None
    if root.tag != "nvidia_smi_log":
        raise SmiParseError(f"root element is <{root.tag}>, expected <nvidia_smi_log>")
    return {"driver_version": _text(root, "driver_version"), "cuda_version": _text(root, "cuda_version"),
            "gpus": [parse_gpu(g) for g in root.findall("gpu")]}


def parse_nvlink_status(text: str) -> dict[int, dict[str, Any]]:
    """``nvidia-smi nvlink -s`` -> ``{gpu_index: {"total": links listed, "down": [inactive links]}}``."""
    out: dict[int, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    for line in text.splitlines():
        m = re.match(r"^GPU (\d+):", line)
        if m:
            current = out.setdefault(int(m.group(1)), {"total": 0, "down": []})
            continue
        m = re.match(r"^\s+Link (\d+):\s*(.*)$", line)
        if m and current is not None:
            current["total"] += 1
            if "inactive" in m.group(2).lower():
                current["down"].append(int(m.group(1)))
    return out


# ---------------------------------------------------------------------------------------------
# comparison

def _norm_bus_id(v: str | None) -> str | None:
    if v is None:
        return None
    v = v.strip().upper()
    m = re.match(r"^([0-9A-F]+):([0-9A-F]{2}):([0-9A-F]{2})\.([0-9A-F])$", v)
    return f"{int(m.group(1), 16):08X}:{m.group(2)}:{m.group(3)}.{m.group(4)}" if m else v


def _exact(field: str, nvml: Any, smi: Any, reason_absent: str = "") -> FieldCheck:
    if nvml is None and smi is None:
        return FieldCheck(field, "unsupported", nvml, smi, reason_absent or "neither NVML nor nvidia-smi reads it here")
    if nvml is None:
        return FieldCheck(field, "mismatch", nvml, smi, "nvidia-smi reads it, the adapter returned None")
    if smi is None:
        return FieldCheck(field, "mismatch", nvml, smi, "the adapter reads a value nvidia-smi shows as N/A")
    if nvml == smi:
        return FieldCheck(field, "equal", nvml, smi)
    return FieldCheck(field, "mismatch", nvml, smi, "values differ")


def _bracketed(field: str, reads: list[Any], smi: Any, tol: float, unit: str) -> FieldCheck:
    """A reading that moves: equal when nvidia-smi's value lies within the NVML reads ± tol."""
    vals = [v for v in reads if v is not None]
    if not vals:
        return _exact(field, None, smi)
    if smi is None:
        return _exact(field, vals[0], None)
    shown = vals[0] if len(vals) == 1 else vals
    if min(vals) - tol <= smi <= max(vals) + tol:
        exact = smi in vals
        return FieldCheck(field, "equal", shown, smi, "" if exact else
                          f"within {tol:g} {unit} of the NVML reads around nvidia-smi's (a reading that moves)")
    return FieldCheck(field, "mismatch", shown, smi, f"outside the NVML reads ± {tol:g} {unit}")


def _memory(before: Any, after: Any | None, smi: Mapping[str, Any]) -> list[FieldCheck]:
    out = []
    total = None if before.memory_total_bytes is None else before.memory_total_bytes / MiB
    st = smi["memory_total_mib"]
    if total is not None and st is not None and abs(total - st) <= 1:
        out.append(FieldCheck("memory_total_bytes", "equal", before.memory_total_bytes, int(st * MiB),
                              "" if total == st else "equal to the MiB nvidia-smi rounds to"))
    else:
        out.append(_exact("memory_total_bytes", before.memory_total_bytes, None if st is None else int(st * MiB)))
    reads = [s.memory_used_bytes for s in (before, after) if s is not None and s.memory_used_bytes is not None]
    used, reserved = smi["memory_used_mib"], smi["memory_reserved_mib"]
    tol = VOLATILE_TOLERANCE["memory_used_bytes"]
    if not reads or used is None:
        out.append(_exact("memory_used_bytes", reads[0] if reads else None, used))
        return out
    lo, hi = min(reads) - tol, max(reads) + tol
    used_b = int(used * MiB)
    if lo <= used_b <= hi:
        out.append(FieldCheck("memory_used_bytes", "equal", reads[0], used_b))
    elif reserved is not None and lo <= (used + reserved) * MiB <= hi:
        out.append(FieldCheck("memory_used_bytes", "explained", reads[0], used_b,
                              f"NVML's v1 memory info counts the {reserved:g} MiB the driver reserves as used; "
                              "nvidia-smi lists them apart (used + reserved matches)"))
    else:
        out.append(FieldCheck("memory_used_bytes", "mismatch", reads[0], used_b,
                              "neither used nor used + reserved matches the NVML reads"))
    return out


def _throttle(reads: list[tuple[str, ...] | None], smi: tuple[str, ...] | None) -> FieldCheck:
    sets = [tuple(sorted(r)) for r in reads if r is not None]
    if not sets or smi is None:
        return _exact("throttle_reasons", sets[0] if sets else None, smi)
    if tuple(smi) in sets:
        return FieldCheck("throttle_reasons", "equal", sets[0], smi)
    steady = {tuple(sorted(set(s) - {"gpu_idle"})) for s in sets}
    if tuple(sorted(set(smi) - {"gpu_idle"})) in steady:
        return FieldCheck("throttle_reasons", "explained", sets[0], smi,
                          "only the gpu_idle reason differs: it flips with load between the reads")
    return FieldCheck("throttle_reasons", "mismatch", sets[0], smi, "different clock-event reasons")


def _processes_check(reads: list[Any], smi: tuple[Mapping[str, Any], ...] | None) -> FieldCheck:
    lists = [r for r in reads if r is not None]
    if not lists or smi is None:
        return _exact("processes", lists[0] if lists else None, smi)
    smi_pids = sorted(p["pid"] for p in smi if p.get("pid") is not None and "C" in (p.get("type") or "C"))
    nvml_sets = [sorted(int(p["pid"]) for p in r) for r in lists]
    if smi_pids in nvml_sets:
        return FieldCheck("processes", "equal", nvml_sets[0], smi_pids)
    union = sorted({pid for s in nvml_sets for pid in s})
    if set(smi_pids) <= set(union):
        return FieldCheck("processes", "explained", nvml_sets[0], smi_pids,
                          "a process started or ended between the reads; every pid nvidia-smi lists was seen by NVML")
    return FieldCheck("processes", "mismatch", nvml_sets[0], smi_pids, "compute processes differ")


def compare(before: Any, smi: Mapping[str, Any], after: Any | None = None,
            nvlink: Mapping[str, Any] | None = None) -> list[FieldCheck]:
    """Every field of ``before`` (a GpuSnapshot; ``after`` a second read just after nvidia-smi)
    against ``smi`` (one :func:`parse_gpu` dict); ``nvlink`` is this GPU's
    :func:`parse_nvlink_status` entry, None when ``nvidia-smi nvlink -s`` was not run."""
    both = [s for s in (before, after) if s is not None]
    out = [
        _exact("name", before.name, smi["name"]),
        _exact("uuid", before.uuid, smi["uuid"]),
        _exact("pci_bus_id", _norm_bus_id(before.pci_bus_id), _norm_bus_id(smi["pci_bus_id"])),
    ]
    out += _memory(before, after, smi)
    for f in ("ecc_mode_enabled", "ecc_uncorrectable_volatile", "ecc_uncorrectable_aggregate", "ecc_corrected_volatile",
              "retired_pages_pending", "retired_pages_dbe", "remapped_rows_pending", "remapped_rows_failure",
              "persistence_mode", "compute_mode", "max_sm_clock_mhz"):
        absent = "retired pages are replaced by row remapping on this GPU" if f.startswith("retired") else ""
        out.append(_exact(f, getattr(before, f), smi[f], absent))
    out.append(_bracketed("temperature_c", [s.temperature_c for s in both], smi["temperature_c"],
                          VOLATILE_TOLERANCE["temperature_c"], "C"))
    slow = before.temperature_slowdown_c
    if smi["temperature_slowdown_c"] is None and smi.get("temperature_slowdown_is_relative") and slow is not None:
        out.append(FieldCheck("temperature_slowdown_c", "explained", slow, None,
                              "this nvidia-smi prints the slowdown threshold relative to T.Limit, not in C"))
    else:
        out.append(_exact("temperature_slowdown_c", slow, smi["temperature_slowdown_c"]))
    for f in ("power_limit_w", "power_default_limit_w"):
        a, b = getattr(before, f), smi[f]
        if a is not None and b is not None and abs(a - b) <= 0.01:
            out.append(FieldCheck(f, "equal", a, b))
        else:
            out.append(_exact(f, a, b))
    out.append(_bracketed("sm_clock_mhz", [s.sm_clock_mhz for s in both], smi["sm_clock_mhz"],
                          VOLATILE_TOLERANCE["sm_clock_mhz"], "MHz"))
    out.append(_throttle([s.throttle_reasons for s in both], smi["throttle_reasons"]))
    for f in ("pcie_gen", "pcie_width"):
        reads = [getattr(s, f) for s in both]
        top = max((x for x in (before.pcie_gen_max, smi["pcie_gen_max"]) if x is not None), default=None)
        if smi[f] is not None and smi[f] not in reads and any(r is not None for r in reads):
            if f == "pcie_gen" and top is not None and 1 <= smi[f] <= top and all(r is None or r <= top for r in reads):
                out.append(FieldCheck(f, "explained", reads[0], smi[f], "the link's generation drops at idle and "
                                      "rises under load (power management): it moved between the reads"))
            else:
                out.append(FieldCheck(f, "mismatch", reads[0], smi[f], "the current link differs from every NVML read"))
        else:
            out.append(_exact(f, next((r for r in reads if r == smi[f]), reads[0]), smi[f]))
    gen_max = before.pcie_gen_max
    if gen_max is not None and smi["pcie_gen_max"] is not None and gen_max != smi["pcie_gen_max"] \
            and gen_max == smi.get("pcie_gen_max_device"):
        out.append(FieldCheck("pcie_gen_max", "explained", gen_max, smi["pcie_gen_max"],
                              "NVML gives the device's maximum; nvidia-smi's max_link_gen is capped by the host"))
    else:
        out.append(_exact("pcie_gen_max", gen_max, smi["pcie_gen_max"]))
    out.append(_exact("pcie_width_max", before.pcie_width_max, smi["pcie_width_max"]))
    if nvlink is None:
        out.append(FieldCheck("nvlink", "unsupported", before.nvlink_total, None,
                              "nvidia-smi -q -x carries no per-link state and `nvidia-smi nvlink -s` was not read"))
    else:
        mine = {"total": before.nvlink_total, "down": sorted(before.nvlink_down or ())}
        theirs = {"total": nvlink.get("total", 0), "down": sorted(nvlink.get("down", ()))}
        if mine == theirs:
            out.append(FieldCheck("nvlink", "equal", mine, theirs))
        else:
            out.append(FieldCheck("nvlink", "mismatch", mine, theirs, "link count or inactive links differ"))
    out.append(_processes_check([s.processes for s in both], smi["processes"]))
    return out


def match_gpus(snapshots: list[Any], smi_gpus: list[Mapping[str, Any]]) -> list[tuple[Any, Mapping[str, Any] | None]]:
    """Pair each snapshot with nvidia-smi's GPU of the same UUID, else the same PCI bus id."""
    by_uuid = {g["uuid"]: g for g in smi_gpus if g.get("uuid")}
    by_bus = {_norm_bus_id(g["pci_bus_id"]): g for g in smi_gpus if g.get("pci_bus_id")}
    return [(s, by_uuid.get(s.uuid) or by_bus.get(_norm_bus_id(s.pci_bus_id))) for s in snapshots]


def summarise(checks: list[FieldCheck]) -> dict[str, int]:
    return {v: sum(1 for c in checks if c.verdict == v) for v in VERDICTS}
