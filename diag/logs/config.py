"""``[analyze_log]``: thresholds of the anomaly detectors (flags override the file)."""

from __future__ import annotations

import dataclasses

from llmdiag.config import Field, register_section


@dataclasses.dataclass(frozen=True)
class Settings:
    #: records in the rolling baseline (median and spread)
    window: int = 20
    #: a loss spike is above median + max(spread_k * robust sigma, min_rel * median, min_abs)
    spike_spread_k: float = 6.0
    spike_min_rel: float = 0.5
    spike_min_abs: float = 0.5
    #: grad-norm spike / explosion: ratio to the rolling median
    grad_spike_ratio: float = 5.0
    grad_explosion_ratio: float = 100.0
    #: throughput drop: speed below this fraction of its baseline for `drop_min_records` records
    drop_fraction: float = 0.7
    drop_min_records: int = 3
    #: no progress for this long (and a tenth of the run's cadence) means a hang
    hang_minutes: float = 10.0
    #: a loss scale that falls by this factor without overflow messages still counts as overflow
    scale_collapse_factor: float = 256.0


FIELDS = [
    Field("window", "int", 20, "records in the rolling baseline", min=3, max=10000),
    Field("spike_spread_k", "float", 6.0, "loss spike: robust sigmas above the rolling median", min=1, max=100),
    Field("spike_min_rel", "float", 0.5, "loss spike: minimum rise relative to the median", min=0, max=100),
    Field("spike_min_abs", "float", 0.5, "loss spike: minimum absolute rise", min=0),
    Field("grad_spike_ratio", "float", 5.0, "grad-norm spike: ratio to the rolling median", min=1.5),
    Field("grad_explosion_ratio", "float", 100.0, "grad-norm explosion: ratio to the rolling median", min=2),
    Field("drop_fraction", "float", 0.7, "throughput drop: fraction of the baseline speed", min=0.05, max=0.99),
    Field("drop_min_records", "int", 3, "throughput drop: consecutive slow records", min=1, max=1000),
    Field("hang_minutes", "float", 10.0, "no progress for this many minutes is a hang", min=0.1),
    Field("scale_collapse_factor", "float", 256.0, "loss-scale fall that counts as overflow", min=2),
]
register_section("analyze_log", FIELDS, "Thresholds of llmdiag analyze-log's anomaly detectors.")


def from_config(config) -> Settings:
    if config is None:
        return Settings()
    values = {f.name: config.get("analyze_log", f.name) for f in FIELDS}
    return Settings(**{k: v for k, v in values.items() if v is not None})
