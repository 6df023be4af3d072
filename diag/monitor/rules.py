"""Alert rules: samples in, alerts (plain dicts) out.

Two kinds. A *condition* (memory above its threshold, too hot, throttled, ...) is an alert
while it holds; the loop fires it when it starts and again only after it has cleared, so a
GPU that sits at 96% memory for an hour gives one alert, not 720. An *event* (a new
uncorrectable ECC error, a new Xid, a GPU that cannot be read any more) fires each time.

An alert: ``time, node, rule, severity ("warning" | "critical"), device ("host", "gpu3",
a peer node), message, observed, threshold, unit, runbook``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llmdiag.monitor.config import Rules

#: rule -> runbook id (every rule name appears in reports even when it never fired).
RUNBOOKS = {
    "gpu-memory": "cuda-oom",
    "gpu-temperature": "gpu-temperature",
    "gpu-power": "gpu-power",
    "gpu-throttle": "gpu-throttling",
    "gpu-ecc": "gpu-ecc-errors",
    "gpu-xid": "ecc-xid",
    "gpu-unreadable": "gpu-count-mismatch",
    "host-memory": "host-memory-low",
    "host-cpu": "cpu-oversubscribed",
    "sampling-stalled": "node-silent",
    "node-silent": "node-silent",
}

HW_REASONS = frozenset({"hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"})


def rule_names(rules: Rules) -> list[str]:
    return [r for r in RUNBOOKS if r != "host-cpu" or rules.host_cpu_max_pct is not None]


def alert(rule: str, severity: str, device: str, message: str, observed: Any = None, threshold: Any = None,
          unit: str = "") -> dict[str, Any]:
    return {"rule": rule, "severity": severity, "device": device, "message": message, "observed": observed,
            "threshold": threshold, "unit": unit, "runbook": RUNBOOKS[rule]}


def gpu_conditions(g: Mapping[str, Any], rules: Rules) -> list[dict[str, Any]]:
    dev = f"gpu{g['index']}"
    out = []
    pct = g.get("memory_used_pct")
    if pct is not None and pct > rules.gpu_memory_max_pct:
        out.append(alert("gpu-memory", "warning", dev,
                         f"GPU {g['index']} memory {pct:.1f}% in use ({_gib(g.get('memory_used_bytes'))} of "
                         f"{_gib(g.get('memory_total_bytes'))}), above {rules.gpu_memory_max_pct:g}%",
                         pct, rules.gpu_memory_max_pct, "%"))
    temp, slow = g.get("temperature_c"), g.get("temperature_slowdown_c")
    if temp is not None and (temp >= rules.gpu_temp_max_c or (slow and temp >= slow)):
        at_slowdown = bool(slow and temp >= slow)
        limit = slow if at_slowdown else rules.gpu_temp_max_c
        out.append(alert("gpu-temperature", "critical" if at_slowdown else "warning", dev,
                         f"GPU {g['index']} at {temp} °C, "
                         + (f"at its slowdown temperature {slow} °C" if at_slowdown else f"limit {limit} °C"),
                         temp, limit, "°C"))
    power, limit_w = g.get("power_w"), g.get("power_limit_w")
    if power is not None and limit_w and power > rules.gpu_power_max_fraction * limit_w:
        out.append(alert("gpu-power", "warning", dev,
                         f"GPU {g['index']} draws {power:.0f} W, above {rules.gpu_power_max_fraction:g} x its "
                         f"{limit_w:.0f} W limit", power, round(rules.gpu_power_max_fraction * limit_w, 1), "W"))
    slowing = [r for r in g.get("throttle_reasons") or () if r in rules.throttle_reasons]
    if slowing:
        clocks = f" (SM {g['sm_clock_mhz']} of {g['max_sm_clock_mhz']} MHz)" if g.get("sm_clock_mhz") else ""
        out.append(alert("gpu-throttle", "critical" if HW_REASONS.intersection(slowing) else "warning", dev,
                         f"GPU {g['index']} throttled: {', '.join(slowing)}{clocks}", ", ".join(slowing),
                         "no slowdown"))
    return out


def gpu_events(g: Mapping[str, Any], prev: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Events of one GPU against its previous sample (``None`` before the first sample)."""
    dev = f"gpu{g['index']}"
    if g.get("error"):
        if prev is not None and prev.get("error"):
            return []  # already reported when it was lost
        return [alert("gpu-unreadable", "critical", dev, f"GPU {g['index']} cannot be read: {g['error']}",
                      g["error"], "readable")]
    out = []
    ecc, before = g.get("ecc_uncorrectable_volatile"), (prev or {}).get("ecc_uncorrectable_volatile") or 0
    if ecc is not None and ecc > before:
        what = "new uncorrectable ECC error(s)" if prev is not None else "uncorrectable ECC error(s) since the last reset"
        out.append(alert("gpu-ecc", "critical", dev, f"GPU {g['index']}: {ecc - before} {what} (total {ecc})",
                         ecc, before, "errors"))
    for x in g.get("new_xids") or ():
        out.append(alert("gpu-xid", "critical", dev, f"GPU {g['index']}: Xid {x.get('xid')}", x.get("xid"), "none"))
    return out


def host_conditions(h: Mapping[str, Any], rules: Rules) -> list[dict[str, Any]]:
    out = []
    pct = h.get("mem_pct")
    if pct is not None and pct > rules.host_memory_max_pct:
        out.append(alert("host-memory", "warning", "host",
                         f"host memory {pct:.1f}% in use ({_gib(h.get('mem_used_bytes'))} of "
                         f"{_gib(h.get('mem_total_bytes'))}), above {rules.host_memory_max_pct:g}%",
                         pct, rules.host_memory_max_pct, "%"))
    cpu = h.get("cpu_pct")
    if rules.host_cpu_max_pct is not None and cpu is not None and cpu > rules.host_cpu_max_pct:
        out.append(alert("host-cpu", "warning", "host", f"host CPU {cpu:.0f}% busy, above {rules.host_cpu_max_pct:g}%",
                         cpu, rules.host_cpu_max_pct, "%"))
    return out


def evaluate(sample: Mapping[str, Any], prev_gpus: Mapping[int, Mapping[str, Any]], rules: Rules
             ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(conditions that hold now, events) of one sample; ``prev_gpus`` by GPU index."""
    conditions = host_conditions(sample.get("host") or {}, rules)
    events: list[dict[str, Any]] = []
    for g in sample.get("gpus") or ():
        events += gpu_events(g, prev_gpus.get(g["index"]))
        if not g.get("error"):
            conditions += gpu_conditions(g, rules)
    return conditions, events


def _gib(b: Any) -> str:
    return "?" if b is None else f"{b / 2**30:.1f} GiB"


def condition_key(a: Mapping[str, Any]) -> tuple[str, str]:
    return (str(a["rule"]), str(a["device"]))


def severity_of(alerts: Sequence[Mapping[str, Any]]) -> str:
    if any(a.get("severity") == "critical" for a in alerts):
        return "fail"
    return "warn" if alerts else "pass"
