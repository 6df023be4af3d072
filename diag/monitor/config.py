"""``[monitor]``: sampling interval and alert rules of ``llmdiag monitor`` (flags override the file)."""

from __future__ import annotations

import dataclasses

from llmdiag.config import section, setting

#: Clock-event reasons that mean "slower than it should be" (see llmdiag.nvml.THROTTLE_BITS).
#: sw_power_cap is left out by default: a GPU at full load sits at its power cap routinely.
DEFAULT_THROTTLE = ["hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown"]
THROTTLE_NAMES = ("gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
                  "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clock_setting")


def _throttle_ok(value) -> str | None:
    bad = [v for v in value if v not in THROTTLE_NAMES]
    return f"unknown throttle reason(s) {', '.join(bad)} (accepted: {', '.join(THROTTLE_NAMES)})" if bad else None


@dataclasses.dataclass(frozen=True)
class Rules:
    """The alert thresholds (the rule keys of ``[monitor]``; a report lists them as its thresholds)."""

    gpu_memory_max_pct: float = setting(95.0, "alert when a GPU's memory in use exceeds this share", min=1, max=100)
    gpu_temp_max_c: int = setting(85, "alert at this GPU temperature (also at the GPU's own slowdown temperature)",
                                  min=0, max=150)
    gpu_power_max_fraction: float = setting(
        1.0, "alert when power draw exceeds this fraction of the GPU's enforced power limit", min=0.1, max=2.0)
    throttle_reasons: tuple[str, ...] = setting(DEFAULT_THROTTLE, "clock-event reasons that raise a throttling alert",
                                                validator=_throttle_ok)
    host_memory_max_pct: float = setting(95.0, "alert when host memory in use exceeds this share", min=1, max=100)
    host_cpu_max_pct: float | None = setting(None, "alert when host CPU utilisation exceeds this (unset: no rule)",
                                             min=1, max=100)
    stall_factor: float = setting(
        3.0, "sampling stalled (at least 1 s) or a peer node silent after this many intervals without a sample",
        min=1.5, max=1000)

    def __post_init__(self) -> None:
        object.__setattr__(self, "throttle_reasons", tuple(self.throttle_reasons))  # the file gives a list


@section("monitor", "Sampling interval and alert rules of llmdiag monitor.")
class Settings(Rules):
    """All of ``[monitor]``: the rules and how the monitor samples and reports."""

    interval_s: float = setting(5.0, "seconds between samples", min=0.05, max=3600, flag=("--interval",),
                                metavar="SECONDS")
    on_alert: str | None = setting(None, "command run for every alert, the alert as JSON on stdin (no shell)",
                                   flag=("--on-alert",), metavar="CMD")
    on_alert_timeout_s: float = setting(10.0, "the alert command is killed after this long", min=0.1, max=600)

    def rules(self) -> Rules:
        return Rules(**{f.name: getattr(self, f.name) for f in dataclasses.fields(Rules)})
