"""The HTML report in a real headless Chromium: loads cleanly, offline, and shows the failing node."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path

import pytest

from llmdiag.reports.base import render
from tests.browser import headless

DOCS = Path(__file__).resolve().parent.parent / "fixtures" / "docs"
ARTIFACTS = Path(__file__).resolve().parent.parent.parent / "artifacts"

ok, why = headless.available()
pytestmark = pytest.mark.skipif(not ok, reason=why)


def write_report(kind: str, tmp_path: Path) -> Path:
    doc = json.loads((DOCS / f"{kind}.json").read_text())
    p = tmp_path / f"{kind}.html"
    p.write_text(render(doc, "html"), encoding="utf-8")
    return p


def test_cluster_report_loads_offline_and_shows_failing_node(tmp_path):
    page = write_report("cluster", tmp_path)
    res = headless.load(page, {
        "failing_rows": "[...document.querySelectorAll('#matrix tr[data-status=fail]')].map(r => r.dataset.node)",
        "fail_cell": "document.querySelector('#matrix td[data-node=\"node-2\"][data-check=\"ports/bind\"]').dataset.status",
        "cell_text": "document.querySelector('#matrix td[data-node=\"node-2\"][data-check=\"ports/bind\"] .pop').textContent",
        "banner": "document.querySelector('.banner').textContent",
        "heat_dropped": "document.querySelectorAll('#ports td.timeout').length",
        "runbooks": "document.querySelectorAll('details.runbook').length",
    }, screenshot=True)
    assert res.errors == [] and res.requests == []
    assert "node-2" in res.values["failing_rows"] and "node-4" in res.values["failing_rows"]
    assert "node-0" not in res.values["failing_rows"]
    assert res.values["fail_cell"] == "fail" and "kill 4242" in res.values["cell_text"]
    assert "FAIL" in res.values["banner"] and "node-2" in res.values["banner"]
    assert res.values["heat_dropped"] == 1 and res.values["runbooks"] >= 1
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "report-cluster.png").write_bytes(res.screenshot)
    assert res.screenshot[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("kind", ["nccl-bench", "log-analysis", "memory-estimate"])
def test_other_kinds_load_without_errors(tmp_path, kind):
    page = write_report(kind, tmp_path)
    res = headless.load(page, {"imgs": "[...document.images].map(i => i.complete && i.naturalWidth > 0)",
                               "scripts": "document.scripts.length"})
    assert res.errors == [] and res.requests == []
    assert all(res.values["imgs"]) and res.values["scripts"] == 0
    if kind != "memory-estimate":
        assert len(res.values["imgs"]) >= 1  # the plots rendered


def test_log_text_is_escaped_not_executed(tmp_path):
    page = write_report("log-analysis", tmp_path)
    res = headless.load(page, {"pre": "[...document.querySelectorAll('pre')].some(p => p.textContent.includes('<script>alert(1)</script>'))"})
    assert res.values["pre"] is True and res.errors == []


class _Hits(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self):  # noqa: N802
        _Hits.hits.append(self.path)
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_the_checker_detects_js_errors_and_network_requests(tmp_path):
    """Proof that the checks above can fail: a broken page must be caught."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hits)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        port = server.server_address[1]
        bad = tmp_path / "bad.html"
        bad.write_text(f'<html><body><img src="http://127.0.0.1:{port}/pixel.png">'
                       "<script>console.error('deliberate'); noSuchFunction();</script></body></html>")
        res = headless.load(bad)
    finally:
        server.shutdown()
        server.server_close()
    assert any("deliberate" in x for x in res.console_errors)
    assert any("noSuchFunction" in x for x in res.exceptions)
    assert f"http://127.0.0.1:{port}/pixel.png" in res.requests
    assert "/pixel.png" in _Hits.hits
