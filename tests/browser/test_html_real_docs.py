"""HTML reports of documents the real code produced (not hand-built fixtures), in headless
Chromium: the monitor's summary (recorded GPU faults, real host readings) and analyze-log's
report of a Megatron log (iterations, no step numbers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmdiag.reports.base import render
from tests.browser import headless
from tests.browser.test_html_report import ARTIFACTS
from tests.unit.monitor.util import make_monitor

FIX = Path(__file__).resolve().parent.parent / "fixtures"

ok, why = headless.available()
pytestmark = pytest.mark.skipif(not ok, reason=why)

CHECKS = {
    "imgs": "[...document.images].map(i => i.complete && i.naturalWidth > 0)",
    "scripts": "document.scripts.length",
    "banner": "document.querySelector('.banner').textContent",
    "findings": "[...document.querySelectorAll('.finding')].map(f => f.textContent)",
}


def test_monitor_report(tmp_path):
    doc = make_monitor("timeline-h100-faults", interval_s=0.02).run(count=6)
    page = tmp_path / "monitor.html"
    page.write_text(render(doc, "html"), encoding="utf-8")
    res = headless.load(page, CHECKS, screenshot=True)
    assert res.errors == [] and res.requests == []
    assert len(res.values["imgs"]) >= 4 and all(res.values["imgs"])  # GPU util, memory, temperature, host
    assert res.values["scripts"] == 0 and "FAIL" in res.values["banner"]
    text = " ".join(res.values["findings"])
    assert "gpu-xid" in text and "Xid 48" in text and "gpu-memory" in text
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "report-monitor.png").write_bytes(res.screenshot)


def test_analyze_log_report_of_a_megatron_log(tmp_path):
    from llmdiag.logs import analyze_paths

    doc = analyze_paths([str(FIX / "logs" / "failing" / "megatron_nan.log")])
    page = tmp_path / "log.html"
    page.write_text(render(doc, "html"), encoding="utf-8")
    res = headless.load(page, CHECKS)
    assert res.errors == [] and res.requests == []
    assert len(res.values["imgs"]) == 1 and all(res.values["imgs"])  # the loss curve, x = iteration
