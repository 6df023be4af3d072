"""Prometheus and JUnit outputs of every kind, parsed back by real parsers."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from llmdiag.reports.base import render

DOCS = Path(__file__).resolve().parent.parent / "fixtures" / "docs"
KINDS = ["cluster", "nccl-bench", "log-analysis", "memory-estimate"]


def load(kind: str) -> dict:
    return json.loads((DOCS / f"{kind}.json").read_text())


def families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


@pytest.mark.parametrize("kind", KINDS)
def test_prometheus_parses_for_every_kind(kind):
    text = render(load(kind), "prometheus")
    fams = families(text)
    assert "llmdiag_report_status" in fams
    for name in fams:
        assert f"# HELP {name} " in text and f"# TYPE {name} " in text


def test_cluster_status_gauge_names_the_failing_node():
    fams = families(render(load("cluster"), "prometheus"))
    samples = {(s.labels["node"], s.labels["probe"], s.labels["check"]): s.value
               for s in fams["llmdiag_check_status"].samples}
    assert samples[("node-2", "ports", "bind")] == 3
    assert samples[("node-0", "ports", "bind")] == 0
    assert samples[("node-0", "gpu", "count")] == 1
    missing = {s.labels["node"]: s.value for s in fams["llmdiag_node_missing"].samples}
    assert missing["node-4"] == 1 and missing["node-0"] == 0
    skew = [s for s in fams["llmdiag_check_evidence"].samples if s.labels["name"] == "skew" and s.labels["node"] == "node-2"]
    assert skew[0].value == pytest.approx(0.8) and skew[0].labels["unit"] == "s"
    reach = {(s.labels["src"], s.labels["dst"]): s.value for s in fams["llmdiag_port_reachable"].samples}
    assert reach[("node-1", "node-2")] == 0 and reach[("node-0", "node-1")] == 1


def test_label_values_are_escaped():
    doc = load("cluster")
    doc["results"][0]["check"] = 'we"ird\\name\nx'
    fams = families(render(doc, "prometheus"))
    checks = {s.labels["check"] for s in fams["llmdiag_check_status"].samples}
    assert 'we"ird\\name\nx' in checks


def test_bench_and_memory_metrics():
    fams = families(render(load("nccl-bench"), "prometheus"))
    plateau = {s.labels["collective"]: s.value for s in fams["llmdiag_nccl_plateau_busbw_gbps"].samples}
    assert plateau == {"all_reduce": 11.8, "all_gather": 9.4}
    assert any(s.labels["placement"] == "in_place" for s in fams["llmdiag_nccl_busbw_gbps"].samples)
    fams = families(render(load("memory-estimate"), "prometheus"))
    assert fams["llmdiag_memory_estimate_total_bytes"].samples[0].value == pytest.approx(83 * 2**30)
    assert fams["llmdiag_memory_verdict"].samples[0].value == 3
    fams = families(render(load("log-analysis"), "prometheus"))
    by_kind = {s.labels["kind"]: s.value for s in fams["llmdiag_log_findings"].samples}
    assert by_kind == {"grad-spike": 1, "nan-loss": 1}


def test_missing_keys_are_tolerated():
    for kind in KINDS + ["monitor"]:
        doc = {"schema_version": "1.0", "command": "x", "kind": kind, "status": "pass"}
        families(render(doc, "prometheus"))
        ET.fromstring(render(doc, "junit"))


def test_unknown_kind_is_an_error_not_a_generic_fallback():
    doc = {"schema_version": "1.0", "command": "x", "kind": "cluster-typo", "status": "pass"}
    for fmt in ("prometheus", "junit", "terminal"):
        with pytest.raises(ValueError, match="cluster-typo"):
            render(doc, fmt)


def cases(xml: str) -> dict:
    root = ET.fromstring(xml)
    assert root.tag == "testsuites"
    out = {}
    for suite in root.findall("testsuite"):
        tcs = suite.findall("testcase")
        assert int(suite.get("tests")) == len(tcs)
        assert int(suite.get("failures")) == sum(1 for c in tcs if c.find("failure") is not None)
        for c in tcs:
            out[(suite.get("name"), c.get("classname"), c.get("name"))] = c
    return out


def test_junit_cluster_one_case_per_node_and_check():
    doc = load("cluster")
    cs = cases(render(doc, "junit"))
    node_results = [r for r in doc["results"] if r["scope"] == "node"]
    assert sum(1 for k in cs if k[0].startswith("node-") and k[0] != "node-4") == len(node_results)
    fail = cs[("node-2", "llmdiag.node-2.ports", "bind")]
    assert fail.find("failure").get("message").startswith("port 29500")
    assert "kill 4242" in fail.find("failure").text
    assert cs[("node-0", "llmdiag.node-0.gpu", "count")].find("skipped") is not None
    warn = cs[("node-2", "llmdiag.node-2.system", "clock")]
    assert warn.find("failure") is None and warn.find("properties/property").get("value") == "warn"
    assert cs[("node-4", "llmdiag.node-4", "reported")].find("failure") is not None
    doc["strict"] = True
    assert cases(render(doc, "junit"))[("node-2", "llmdiag.node-2.system", "clock")].find("failure") is not None


def test_junit_findings_are_cases_and_control_chars_survive():
    doc = load("log-analysis")
    doc["findings"][0]["message"] = "\x1b[31mred\x1b[0m \x00 end"
    cs = cases(render(doc, "junit"))
    assert len(cs) == 2
    failing = [c for c in cs.values() if c.find("failure") is not None]
    assert len(failing) == 1 and "<script>" in failing[0].find("failure").get("message")
