"""docs/reports.md lists every Prometheus metric the renderers write (it says it does)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from llmdiag.reports.base import render
from tests.unit.monitor.util import make_monitor

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "tests" / "fixtures" / "docs"


@pytest.mark.parametrize("kind", ["cluster", "nccl-bench", "log-analysis", "memory-estimate", "monitor"])
def test_every_metric_is_documented(kind):
    doc = (make_monitor("timeline-h100-faults").run(count=2) if kind == "monitor"
           else json.loads((DOCS / f"{kind}.json").read_text()))
    guide = (ROOT / "docs" / "reports.md").read_text()
    missing = []
    for fam in text_string_to_metric_families(render(doc, "prometheus")):
        if kind == "log-analysis" and fam.name.startswith("llmdiag_log_") and "findings" not in fam.name:
            continue  # llmdiag_log_<metric>: one per numeric entry of the report's metrics
        names = {f"`{fam.name}`", f"`{fam.name}_total`"}
        if not any(n in guide for n in names):
            missing.append(fam.name)
    assert not missing, f"add to docs/reports.md: {missing}"
