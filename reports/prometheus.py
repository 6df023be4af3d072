"""Prometheus text exposition format (0.0.4) for every document kind.

Written for node_exporter's textfile collector (``--collector.textfile.directory``) and for
``llmdiag monitor --prometheus-file`` / ``--port``. The rules are prometheus_client's: base
units (``_seconds``, ``_bytes``, ``_bytes_per_second``, ``_celsius``, ``_hertz``, ``_watts``,
ratios 0–1), counters named ``*_total``, HELP and TYPE for every family, label values escaped.
Every metric is declared once in :data:`METRICS` (name, type, labels, help); writing an
undeclared one is an error, and docs/reports.md's metric list is generated from the table
(``python -m llmdiag.reports.prometheus``).

Every sample has the same labels from run to run, so a run rewrites its series instead of adding
new ones: ``command`` (never ``job``, which Prometheus sets on every target) and, where the
document knows them, ``node``, the ``log`` an analysis read or the ``plan`` an estimate is of.
Which run wrote the file is one info metric, ``llmdiag_run_info{run=...} 1``, not a label on
every sample.
A value the document lacks is left out, never guessed. Status codes everywhere: pass 0, skip 1,
warn 2, fail 3 (severity order, so ``llmdiag_check_status >= 3`` selects failures).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import sys
from collections.abc import Mapping
from typing import Any

from llmdiag import documents as D
from llmdiag.reports.base import RenderOptions
from llmdiag.vocab import Verdict

STATUS_HELP = "pass 0, skip 1, warn 2, fail 3"
#: the label every sample has: which command wrote it (not ``job``: Prometheus' target label)
_BASE = ("command",)


@dataclasses.dataclass(frozen=True)
class Metric:
    name: str
    type: str  # gauge or counter (a counter's name ends in _total)
    labels: tuple[str, ...]
    help: str
    section: str


def _m(section: str, name: str, type_: str, labels: str, help_: str) -> Metric:
    return Metric(name, type_, _BASE + tuple(x for x in labels.split() if x), help_, section)


#: every metric llmdiag writes; docs/reports.md is generated from this table
METRICS: dict[str, Metric] = {m.name: m for m in (
    _m("every report", "llmdiag_report_status", "gauge", "node log plan", f"Overall status of the report: {STATUS_HELP}."),
    _m("every report", "llmdiag_report_timestamp_seconds", "gauge", "node log plan", "When the report was produced (Unix time)."),
    _m("every report", "llmdiag_run_info", "gauge", "node log plan run",
       "Always 1: which run wrote these metrics (run changes every run; no other metric has it)."),
    _m("preflight (cluster)", "llmdiag_check_status", "gauge", "node probe check",
       f"Status of one check on one node: {STATUS_HELP}."),
    _m("preflight (cluster)", "llmdiag_check_duration_seconds", "gauge", "node probe check", "How long the check's probe took."),
    _m("preflight (cluster)", "llmdiag_node_checks", "gauge", "node status", "Number of checks per node and status."),
    _m("preflight (cluster)", "llmdiag_node_missing", "gauge", "node", "1 when an expected node never reported."),
    _m("preflight (cluster)", "llmdiag_port_connections_failed", "gauge", "",
       "Connections between nodes on the job's ports that were not open."),
    _m("preflight (cluster)", "llmdiag_consistency_diffs", "gauge", "", "Facts that differ between nodes."),
    _m("nccl-bench", "llmdiag_nccl_busbw_bytes_per_second", "gauge", "node collective size_bytes placement",
       "Bus bandwidth per collective, message size and placement."),
    _m("nccl-bench", "llmdiag_nccl_algbw_bytes_per_second", "gauge", "node collective size_bytes placement",
       "Algorithm bandwidth per collective, message size and placement."),
    _m("nccl-bench", "llmdiag_nccl_time_seconds", "gauge", "node collective size_bytes placement",
       "Mean time of one operation."),
    _m("nccl-bench", "llmdiag_nccl_wrong_elements", "gauge", "node collective size_bytes placement",
       "Elements with wrong results (data check)."),
    _m("nccl-bench", "llmdiag_nccl_plateau_busbw_bytes_per_second", "gauge", "node collective",
       "Bus bandwidth plateau at large sizes: compare with the hardware."),
    _m("nccl-bench", "llmdiag_nccl_avg_busbw_bytes_per_second", "gauge", "node collective",
       "Mean bus bandwidth over all rows, as nccl-tests prints it."),
    _m("nccl-bench", "llmdiag_nccl_expected_busbw_bytes_per_second", "gauge", "node",
       "The expected bus bandwidth (--expect-busbw)."),
    _m("nccl-bench", "llmdiag_nccl_world_size", "gauge", "node", "Ranks that took part."),
    _m("nccl-bench", "llmdiag_nccl_pair_busbw_bytes_per_second", "gauge", "node a b",
       "Bus bandwidth between two nodes in the pairwise test."),
    _m("analyze-log (log-analysis)", "llmdiag_log_findings", "gauge", "node log kind severity",
       "Findings in the analysed log, by kind and severity."),
    _m("analyze-log (log-analysis)", "llmdiag_log_last_step", "gauge", "node log", "Last training step (or iteration) in the log."),
    _m("analyze-log (log-analysis)", "llmdiag_log_loss_last", "gauge", "node log", "Last loss in the log (NaN when it was NaN)."),
    _m("analyze-log (log-analysis)", "llmdiag_log_loss_min", "gauge", "node log", "Lowest loss in the log."),
    _m("analyze-log (log-analysis)", "llmdiag_log_learning_rate_last", "gauge", "node log", "Last learning rate in the log."),
    _m("analyze-log (log-analysis)", "llmdiag_log_grad_norm_last", "gauge", "node log", "Last gradient norm in the log."),
    _m("analyze-log (log-analysis)", "llmdiag_log_step_time_seconds", "gauge", "node log", "Typical time of one step."),
    _m("estimate-memory (memory-estimate)", "llmdiag_memory_estimate_bytes", "gauge", "plan component",
       "Predicted per-GPU memory by component."),
    _m("estimate-memory (memory-estimate)", "llmdiag_memory_estimate_total_bytes", "gauge", "plan",
       "Predicted per-GPU peak memory."),
    _m("estimate-memory (memory-estimate)", "llmdiag_memory_gpu_bytes", "gauge", "plan",
       "Memory of the GPU the plan is checked against."),
    _m("estimate-memory (memory-estimate)", "llmdiag_memory_headroom_bytes", "gauge", "plan",
       "GPU memory left by the plan (negative: short by)."),
    _m("estimate-memory (memory-estimate)", "llmdiag_memory_verdict", "gauge", "plan verdict",
       "Verdict of the estimate: pass 0 (fits), warn 2 (tight), fail 3 (out of memory)."),
    _m("monitor", "llmdiag_monitor_samples_total", "counter", "node", "Samples taken since the monitor started."),
    _m("monitor", "llmdiag_monitor_last_sample_timestamp_seconds", "gauge", "node",
       "Time of the latest sample: alert on time() - this > 3 * interval to catch a node gone silent."),
    _m("monitor", "llmdiag_monitor_alerts_total", "counter", "node rule",
       "Alerts fired since the monitor started, by rule (0 for rules that never fired)."),
    _m("monitor", "llmdiag_monitor_alert_active", "gauge", "node rule device", "1 while an alert condition holds."),
    _m("monitor", "llmdiag_gpu_present", "gauge", "node", "GPUs the monitor samples (0: GPUs absent)."),
    _m("monitor", "llmdiag_host_cpu_utilization_ratio", "gauge", "node", "Host CPU utilisation (0-1)."),
    _m("monitor", "llmdiag_host_load1", "gauge", "node", "Host 1-minute load average."),
    _m("monitor", "llmdiag_host_memory_used_bytes", "gauge", "node", "Host memory in use."),
    _m("monitor", "llmdiag_host_memory_total_bytes", "gauge", "node", "Host memory size."),
    _m("monitor", "llmdiag_host_memory_used_ratio", "gauge", "node", "Host memory in use (0-1)."),
    _m("monitor", "llmdiag_host_swap_used_bytes", "gauge", "node", "Swap in use."),
    _m("monitor", "llmdiag_host_network_receive_bytes_total", "counter", "node", "Bytes received on all interfaces since boot."),
    _m("monitor", "llmdiag_host_network_transmit_bytes_total", "counter", "node", "Bytes sent on all interfaces since boot."),
    _m("monitor", "llmdiag_host_network_errors_total", "counter", "node", "Interface errors and drops since boot."),
    _m("monitor", "llmdiag_host_disk_read_bytes_total", "counter", "node", "Bytes read from disks since boot."),
    _m("monitor", "llmdiag_host_disk_written_bytes_total", "counter", "node", "Bytes written to disks since boot."),
    _m("monitor", "llmdiag_gpu_utilization_ratio", "gauge", "node gpu uuid", "GPU (SM) utilisation (0-1)."),
    _m("monitor", "llmdiag_gpu_memory_controller_utilization_ratio", "gauge", "node gpu uuid",
       "GPU memory-controller utilisation (0-1)."),
    _m("monitor", "llmdiag_gpu_memory_used_bytes", "gauge", "node gpu uuid", "GPU memory in use."),
    _m("monitor", "llmdiag_gpu_memory_total_bytes", "gauge", "node gpu uuid", "GPU memory size."),
    _m("monitor", "llmdiag_gpu_temperature_celsius", "gauge", "node gpu uuid", "GPU temperature."),
    _m("monitor", "llmdiag_gpu_temperature_slowdown_celsius", "gauge", "node gpu uuid",
       "Temperature at which the GPU slows down."),
    _m("monitor", "llmdiag_gpu_power_watts", "gauge", "node gpu uuid", "GPU power draw."),
    _m("monitor", "llmdiag_gpu_power_limit_watts", "gauge", "node gpu uuid", "GPU power limit."),
    _m("monitor", "llmdiag_gpu_sm_clock_hertz", "gauge", "node gpu uuid", "SM clock."),
    _m("monitor", "llmdiag_gpu_sm_clock_max_hertz", "gauge", "node gpu uuid", "Maximum SM clock."),
    _m("monitor", "llmdiag_gpu_throttled", "gauge", "node gpu uuid",
       "1 when a clock-event reason of [monitor] throttle_reasons is set."),
    _m("monitor", "llmdiag_gpu_ecc_uncorrectable_errors_total", "counter", "node gpu uuid",
       "Uncorrectable ECC errors since the driver loaded."),
    _m("monitor", "llmdiag_gpu_ecc_corrected_errors_total", "counter", "node gpu uuid",
       "Corrected ECC errors since the driver loaded."),
    _m("monitor", "llmdiag_gpu_xid_events_total", "counter", "node gpu uuid", "Xid events seen since the monitor started."),
)}


def escape_label(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _value(value: Any, nan_ok: bool) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and nan_ok and value.lower() in ("nan", "inf", "-inf", "+inf"):
        return float(value)
    return D.number(value)


#: the fields that say what a run examined (those of them a document's type has)
_RUN_FIELDS = ("command", "files", "model", "plan", "spec", "world", "node")


def run_id(d: Any) -> str:
    """Which run: a generic document's own ``run`` when it has one, else 8 hex digits of what the
    run examined and when it started (a monitor keeps one from its first sample to its report).
    Only ``llmdiag_run_info`` carries it: on every sample it would add series every run."""
    if isinstance(d, D.GenericDoc) and d.run:
        return str(d.run)
    # a monitor's live samples share started_at
    when = "started_at" if getattr(d, "started_at", None) is not None else "created_at"
    return _digest(d, (*_RUN_FIELDS, when))


def _digest(d: Any, fields: tuple[str, ...]) -> str:
    """8 hex digits of the JSON form of ``fields`` of ``d`` (those it has and that are set: a field
    the document did not write reads as None or an empty default)."""
    values = {f: getattr(d, f, None) for f in fields}
    ident = {f: D.to_dict(v) if dataclasses.is_dataclass(v) else v for f, v in values.items()
             if v is not None and v != [] and v != {}}
    return hashlib.sha1(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:8]


def log_label(files: list[str]) -> str | None:
    """The ``log`` label: the file analysed, or the directory that holds all of them (rank logs)."""
    import os

    files = [str(f) for f in files if f]
    if not files:
        return None
    if len(files) == 1:
        return files[0]
    try:
        return os.path.commonpath(files) or files[0]
    except ValueError:  # absolute and relative paths mixed
        return files[0]


class Exposition:
    """Samples grouped by family, written in first-seen order with HELP/TYPE once each."""

    def __init__(self, command: str, node: str | None = None,
                 fixed: Mapping[str, str | None] | None = None) -> None:
        self.base = {"command": str(command)}
        self.node = node
        self.fixed = {k: v for k, v in (fixed or {}).items() if v is not None}  # on every metric that declares it
        self._families: dict[str, list[tuple[dict[str, str], float]]] = {}

    def add(self, name: str, value: Any, labels: Mapping[str, Any] | None = None, *, nan_ok: bool = False) -> None:
        m = METRICS[name]  # KeyError: declare the metric in METRICS first
        v = _value(value, nan_ok)
        if v is None:
            return
        lab = dict(self.base)
        if "node" in m.labels and self.node is not None:
            lab.update(node=self.node)
        lab.update({k: v for k, v in self.fixed.items() if k in m.labels})
        lab.update({k: str(x) for k, x in (labels or {}).items() if x is not None})
        extra = set(lab) - set(m.labels)
        if extra:
            raise ValueError(f"{name}: labels {sorted(extra)} are not declared in METRICS")
        self._families.setdefault(name, []).append((lab, v))

    def text(self) -> str:
        lines: list[str] = []
        for name, samples in self._families.items():
            m = METRICS[name]
            lines.append(f"# HELP {name} {_escape_help(m.help)}")
            lines.append(f"# TYPE {name} {m.type}")
            seen: set[tuple] = set()
            for labels, value in samples:
                key = tuple(sorted(labels.items()))
                if key in seen:  # a duplicate series makes the whole scrape invalid
                    continue
                seen.add(key)
                lab = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels.items())
                lines.append(f"{name}{{{lab}}} {format_value(value)}")
        return "\n".join(lines) + "\n" if lines else ""


def _command(d: Any) -> str:
    return str(d.command or d.kind or "llmdiag")


def _header(ex: Exposition, d: Any) -> None:
    ex.add("llmdiag_run_info", 1, {"run": run_id(d)})
    ex.add("llmdiag_report_status", D.STATUS_CODE.get(D.status_of(d.status)))
    ex.add("llmdiag_report_timestamp_seconds", getattr(d, "created_at", None) or getattr(d, "finished_at", None))


# ---------------------------------------------------------------- cluster


def cluster(d: D.ClusterDoc, opts: RenderOptions) -> str:
    ex = Exposition(_command(d))
    _header(ex, d)
    for r in d.results:
        labels = {"node": r.node, "probe": r.probe, "check": r.check}
        ex.add("llmdiag_check_status", D.STATUS_CODE.get(D.status_of(r.status)), labels)
        ex.add("llmdiag_check_duration_seconds", r.duration_s, labels)
    for node in d.node_names():
        if node in d.missing_nodes:
            ex.add("llmdiag_node_missing", 1, {"node": node})
            continue
        ex.add("llmdiag_node_missing", 0, {"node": node})
        for s in D.STATUS_CODE:
            ex.add("llmdiag_node_checks", sum(1 for r in d.results if r.node == node and r.status == s),
                   {"node": node, "status": s})
    ports = d.sections.port_matrix
    if isinstance(ports, D.PortMatrix) and ports.problems is not None:
        ex.add("llmdiag_port_connections_failed", len(ports.problems) if ports.failed is None else ports.failed)
    if isinstance(d.sections.consistency, list):
        ex.add("llmdiag_consistency_diffs", len(d.sections.consistency))
    return ex.text()


# ---------------------------------------------------------------- nccl-bench

_GB = 1e9


def _scaled(v: Any, k: float) -> float | None:
    n = D.number(v)
    return None if n is None else n * k


def nccl_bench(d: D.NcclBenchDoc, opts: RenderOptions) -> str:
    hosts = list(dict.fromkeys(d.world.hosts)) if d.world else []
    ex = Exposition(_command(d), node=hosts[0] if len(hosts) == 1 else None)
    _header(ex, d)
    if d.world:
        ex.add("llmdiag_nccl_world_size", d.world.world_size)
    for r in d.results:
        for placement in ("out_of_place", "in_place"):
            p = r.placement(placement)
            labels = {"collective": r.collective, "size_bytes": r.size, "placement": placement}
            ex.add("llmdiag_nccl_busbw_bytes_per_second", _scaled(p.busbw, _GB), labels)
            ex.add("llmdiag_nccl_algbw_bytes_per_second", _scaled(p.algbw, _GB), labels)
            ex.add("llmdiag_nccl_time_seconds", _scaled(p.time_us, 1e-6), labels)
            ex.add("llmdiag_nccl_wrong_elements", p.wrong, labels)
    for c in d.collectives:
        ex.add("llmdiag_nccl_plateau_busbw_bytes_per_second", _scaled(c.plateau_busbw, _GB), {"collective": c.collective})
        ex.add("llmdiag_nccl_avg_busbw_bytes_per_second", _scaled(c.avg_busbw, _GB), {"collective": c.collective})
    ex.add("llmdiag_nccl_expected_busbw_bytes_per_second", _scaled(d.expected_busbw, _GB))
    if d.pairwise:
        for lk in d.pairwise.links:
            ex.add("llmdiag_nccl_pair_busbw_bytes_per_second", _scaled(lk.gbps, _GB), {"a": lk.a, "b": lk.b})
    return ex.text()


# ---------------------------------------------------------------- log-analysis


def log_analysis(d: D.LogAnalysisDoc, opts: RenderOptions) -> str:
    ex = Exposition(_command(d), node=d.node, fixed={"log": log_label(d.files)})
    _header(ex, d)
    counts: dict[tuple[str, str], int] = {}
    for f in d.findings:
        counts[(f.kind, f.severity)] = counts.get((f.kind, f.severity), 0) + 1
    for (kind, sev), n in counts.items():
        ex.add("llmdiag_log_findings", n, {"kind": kind, "severity": sev})
    m = d.metrics
    ex.add("llmdiag_log_last_step", m.last_step)
    ex.add("llmdiag_log_loss_last", m.last_loss, nan_ok=True)
    ex.add("llmdiag_log_loss_min", m.loss_min)
    ex.add("llmdiag_log_learning_rate_last", m.lr_last)
    ex.add("llmdiag_log_grad_norm_last", m.grad_norm_last, nan_ok=True)
    ex.add("llmdiag_log_step_time_seconds", _scaled(m.iter_time_ms_typical, 1e-3))
    return ex.text()


# ---------------------------------------------------------------- estimate-memory


def memory_estimate(d: D.MemoryEstimateDoc, opts: RenderOptions) -> str:
    ex = Exposition(_command(d), fixed={"plan": _digest(d, ("model", "plan", "spec"))})
    _header(ex, d)
    for part, b in d.parts.items():
        ex.add("llmdiag_memory_estimate_bytes", b, {"component": part})
    ex.add("llmdiag_memory_estimate_total_bytes", d.total)
    ex.add("llmdiag_memory_gpu_bytes", d.gpu_memory)
    ex.add("llmdiag_memory_headroom_bytes", d.headroom)
    ex.add("llmdiag_memory_verdict", {Verdict.FITS: 0, Verdict.TIGHT: 2}.get(d.verdict, 3), {"verdict": d.verdict})
    return ex.text()


# ---------------------------------------------------------------- monitor

#: (sample key, metric, scale to base units)
_GPU = (
    ("utilization_gpu_pct", "llmdiag_gpu_utilization_ratio", 0.01),
    ("utilization_mem_pct", "llmdiag_gpu_memory_controller_utilization_ratio", 0.01),
    ("memory_used_bytes", "llmdiag_gpu_memory_used_bytes", 1),
    ("memory_total_bytes", "llmdiag_gpu_memory_total_bytes", 1),
    ("temperature_c", "llmdiag_gpu_temperature_celsius", 1),
    ("temperature_slowdown_c", "llmdiag_gpu_temperature_slowdown_celsius", 1),
    ("power_w", "llmdiag_gpu_power_watts", 1),
    ("power_limit_w", "llmdiag_gpu_power_limit_watts", 1),
    ("sm_clock_mhz", "llmdiag_gpu_sm_clock_hertz", 1e6),
    ("max_sm_clock_mhz", "llmdiag_gpu_sm_clock_max_hertz", 1e6),
    ("throttled", "llmdiag_gpu_throttled", 1),
    ("ecc_uncorrectable_volatile", "llmdiag_gpu_ecc_uncorrectable_errors_total", 1),
    ("ecc_corrected_volatile", "llmdiag_gpu_ecc_corrected_errors_total", 1),
    ("xid_count", "llmdiag_gpu_xid_events_total", 1),
)
#: (label, sample key) naming a GPU's series
_GPU_LABELS = (("gpu", "index"), ("uuid", "uuid"))
_HOST = (
    ("cpu_pct", "llmdiag_host_cpu_utilization_ratio", 0.01),
    ("load_1m", "llmdiag_host_load1", 1),
    ("mem_used_bytes", "llmdiag_host_memory_used_bytes", 1),
    ("mem_total_bytes", "llmdiag_host_memory_total_bytes", 1),
    ("mem_pct", "llmdiag_host_memory_used_ratio", 0.01),
    ("swap_used_bytes", "llmdiag_host_swap_used_bytes", 1),
    ("net_rx_bytes", "llmdiag_host_network_receive_bytes_total", 1),
    ("net_tx_bytes", "llmdiag_host_network_transmit_bytes_total", 1),
    ("net_errors", "llmdiag_host_network_errors_total", 1),
    ("disk_read_bytes", "llmdiag_host_disk_read_bytes_total", 1),
    ("disk_write_bytes", "llmdiag_host_disk_written_bytes_total", 1),
)


def monitor(d: D.MonitorDoc, opts: RenderOptions) -> str:
    ex = Exposition(_command(d), node=d.node)
    _header(ex, d)
    latest = d.latest or D.Sample()
    ex.add("llmdiag_monitor_samples_total", d.samples)
    ex.add("llmdiag_monitor_last_sample_timestamp_seconds", latest.time)
    ex.add("llmdiag_gpu_present", d.gpu_count or 0)
    for key, name, k in _HOST:
        ex.add(name, _scaled(latest.host.get(key), k))
    for g in latest.gpus:
        labels = {label: g.get(key) for label, key in _GPU_LABELS}
        for key, name, k in _GPU:
            ex.add(name, _scaled(g.get(key), k), labels)
    by_rule = dict(d.alerts_by_rule)  # complete counts; "alerts" may be truncated
    if not by_rule:
        for a in d.alerts:
            by_rule[a.rule] = by_rule.get(a.rule, 0) + 1
    for rule in d.rules or list(by_rule):
        ex.add("llmdiag_monitor_alerts_total", by_rule.get(rule, 0), {"rule": rule})
    for a in d.active_alerts:
        ex.add("llmdiag_monitor_alert_active", 1, {"rule": a.rule, "device": a.device or ""})
    return ex.text()


# ---------------------------------------------------------------- anything else


def generic(d: D.GenericDoc, opts: RenderOptions) -> str:
    ex = Exposition(_command(d))
    _header(ex, d)
    return ex.text()


# ---------------------------------------------------------------- the documentation


def markdown_table() -> str:
    """The metric list of docs/reports.md (between its ``metrics`` markers)."""
    lines = ["| metric | type | labels | meaning |", "|---|---|---|---|"]
    section = None
    for m in METRICS.values():
        if m.section != section:
            section = m.section
            lines.append(f"| **{section}** | | | |")
        labels = ", ".join(x for x in m.labels if x not in _BASE)
        lines.append(f"| `{m.name}` | {m.type} | {labels} | {m.help.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown_table())
