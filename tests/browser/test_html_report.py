"""The HTML report of every real document in headless Chromium: loads cleanly and offline,
runs no script, and shows the document's key numbers."""

from __future__ import annotations

import http.server
import threading

import pytest

from llmdiag.reports.base import render
from tests.browser import headless
from tests.reports import realdocs

ok, why = headless.available()
pytestmark = pytest.mark.skipif(not ok, reason=why)

CHECKS = {
    "scripts": "document.scripts.length",
    "charts": "document.querySelectorAll('svg.chart').length",
    "banner": "document.querySelector('.banner').textContent",
    "text": "document.body.innerText",
    # nothing wider than the window at 800 px but the tables that scroll on purpose
    "overflow": "document.documentElement.scrollWidth - document.documentElement.clientWidth",
}


def key_numbers(name: str, doc: dict) -> list[str]:
    """Strings the page must show for this document (from the document, not hard-coded)."""
    if name == "nccl-bench":
        return [f"on {doc['world']['world_size']} rank(s)"] + [f"{c['plateau_busbw']:.4g}" for c in doc["collectives"]] \
            + [f"{c['avg_busbw']:.4g}" for c in doc["collectives"]]
    if name.startswith("analyze-log"):
        return [f"{f['file']}:{f['line']}" if f.get("line") else f["kind"] for f in doc["findings"]]
    if name.startswith("estimate-memory"):
        return [f"{doc['breakdown']['total'] / 2**30:.2f} GiB", f"{doc['gpu_memory'] / 2**30:.2f} GiB"]
    if name == "monitor":
        return [a["rule"] for a in doc["alerts"]] + [f"gpu{g['index']}" for g in doc["latest"]["gpus"]]
    return [str(doc["counts"][s]) + " " + s for s in ("fail", "warn", "pass")] + list(doc["missing_nodes"])


def params():
    return [pytest.param(n, marks=pytest.mark.distributed) if n in realdocs.DISTRIBUTED else n for n in realdocs.NAMES]


@pytest.mark.parametrize("name", params())
def test_real_report_in_chromium(tmp_path, name):
    doc = realdocs.doc(name)
    page = tmp_path / f"{name}.html"
    page.write_text(render(doc, "html"), encoding="utf-8")
    res = headless.load(page, CHECKS, width=800)
    assert res.errors == [] and res.requests == []
    assert res.values["scripts"] == 0
    assert doc["status"].upper() in res.values["banner"]
    for s in key_numbers(name, doc):
        assert s in res.values["text"], s
    if name in ("nccl-bench", "analyze-log", "monitor"):
        assert res.values["charts"] >= 1
    assert res.values["overflow"] <= 0, "the page is wider than an 800 px window"


def test_log_text_is_escaped_not_executed(tmp_path):
    doc = realdocs.doc("analyze-log")
    doc["findings"][0]["message"] = "<script>console.error('ran')</script><img src=x onerror=alert(1)>"
    page = tmp_path / "log.html"
    page.write_text(render(doc, "html"), encoding="utf-8")
    res = headless.load(page, {"shown": "document.body.innerText.includes(\"<script>console.error('ran')\")"})
    assert res.values["shown"] is True and res.errors == [] and res.requests == []


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
