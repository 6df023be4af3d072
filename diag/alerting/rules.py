"""Prometheus alerting rules for llmdiag's metrics, declared once here and written by
``llmdiag alerting rules``.

Each rule names the runbook that explains it; the alert carries the runbook id, the command
that prints it and, with a base URL, a link. The expressions read only metrics llmdiag writes
(``reports/prometheus.py``: a test checks every name) and only identity labels (``node``,
``gpu``, ``log``, ``probe``, ``check``), so the alerts group and route by node. They are tested
with ``promtool test rules`` (tests/ops/test_alert_rules.py), one firing and one quiet case each.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

#: the name of the rule group in the file
GROUP = "llmdiag"
#: a monitor is silent after this long without a sample (3 x the default 5 s interval, and a scrape)
STALE_S = 60


@dataclasses.dataclass(frozen=True)
class Rule:
    alert: str
    expr: str
    severity: str  # critical (page) or warning (chat)
    runbook: str  # runbooks/<id>.md
    summary: str  # one line; Go templates over $labels only
    description: str
    for_: str = "0s"
    #: where the metric comes from, for the guide
    source: str = ""


def _rules(stale_s: int) -> tuple[Rule, ...]:
    return (
        Rule("LlmdiagLossNaN", 'llmdiag_log_findings{kind=~"nan_loss|nan_grad_norm"} > 0', "critical", "nan-loss",
             "NaN loss in {{ $labels.log }} on {{ $labels.node }}",
             "The training loss or gradient norm became NaN/Inf: every step from here on is wasted. "
             "Stop the job, resume from the last good checkpoint with a lower learning rate.",
             source="analyze-log --follow --prometheus-file"),
        Rule("LlmdiagLossSpike", 'llmdiag_log_findings{kind="loss_spike"} > 0', "warning", "loss-spike",
             "Loss spike in {{ $labels.log }} on {{ $labels.node }}",
             "The loss jumped well above its recent baseline; watch whether it recovers or diverges.",
             source="analyze-log --follow --prometheus-file"),
        Rule("LlmdiagGpuMemoryHigh", "llmdiag_gpu_memory_used_bytes / llmdiag_gpu_memory_total_bytes > 0.95",
             "warning", "cuda-oom", "GPU {{ $labels.gpu }} on {{ $labels.node }} above 95% memory",
             "GPU memory in use has stayed above 95% of the GPU: the next larger batch or sequence runs out of "
             "memory.", for_="2m", source="monitor"),
        Rule("LlmdiagGpuXid", "increase(llmdiag_gpu_xid_events_total[15m]) > 0", "critical", "ecc-xid",
             "Xid error on GPU {{ $labels.gpu }} of {{ $labels.node }}",
             "The driver reported a critical Xid event for this GPU: read dmesg on the node; drain it if the Xid "
             "repeats.", source="monitor"),
        Rule("LlmdiagGpuEccUncorrectable", "llmdiag_gpu_ecc_uncorrectable_errors_total > 0", "critical",
             "gpu-ecc-errors", "Uncorrectable ECC errors on GPU {{ $labels.gpu }} of {{ $labels.node }}",
             "The GPU has uncorrectable memory errors since the driver loaded: results on it cannot be trusted. "
             "Drain the node, reset the GPU, replace it if the errors come back.", source="monitor"),
        Rule("LlmdiagGpuThrottled", "llmdiag_gpu_throttled > 0", "warning", "gpu-throttling",
             "GPU {{ $labels.gpu }} on {{ $labels.node }} is throttled",
             "A hardware or thermal clock-event reason has held for 5 minutes: this GPU slows every collective "
             "of the job.", for_="5m", source="monitor"),
        Rule("LlmdiagGpuOverheating", "llmdiag_gpu_temperature_celsius >= llmdiag_gpu_temperature_slowdown_celsius",
             "critical", "gpu-temperature", "GPU {{ $labels.gpu }} on {{ $labels.node }} at its slowdown temperature",
             "The GPU reached the temperature at which it slows itself down: check the node's cooling.",
             for_="1m", source="monitor"),
        Rule("LlmdiagHostMemoryHigh", "llmdiag_host_memory_used_ratio > 0.95", "warning", "host-memory-low",
             "Host memory above 95% on {{ $labels.node }}",
             "The host is close to the OOM killer, which ends a training process without a Python traceback.",
             for_="5m", source="monitor"),
        Rule("LlmdiagNodeSilent",
             f"time() - llmdiag_monitor_last_sample_timestamp_seconds > {stale_s} or "
             "(max_over_time(llmdiag_monitor_last_sample_timestamp_seconds[1h]) "
             "unless llmdiag_monitor_last_sample_timestamp_seconds)",
             "critical", "node-silent", "{{ $labels.node }} stopped reporting",
             f"No monitor sample from this node for more than {stale_s} s, or its metrics are gone: the node, "
             "its monitor or node_exporter is down or hung.", for_="1m", source="monitor"),
        Rule("LlmdiagPreflightFailed", "llmdiag_check_status >= 3", "critical", "preflight-failed",
             "Preflight check {{ $labels.probe }}/{{ $labels.check }} failed on {{ $labels.node }}",
             "A preflight check failed: `llmdiag preflight --probe {{ $labels.probe }}` on the node names the "
             "cause, the fix and the check's own runbook.", source="preflight"),
        Rule("LlmdiagNodeMissing", "llmdiag_node_missing > 0", "critical", "cluster-node-missing",
             "{{ $labels.node }} never joined the cluster preflight",
             "An expected node never reported to the preflight rendezvous.", source="preflight (cluster)"),
        Rule("LlmdiagBusbwBelowExpected",
             "llmdiag_nccl_plateau_busbw_bytes_per_second < ignoring(collective) group_left() "
             "llmdiag_nccl_expected_busbw_bytes_per_second",
             "warning", "nccl-low-bandwidth", "{{ $labels.collective }} bus bandwidth below the expected on "
             "{{ $labels.node }}",
             "The plateau bus bandwidth of the last nccl-bench is below --expect-busbw: a slow link, NIC or "
             "GPUDirect path.", source="nccl-bench --expect-busbw"),
    )


#: the rules with the default settings (names and runbooks do not depend on the settings)
RULES: tuple[Rule, ...] = _rules(STALE_S)


def annotations(rule: Rule, runbook_url: str | None = None) -> dict[str, str]:
    out = {"summary": rule.summary, "description": rule.description, "runbook": rule.runbook,
           "runbook_command": f"llmdiag runbook {rule.runbook}"}
    if runbook_url:
        out["runbook_url"] = f"{runbook_url.rstrip('/')}/{rule.runbook}.md"
    return out


def rules_document(*, runbook_url: str | None = None, stale_s: int = STALE_S,
                   extra_labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The rule file as a mapping (Prometheus' ``groups:`` format)."""
    rules = []
    for r in _rules(stale_s):
        entry: dict[str, Any] = {"alert": r.alert, "expr": r.expr}
        if r.for_ != "0s":
            entry["for"] = r.for_
        entry["labels"] = {"severity": r.severity, **dict(extra_labels or {})}
        entry["annotations"] = annotations(r, runbook_url)
        rules.append(entry)
    return {"groups": [{"name": GROUP, "rules": rules}]}


def rules_yaml(**kw: Any) -> str:
    import yaml

    head = "# Prometheus alerting rules for llmdiag's metrics (written by `llmdiag alerting rules`).\n"
    return head + yaml.safe_dump(rules_document(**kw), sort_keys=False, width=100, allow_unicode=True)
