"""A Grafana dashboard for llmdiag's metrics, written by ``llmdiag alerting dashboard``.

One row per source (training log, GPUs, host, preflight, NCCL), a ``node`` variable from
``llmdiag_report_status``, and the data source picked at import. Every panel's query reads
metrics llmdiag writes; the end-to-end test runs each one against a real Prometheus fed by
the real commands and requires data (tests/ops/test_alerting_e2e.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any

UID = "llmdiag"
DS = {"type": "prometheus", "uid": "${datasource}"}
N = 'node=~"$node"'


@dataclasses.dataclass(frozen=True)
class Panel:
    title: str
    targets: tuple[tuple[str, str], ...]  # (PromQL, legend)
    unit: str = "short"
    kind: str = "timeseries"  # or stat, table
    width: int = 12
    description: str = ""


ROWS: tuple[tuple[str, tuple[Panel, ...]], ...] = (
    ("Training (analyze-log --follow)", (
        Panel("Loss (last)", ((f"llmdiag_log_loss_last{{{N}}}", "{{node}} {{log}}"),),
              description="NaN shows as a gap; the LlmdiagLossNaN alert fires on it."),
        Panel("Step", ((f"llmdiag_log_last_step{{{N}}}", "{{node}} {{log}}"),)),
        Panel("Findings in the log", ((f"llmdiag_log_findings{{{N}}}", "{{kind}} {{node}}"),), kind="table"),
        Panel("Typical step time", ((f"llmdiag_log_step_time_seconds{{{N}}}", "{{node}} {{log}}"),), unit="s"),
    )),
    ("GPUs (monitor)", (
        Panel("GPU memory used", ((f"llmdiag_gpu_memory_used_bytes{{{N}}} / llmdiag_gpu_memory_total_bytes{{{N}}}",
                                   "{{node}} gpu{{gpu}}"),), unit="percentunit",
              description="Alert LlmdiagGpuMemoryHigh above 95% for 2 minutes."),
        Panel("GPU utilisation", ((f"llmdiag_gpu_utilization_ratio{{{N}}}", "{{node}} gpu{{gpu}}"),),
              unit="percentunit"),
        Panel("GPU temperature and slowdown temperature",
              ((f"llmdiag_gpu_temperature_celsius{{{N}}}", "{{node}} gpu{{gpu}}"),
               (f"max by (node) (llmdiag_gpu_temperature_slowdown_celsius{{{N}}})", "{{node}} slowdown")),
              unit="celsius"),
        Panel("GPU power / limit", ((f"llmdiag_gpu_power_watts{{{N}}} / llmdiag_gpu_power_limit_watts{{{N}}}",
                                     "{{node}} gpu{{gpu}}"),), unit="percentunit"),
        Panel("Throttled GPUs", ((f"sum by (node) (llmdiag_gpu_throttled{{{N}}})", "{{node}}"),)),
        Panel("Uncorrectable ECC errors and Xid events",
              ((f"llmdiag_gpu_ecc_uncorrectable_errors_total{{{N}}}", "{{node}} gpu{{gpu}} ECC"),
               (f"llmdiag_gpu_xid_events_total{{{N}}}", "{{node}} gpu{{gpu}} Xid"))),
    )),
    ("Host (monitor)", (
        Panel("Seconds since the last sample", ((f"time() - llmdiag_monitor_last_sample_timestamp_seconds{{{N}}}",
                                                 "{{node}}"),), unit="s",
              description="LlmdiagNodeSilent fires above 60 s, or when the metrics of a node are gone."),
        Panel("Host memory used", ((f"llmdiag_host_memory_used_ratio{{{N}}}", "{{node}}"),), unit="percentunit"),
        Panel("Host CPU", ((f"llmdiag_host_cpu_utilization_ratio{{{N}}}", "{{node}}"),), unit="percentunit"),
        Panel("Monitor alerts (by rule)", ((f"sum by (node, rule) (llmdiag_monitor_alerts_total{{{N}}})",
                                            "{{node}} {{rule}}"),)),
    )),
    ("Preflight", (
        Panel("Checks per node and status", ((f"llmdiag_node_checks{{{N}}}", "{{node}} {{status}}"),),
              kind="table"),
        Panel("Check status (0 pass, 1 skip, 2 warn, 3 fail)",
              ((f"llmdiag_check_status{{{N}}}", "{{node}} {{probe}}/{{check}}"),), kind="table", width=24),
    )),
    ("NCCL (nccl-bench)", (
        Panel("Plateau bus bandwidth and the expected",
              (("llmdiag_nccl_plateau_busbw_bytes_per_second", "{{collective}} {{node}}"),
               ("llmdiag_nccl_expected_busbw_bytes_per_second", "expected {{node}}")), unit="Bps", kind="stat"),
        Panel("Bus bandwidth by message size", (("llmdiag_nccl_busbw_bytes_per_second{placement=\"out_of_place\"}",
                                                 "{{collective}} {{size_bytes}} B"),), unit="Bps"),
    )),
)


def panels() -> list[Panel]:
    return [p for _, row in ROWS for p in row]


def dashboard(title: str = "llmdiag") -> dict[str, Any]:
    """The dashboard JSON (Grafana's import format)."""
    out: list[dict[str, Any]] = []
    y, pid = 0, 1
    for row_title, row in ROWS:
        out.append({"id": pid, "type": "row", "title": row_title, "collapsed": False,
                    "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        pid, y, x = pid + 1, y + 1, 0
        for p in row:
            if x + p.width > 24:
                x, y = 0, y + 8
            out.append({
                "id": pid, "type": p.kind, "title": p.title, "description": p.description, "datasource": DS,
                "gridPos": {"h": 8, "w": p.width, "x": x, "y": y},
                "fieldConfig": {"defaults": {"unit": p.unit}, "overrides": []},
                "options": {},
                "targets": [{"datasource": DS, "expr": expr, "legendFormat": legend, "refId": chr(ord("A") + i),
                             **({"instant": True, "format": "table"} if p.kind == "table" else {})}
                            for i, (expr, legend) in enumerate(p.targets)],
            })
            pid, x = pid + 1, x + p.width
        y += 8
    return {
        "uid": UID, "title": title, "tags": ["llmdiag"], "timezone": "browser", "schemaVersion": 39, "version": 1,
        "editable": True, "refresh": "30s", "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus"},
            {"name": "node", "label": "node", "type": "query", "datasource": DS, "refresh": 2, "multi": True,
             "includeAll": True, "allValue": ".*", "definition": "label_values(llmdiag_report_status, node)",
             "query": {"query": "label_values(llmdiag_report_status, node)", "refId": "node"}},
        ]},
        "panels": out,
    }


def dashboard_json(title: str = "llmdiag") -> str:
    import json

    return json.dumps(dashboard(title), indent=2) + "\n"
