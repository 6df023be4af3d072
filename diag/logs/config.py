"""``[analyze_log]``: thresholds of the anomaly detectors (flags override the file)."""

from __future__ import annotations

from llmdiag.config import section, setting


@section("analyze_log", "Thresholds of llmdiag analyze-log's anomaly detectors.")
class Settings:
    """The detectors' thresholds. A loss spike is above median + max(spike_spread_k × robust
    sigma, spike_min_rel × median, spike_min_abs) of the rolling window."""

    window: int = setting(20, "records in the rolling baseline", min=3, max=10000)
    spike_spread_k: float = setting(6.0, "loss spike: robust sigmas above the rolling median", min=1, max=100)
    spike_min_rel: float = setting(0.5, "loss spike: minimum rise relative to the median", min=0, max=100)
    spike_min_abs: float = setting(0.5, "loss spike: minimum absolute rise", min=0)
    grad_spike_ratio: float = setting(5.0, "grad-norm spike: ratio to the rolling median", min=1.5)
    grad_explosion_ratio: float = setting(100.0, "grad-norm explosion: ratio to the rolling median", min=2)
    #: speed below this fraction of its baseline for `drop_min_records` records
    drop_fraction: float = setting(0.7, "throughput drop: fraction of the baseline speed", min=0.05, max=0.99)
    drop_min_records: int = setting(3, "throughput drop: consecutive slow records", min=1, max=1000)
    #: the engine also waits a tenth of the run's cadence before calling a silence a hang
    hang_minutes: float = setting(10.0, "no progress for this many minutes is a hang (with --follow also: no new "
                                  "step for this long by the wall clock)", min=0.1, flag=("--no-progress-minutes",))
    #: a loss scale that falls by this factor without overflow messages still counts as overflow
    scale_collapse_factor: float = setting(256.0, "loss-scale fall that counts as overflow", min=2)
