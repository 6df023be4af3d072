"""Prometheus text exposition format (0.0.4) for every document kind.

Written for node_exporter's textfile collector (``--collector.textfile.directory``) and for
``llmdiag monitor --prometheus-file`` / ``--port``. Every family has HELP and TYPE lines, label
values are escaped (backslash, double quote, newline), and a metric is left out rather than
written as a guess when the document lacks its value. Status codes everywhere: pass 0, skip 1,
warn 2, fail 3 (severity order, so ``llmdiag_check_status >= 3`` selects failures).
docs/reports.md lists every metric.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from llmdiag.reports import docview as dv
from llmdiag.reports.base import RenderOptions

_NAME_BAD = re.compile(r"[^a-zA-Z0-9_]")


def metric_name(text: str) -> str:
    name = _NAME_BAD.sub("_", str(text)).strip("_").lower()
    return name if name and not name[0].isdigit() else f"_{name}"


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


class Exposition:
    """Samples grouped by family, written in first-seen order with HELP/TYPE once each."""

    def __init__(self) -> None:
        self._families: dict[str, tuple[str, str, list[tuple[dict[str, Any], float]]]] = {}

    def add(self, name: str, help: str, value: Any, labels: Mapping[str, Any] | None = None,
            type: str = "gauge") -> None:
        v = dv.number(value)
        if v is None:
            return
        fam = self._families.setdefault(name, (help, type, []))
        fam[2].append(({k: x for k, x in (labels or {}).items() if x is not None}, v))

    def text(self) -> str:
        lines: list[str] = []
        for name, (help, type_, samples) in self._families.items():
            lines.append(f"# HELP {name} {_escape_help(help)}")
            lines.append(f"# TYPE {name} {type_}")
            seen: set[tuple] = set()
            for labels, value in samples:
                key = tuple(sorted((k, str(v)) for k, v in labels.items()))
                if key in seen:  # a duplicate series makes the whole scrape invalid
                    continue
                seen.add(key)
                lab = ",".join(f'{metric_name(k)}="{escape_label(v)}"' for k, v in labels.items())
                lines.append(f"{name}{{{lab}}} {format_value(value)}" if lab else f"{name} {format_value(value)}")
        return "\n".join(lines) + "\n" if lines else ""


def _header(ex: Exposition, doc: Mapping[str, Any]) -> None:
    labels = {"command": doc.get("command", "?"), "kind": doc.get("kind", "?")}
    ex.add("llmdiag_report_status", "Overall status of the report: pass 0, skip 1, warn 2, fail 3.",
           dv.STATUS_CODE.get(dv.status_of(doc.get("status"))), labels)
    created = doc.get("created_at") or doc.get("finished_at")
    ex.add("llmdiag_report_timestamp_seconds", "When the report was produced (Unix time).", created, labels)


# ---------------------------------------------------------------- cluster


def _cluster_metrics(ex: Exposition, doc: Mapping[str, Any]) -> None:
    nodes, checks, cells = dv.matrix(doc)
    for r in dv.results(doc):
        labels = {"node": r.get("node"), "probe": r.get("probe"), "check": r.get("check")}
        ex.add("llmdiag_check_status", "Status of one check on one node: pass 0, skip 1, warn 2, fail 3.",
               dv.STATUS_CODE.get(dv.status_of(r.get("status"))), labels)
        for ev in r.get("evidence") or ():
            if not isinstance(ev, Mapping):
                continue
            ex.add("llmdiag_check_evidence",
                   "Numeric evidence of a check (observed value; unit in the label), e.g. free GPU memory, clock skew.",
                   dv.finite(ev.get("observed")),
                   dict(labels, name=ev.get("name"), unit=ev.get("unit") or ""))
        if r.get("duration_s") is not None:
            ex.add("llmdiag_check_duration_seconds", "How long the check's probe took.", r.get("duration_s"), labels)
    for node in nodes:
        counts = {s: 0 for s in dv.STATUSES}
        for (n, _), rs in cells.items():
            if n == node:
                for r in rs:
                    counts[dv.status_of(r.get("status"))] += 1
        for s, c in counts.items():
            ex.add("llmdiag_node_checks", "Number of checks per node and status.", c, {"node": node, "status": s})
    for node in dv.node_names(doc):
        ex.add("llmdiag_node_missing", "1 when an expected node never reported.",
               1 if node in dv.missing_nodes(doc) else 0, {"node": node})
    secs = doc.get("sections") or {}
    _port_metrics(ex, secs.get("port_matrix"))
    if isinstance(secs.get("nccl_bench"), Mapping):
        _bench_metrics(ex, secs["nccl_bench"])
    if isinstance(secs.get("memory"), Mapping):
        _memory_metrics(ex, secs["memory"])
    consistency = secs.get("consistency")
    if isinstance(consistency, list):
        ex.add("llmdiag_consistency_diffs", "Facts that differ between nodes.", len(consistency))


def _port_metrics(ex: Exposition, sec: Any) -> None:
    if not sec:
        return
    srcs, dsts, cells = dv.port_matrix(sec)
    for (src, dst), cell in cells.items():
        state, _ = dv.port_cell_state(cell)
        if state == "self":
            continue
        ex.add("llmdiag_port_reachable", "1 when src reached dst on the job's ports, 0 when not.",
               1 if state == "ok" else 0, {"src": src, "dst": dst, "state": state})


def cluster(doc: Mapping[str, Any], opts: RenderOptions) -> str:
    ex = Exposition()
    _header(ex, doc)
    _cluster_metrics(ex, doc)
    return ex.text()


# ---------------------------------------------------------------- nccl-bench


def _bench_metrics(ex: Exposition, doc: Mapping[str, Any]) -> None:
    rows = dv.bench_rows(doc)
    for row in rows:
        for placement in dv.PLACEMENTS:
            vals = row[placement]
            labels = {"collective": row["collective"], "size_bytes": row["size_bytes"], "placement": placement}
            ex.add("llmdiag_nccl_busbw_gbps", "Bus bandwidth per collective, message size and placement (GB/s).",
                   vals.get("busbw"), labels)
            ex.add("llmdiag_nccl_algbw_gbps", "Algorithm bandwidth (GB/s).", vals.get("algbw"), labels)
            ex.add("llmdiag_nccl_time_microseconds", "Mean time of one operation (us).", vals.get("time_us"), labels)
            ex.add("llmdiag_nccl_wrong", "Elements with wrong results (data check).", vals.get("wrong"), labels)
    cols = dict.fromkeys(r["collective"] for r in rows)
    for c, v in dv.per_collective(doc.get("plateau_busbw"), cols).items():
        ex.add("llmdiag_nccl_plateau_busbw_gbps", "Bus bandwidth plateau at large sizes (GB/s): compare with hardware.",
               v, {"collective": c})
    for c, v in dv.per_collective(doc.get("avg_busbw"), cols).items():
        ex.add("llmdiag_nccl_avg_busbw_gbps", "Mean bus bandwidth over all rows, as nccl-tests prints it (GB/s).",
               v, {"collective": c})
    for p in dv.pairs(doc):
        ex.add("llmdiag_nccl_pair_busbw_gbps", "Bus bandwidth between two nodes in the pairwise test (GB/s).",
               p["busbw"], {"a": p["a"], "b": p["b"]})


def nccl_bench(doc: Mapping[str, Any], opts: RenderOptions) -> str:
    ex = Exposition()
    _header(ex, doc)
    _bench_metrics(ex, doc)
    return ex.text()


# ---------------------------------------------------------------- log-analysis


def log_analysis(doc: Mapping[str, Any], opts: RenderOptions) -> str:
    ex = Exposition()
    _header(ex, doc)
    counts: dict[tuple[str, str], int] = {}
    for f in dv.findings(doc):
        key = (str(f.get("kind", "?")), str(f.get("severity", "?")))
        counts[key] = counts.get(key, 0) + 1
    for (kind, sev), n in counts.items():
        ex.add("llmdiag_log_findings", "Findings in the analysed log, by kind and severity.", n,
               {"kind": kind, "severity": sev})
    ex.add("llmdiag_log_findings_all", "All findings in the analysed log.", len(dv.findings(doc)))
    for key, value in (doc.get("metrics") or {}).items():
        if dv.number(value) is not None:
            ex.add(f"llmdiag_log_{metric_name(key)}", f"Log metric {key} (from analyze-log).", value)
    return ex.text()


# ---------------------------------------------------------------- memory-estimate


def _memory_metrics(ex: Exposition, doc: Mapping[str, Any]) -> None:
    for part, b in dv.breakdown(doc).items():
        ex.add("llmdiag_memory_estimate_bytes", "Predicted per-GPU memory by component (bytes).", b, {"component": part})
    ex.add("llmdiag_memory_estimate_total_bytes", "Predicted per-GPU peak memory (bytes).", dv.breakdown_total(doc))
    ex.add("llmdiag_memory_gpu_bytes", "Memory of the GPU the plan is checked against (bytes).", dv.gpu_memory_bytes(doc))
    word, _ = dv.verdict(doc)
    ex.add("llmdiag_memory_verdict", "Verdict of the estimate as a status code: pass 0 (fits), warn 2 (tight), fail 3.",
           dv.STATUS_CODE[dv.verdict_status(doc)], {"verdict": word})


def memory_estimate(doc: Mapping[str, Any], opts: RenderOptions) -> str:
    ex = Exposition()
    _header(ex, doc)
    _memory_metrics(ex, doc)
    return ex.text()


# ---------------------------------------------------------------- monitor

_GPU_GAUGES = (
    ("utilization_gpu_pct", "llmdiag_gpu_utilization_percent", "GPU utilisation (%)."),
    ("utilization_mem_pct", "llmdiag_gpu_memory_utilization_percent", "GPU memory-controller utilisation (%)."),
    ("memory_used_bytes", "llmdiag_gpu_memory_used_bytes", "GPU memory in use (bytes)."),
    ("memory_total_bytes", "llmdiag_gpu_memory_total_bytes", "GPU memory size (bytes)."),
    ("memory_free_bytes", "llmdiag_gpu_memory_free_bytes", "Free GPU memory (bytes)."),
    ("temperature_c", "llmdiag_gpu_temperature_celsius", "GPU temperature (degrees C)."),
    ("temperature_slowdown_c", "llmdiag_gpu_temperature_slowdown_celsius", "Temperature at which the GPU slows down."),
    ("power_w", "llmdiag_gpu_power_watts", "GPU power draw (W)."),
    ("power_limit_w", "llmdiag_gpu_power_limit_watts", "GPU power limit (W)."),
    ("sm_clock_mhz", "llmdiag_gpu_sm_clock_mhz", "SM clock (MHz)."),
    ("max_sm_clock_mhz", "llmdiag_gpu_sm_clock_max_mhz", "Maximum SM clock (MHz)."),
    ("ecc_uncorrectable_volatile", "llmdiag_gpu_ecc_uncorrectable_volatile", "Uncorrectable ECC errors since driver load."),
    ("ecc_corrected_volatile", "llmdiag_gpu_ecc_corrected_volatile", "Corrected ECC errors since driver load."),
    ("xid_count", "llmdiag_gpu_xid_events", "Xid events seen since the monitor started."),
    ("throttled", "llmdiag_gpu_throttled", "1 when the GPU reports a throttle reason that slows work."),
)
_HOST_GAUGES = (
    ("cpu_pct", "llmdiag_host_cpu_percent", "Host CPU utilisation (%)."),
    ("load_1m", "llmdiag_host_load1", "Host 1-minute load average."),
    ("mem_used_bytes", "llmdiag_host_memory_used_bytes", "Host memory in use (bytes)."),
    ("mem_total_bytes", "llmdiag_host_memory_total_bytes", "Host memory size (bytes)."),
    ("mem_pct", "llmdiag_host_memory_percent", "Host memory in use (%)."),
    ("swap_used_bytes", "llmdiag_host_swap_used_bytes", "Swap in use (bytes)."),
    ("net_rx_bytes", "llmdiag_host_network_receive_bytes", "Bytes received on all interfaces since boot."),
    ("net_tx_bytes", "llmdiag_host_network_transmit_bytes", "Bytes sent on all interfaces since boot."),
    ("net_rx_bps", "llmdiag_host_network_receive_bytes_per_second", "Receive rate over the last interval."),
    ("net_tx_bps", "llmdiag_host_network_transmit_bytes_per_second", "Transmit rate over the last interval."),
    ("net_errors", "llmdiag_host_network_errors", "Interface errors and drops since boot."),
    ("disk_read_bytes", "llmdiag_host_disk_read_bytes", "Bytes read from disks since boot."),
    ("disk_write_bytes", "llmdiag_host_disk_write_bytes", "Bytes written to disks since boot."),
)


def monitor(doc: Mapping[str, Any], opts: RenderOptions) -> str:
    ex = Exposition()
    _header(ex, doc)
    node = doc.get("node")
    latest = doc.get("latest") or {}
    ex.add("llmdiag_monitor_samples_total", "Samples taken since the monitor started.", doc.get("samples"), {"node": node},
           type="counter")
    ex.add("llmdiag_monitor_last_sample_timestamp_seconds", "Time of the latest sample (Unix time).",
           latest.get("time"), {"node": node})
    ex.add("llmdiag_gpu_present", "Number of GPUs the monitor samples (0: GPUs absent).", doc.get("gpu_count", 0),
           {"node": node})
    host = latest.get("host") or {}
    for key, name, help in _HOST_GAUGES:
        ex.add(name, help, host.get(key), {"node": node})
    for g in latest.get("gpus") or ():
        labels = {"node": node, "gpu": g.get("index"), "uuid": g.get("uuid")}
        for key, name, help in _GPU_GAUGES:
            ex.add(name, help, g.get(key), labels)
    by_rule: dict[str, int] = {}
    if isinstance(doc.get("alerts_by_rule"), Mapping):  # complete counts; "alerts" may be truncated
        by_rule = {str(k): v for k, v in doc["alerts_by_rule"].items()}
    else:
        for a in doc.get("alerts") or ():
            by_rule[str(a.get("rule"))] = by_rule.get(str(a.get("rule")), 0) + 1
    for rule in doc.get("rules") or by_rule:
        ex.add("llmdiag_monitor_alerts_total", "Alerts fired since the monitor started, by rule.", by_rule.get(rule, 0),
               {"node": node, "rule": rule}, type="counter")
    for a in doc.get("active_alerts") or ():
        ex.add("llmdiag_monitor_alert_active", "1 while an alert condition holds.", 1,
               {"node": node, "rule": a.get("rule"), "device": a.get("device")})
    return ex.text()


# ---------------------------------------------------------------- anything else


def generic(doc: Mapping[str, Any], opts: RenderOptions) -> str:
    ex = Exposition()
    _header(ex, doc)
    return ex.text()
