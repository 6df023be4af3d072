"""``[monitor]``: sampling interval and alert rules of ``llmdiag monitor`` (flags override the file)."""

from __future__ import annotations

import dataclasses

from llmdiag.config import Field, register_section

#: Clock-event reasons that mean "slower than it should be" (see llmdiag.nvml.THROTTLE_BITS).
#: sw_power_cap is left out by default: a GPU at full load sits at its power cap routinely.
DEFAULT_THROTTLE = ["hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown"]
THROTTLE_NAMES = ("gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
                  "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clock_setting")


def _throttle_ok(value) -> str | None:
    bad = [v for v in value if v not in THROTTLE_NAMES]
    return f"unknown throttle reason(s) {', '.join(bad)} (accepted: {', '.join(THROTTLE_NAMES)})" if bad else None


FIELDS = [
    Field("interval_s", "float", 5.0, "seconds between samples", min=0.05, max=3600),
    Field("gpu_memory_max_pct", "float", 95.0, "alert when a GPU's memory in use exceeds this share", min=1, max=100),
    Field("gpu_temp_max_c", "int", 85, "alert at this GPU temperature (also at the GPU's own slowdown temperature)",
          min=0, max=150),
    Field("gpu_power_max_fraction", "float", 1.0,
          "alert when power draw exceeds this fraction of the GPU's enforced power limit", min=0.1, max=2.0),
    Field("throttle_reasons", "str_list", DEFAULT_THROTTLE, "clock-event reasons that raise a throttling alert",
          validator=_throttle_ok),
    Field("host_memory_max_pct", "float", 95.0, "alert when host memory in use exceeds this share", min=1, max=100),
    Field("host_cpu_max_pct", "float", None, "alert when host CPU utilisation exceeds this (unset: no rule)",
          min=1, max=100),
    Field("stall_factor", "float", 3.0,
          "sampling stalled (at least 1 s) or a peer node silent after this many intervals without a sample", min=1.5, max=1000),
    Field("on_alert", "str", None, "command run for every alert, the alert as JSON on stdin (no shell)"),
    Field("on_alert_timeout_s", "float", 10.0, "the alert command is killed after this long", min=0.1, max=600),
]
register_section("monitor", FIELDS, "Sampling interval and alert rules of llmdiag monitor.")


@dataclasses.dataclass(frozen=True)
class Rules:
    """The alert thresholds, validated (one value per ``[monitor]`` rule field)."""

    gpu_memory_max_pct: float = 95.0
    gpu_temp_max_c: int = 85
    gpu_power_max_fraction: float = 1.0
    throttle_reasons: tuple[str, ...] = tuple(DEFAULT_THROTTLE)
    host_memory_max_pct: float = 95.0
    host_cpu_max_pct: float | None = None
    stall_factor: float = 3.0


def rules_from_config(config) -> Rules:
    sec = config.section("monitor") if config is not None else {}
    names = {f.name for f in dataclasses.fields(Rules)}
    values = {k: v for k, v in sec.items() if k in names and v is not None}
    if "throttle_reasons" in values:
        values["throttle_reasons"] = tuple(values["throttle_reasons"])
    if sec.get("host_cpu_max_pct") is None:
        values["host_cpu_max_pct"] = None
    return Rules(**values)
