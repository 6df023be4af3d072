"""Every kind × format, rendered from the real commands' documents and read back by the real
consumers: jsonschema with the shipped schema, prometheus_client's text and OpenMetrics parsers
and promtool, xmllint with Jenkins' junit-10 XSD and junitparser, an HTML parser."""

from __future__ import annotations

import html.parser
import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from prometheus_client.openmetrics.exposition import generate_latest as om_generate
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_parse
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from llmdiag import documents
from llmdiag.reports import prometheus
from llmdiag.reports.base import render
from tests.reports import realdocs

XSD = Path(__file__).resolve().parent / "data" / "junit-10.xsd"
SCHEMAS = Path(documents.__file__).resolve().parent / "schemas"


def _param(name: str):
    return pytest.param(name, marks=pytest.mark.distributed) if name in realdocs.DISTRIBUTED else name


ALL = [_param(n) for n in realdocs.NAMES]


# ---------------------------------------------------------------- JSON


@pytest.mark.parametrize("name", ALL)
def test_json_validates_against_the_shipped_schema(name):
    doc = realdocs.doc(name)
    schema = json.loads((SCHEMAS / f"{doc['kind']}.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]
    assert not errors, errors[:5]
    assert type(documents.read(doc)) is documents.KINDS[doc["kind"]]
    assert json.loads(render(doc, "json")) == doc  # the json format is the document itself


def test_schema_rejects_a_document_that_breaks_the_contract():
    doc = realdocs.doc("analyze-log")
    del doc["findings"][0]["message"]
    doc["status"] = "broken"
    errors = list(jsonschema.Draft202012Validator(documents.schema("log-analysis")).iter_errors(doc))
    assert {e.validator for e in errors} == {"required", "enum"}


def test_shipped_schemas_are_generated_from_the_types():
    docs_dir = Path(__file__).resolve().parents[2] / "docs" / "schemas"
    for kind in documents.KINDS:
        if kind == "generic":
            continue
        want = documents.schema_text(kind)
        for d in (SCHEMAS, docs_dir):
            assert (d / f"{kind}.json").read_text() == want, \
                f"regenerate: python -m llmdiag.documents llmdiag/schemas docs/schemas ({d / kind})"


# ---------------------------------------------------------------- Prometheus


def _families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def _openmetrics_roundtrip(text: str) -> list:
    fams = list(text_string_to_metric_families(text))

    class Parsed:
        def collect(self):
            return fams

    reg = CollectorRegistry()
    reg.register(Parsed())
    return list(om_parse(om_generate(reg).decode()))


@pytest.mark.parametrize("name", ALL)
def test_prometheus_passes_both_parsers_and_promtool(name):
    doc = realdocs.doc(name)
    text = render(doc, "prometheus")
    fams = _families(text)
    assert len(_openmetrics_roundtrip(text)) == len(fams)
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            metric, typ = line.split()[2:4]
            assert metric in prometheus.METRICS and prometheus.METRICS[metric].type == typ
            assert typ != "counter" or metric.endswith("_total")
    for fam in fams.values():
        for s in fam.samples:
            # stable identities only: Prometheus' own target labels are never written, and
            # the run id is on the info metric alone
            assert s.labels["command"] == doc["command"] and not {"job", "instance", "exported_job"} & set(s.labels)
            assert ("run" in s.labels) == (fam.name == "llmdiag_run_info")
    (info,) = fams["llmdiag_run_info"].samples
    assert info.value == 1 and re.fullmatch(r"[0-9a-f]{8}", info.labels["run"])
    assert fams["llmdiag_report_status"].samples[0].value == documents.STATUS_CODE[doc["status"]]
    if shutil.which("promtool"):
        proc = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_two_runs_share_a_textfile_directory():
    """Two analyze-log runs of different logs: the same families, no duplicate series."""
    a = render(realdocs.doc("analyze-log"), "prometheus")
    b = render(realdocs.doc("analyze-log-throughput"), "prometheus")
    seen = set()
    for text in (a, b):
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                key = (s.name, tuple(sorted(s.labels.items())))
                assert key not in seen
                seen.add(key)


@pytest.mark.distributed
def test_prometheus_nccl_bench_in_base_units():
    doc = realdocs.doc("nccl-bench")
    fams = _families(render(doc, "prometheus"))
    plateau = {s.labels["collective"]: s.value for s in fams["llmdiag_nccl_plateau_busbw_bytes_per_second"].samples}
    for c in doc["collectives"]:
        assert plateau[c["collective"]] == pytest.approx(c["plateau_busbw"] * 1e9)
    assert fams["llmdiag_nccl_world_size"].samples[0].value == doc["world"]["world_size"] == 2
    sizes = {s.labels["size_bytes"] for s in fams["llmdiag_nccl_busbw_bytes_per_second"].samples}
    assert sizes == {str(r["size"]) for r in doc["results"]}


def test_prometheus_monitor_ratios_and_counters():
    doc = realdocs.doc("monitor")
    fams = _families(render(doc, "prometheus"))
    util = [s.value for s in fams["llmdiag_gpu_utilization_ratio"].samples]
    assert util and all(0 <= v <= 1 for v in util)
    assert fams["llmdiag_monitor_samples"].type == "counter"
    assert fams["llmdiag_monitor_samples"].samples[0].value == doc["samples"]
    alerts = {s.labels["rule"]: s.value for s in fams["llmdiag_monitor_alerts"].samples}
    assert alerts == {r: doc["alerts_by_rule"].get(r, 0) for r in doc["rules"]}


def test_metric_list_in_docs_is_generated_from_the_table():
    guide = (Path(__file__).resolve().parents[2] / "docs" / "reports.md").read_text()
    begin, end = "<!-- metrics:begin (python -m llmdiag.reports.prometheus) -->\n", "<!-- metrics:end -->"
    assert begin in guide and end in guide
    assert guide.split(begin)[1].split(end)[0] == prometheus.markdown_table(), \
        "regenerate the list in docs/reports.md: python -m llmdiag.reports.prometheus"


def test_an_undeclared_metric_is_refused():
    ex = prometheus.Exposition({"command": "x"})
    with pytest.raises(KeyError):
        ex.add("llmdiag_made_up_percent", 1)
    with pytest.raises(ValueError, match="not declared"):
        ex.add("llmdiag_report_status", 1, {"kind": "cluster"})


# ---------------------------------------------------------------- JUnit


def _junit(doc: dict, tmp_path: Path) -> ET.Element:
    text = render(doc, "junit")
    path = tmp_path / "junit.xml"
    path.write_text(text, encoding="utf-8")
    if shutil.which("xmllint"):
        proc = subprocess.run(["xmllint", "--noout", "--schema", str(XSD), str(path)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    junitparser = pytest.importorskip("junitparser")
    xml = junitparser.JUnitXml.fromfile(str(path))
    cases = [c for suite in xml for c in suite]
    assert cases and xml.tests == len(cases)
    assert xml.failures == sum(1 for c in cases if any(isinstance(r, junitparser.Failure) for r in c.result))
    return ET.fromstring(text)


@pytest.mark.parametrize("name", ALL)
def test_junit_is_valid_with_stable_unique_names(name, tmp_path):
    doc = realdocs.doc(name)
    root = _junit(doc, tmp_path)
    assert root.get("skipped") is None and not root.findall(".//testcase/properties")
    names = [(c.get("classname"), c.get("name")) for c in root.iter("testcase")]
    assert len(names) == len(set(names)), "test names must be unique"
    assert not any(re.search(r"#\d", n) for _, n in names), "no ordinals in test names"
    for f in root.iter("failure"):
        assert f.get("message") and f.text
    assert (doc["status"] == "fail") == bool(root.findall(".//failure"))


def test_junit_preflight_names_say_probe_check_and_node(tmp_path):
    doc = realdocs.doc("merge")
    root = _junit(doc, tmp_path)
    names = {c.get("name") for c in root.iter("testcase")}
    for r in doc["results"]:
        if r.get("scope") == "node":
            label = r["probe"] if r["check"] == "probe" else f"{r['probe']}/{r['check']}"
            assert f"{label}[{r['node']}]" in names
    assert "cluster/reported[node rank 2]" in names


@pytest.mark.distributed
def test_junit_nccl_bench_missed_expectation_says_why_and_what_to_do(tmp_path):
    root = _junit(realdocs.doc("nccl-bench"), tmp_path)
    fails = {c.get("name"): c.find("failure") for c in root.iter("testcase") if c.find("failure") is not None}
    assert set(fails) == {"all_reduce/busbw", "all_to_all/busbw"}
    msg = fails["all_reduce/busbw"].get("message")
    assert "below" in msg and "expected 1000 GB/s" in msg and "Fix: " in msg
    names = {c.get("name") for c in root.iter("testcase")}
    assert {"all_reduce[1024 B]", "all_to_all[65536 B]", "all_reduce/correctness"} <= names


def test_junit_log_findings_one_case_per_kind_and_rank(tmp_path):
    doc = realdocs.doc("analyze-log")
    root = _junit(doc, tmp_path)
    fail = root.find(".//testcase[@name='nan_loss']/failure")
    assert "megatron_nan.log:31" in fail.get("message") and "Fix: " in fail.get("message")


# ---------------------------------------------------------------- HTML


class _Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.refs: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.refs += [v for k, v in attrs if k in ("src", "href") and v and not v.startswith(("#", "data:"))]

    def handle_data(self, data):
        self.text.append(data)


def _html(doc: dict) -> tuple[str, _Page]:
    text = render(doc, "html")
    p = _Page()
    p.feed(text)
    assert text.startswith("<!DOCTYPE html>") and "script" not in p.tags and p.refs == []
    assert "url(" not in text
    return " ".join(" ".join(p.text).split()), p


@pytest.mark.parametrize("name", ALL)
def test_html_is_self_contained_and_shows_the_status(name):
    doc = realdocs.doc(name)
    text, page = _html(doc)
    assert {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "skip": "SKIP"}[doc["status"]] in text
    assert "-  -" not in text


@pytest.mark.distributed
def test_html_nccl_bench_real_numbers():
    doc = realdocs.doc("nccl-bench")
    text, page = _html(doc)
    assert "nccl-bench on 2 rank(s)" in text
    for c in doc["collectives"]:
        assert f"{c['plateau_busbw']:.4g}" in text and f"{c['avg_busbw']:.4g}" in text
    assert "below" in text and "expected 1000 GB/s" in text and "Fix:" in text
    assert page.tags.count("svg") == len(doc["collectives"])
    # passed checks are not cards: only the two failed busbw checks are
    assert text.count("FAIL all_") == 2 and "WARN finding" not in text


def test_html_log_analysis_findings_first_with_file_and_line():
    doc = realdocs.doc("analyze-log")
    text, page = _html(doc)
    f = doc["findings"][0]
    assert f"{f['file']}:{f['line']}" in text
    assert text.index(f["message"]) < text.index("Training progress")
    assert page.tags.count("svg") >= 3  # loss, grad norm, step time / learning rate
    assert "num_lines_with_loss" not in text  # no internal counters


def test_html_memory_plan_bar_and_plans_that_fit():
    text, _ = _html(realdocs.doc("estimate-memory"))
    assert "Plan: llama2-7b · tp 2 · pp 1 · dp 4" in text and "80.00 GiB" in text
    pk = realdocs.doc("estimate-memory")["peak"]
    assert "Peak in" in text and pk["phase"] in text and f"{pk['allocated'] / 2**30:.2f} GiB allocated" in text
    doc = realdocs.doc("estimate-memory-oom")
    text, _ = _html(doc)
    assert "Plans that fit" in text and doc["suggestions"][0]["change"] in text and "short by" in text


def test_html_monitor_one_plot_per_gpu_and_alerts():
    doc = realdocs.doc("monitor")
    text, page = _html(doc)
    assert page.tags.count("svg") == doc["gpu_count"] + 1  # one per GPU, one for the host
    assert "gpu-xid" in text and "Xid 48" in text


def test_html_preflight_single_node_has_no_matrix_and_merge_has_one():
    _, page = _html(realdocs.doc("preflight"))
    assert "table" in page.tags and 'id="matrix"' not in render(realdocs.doc("preflight"), "html")
    merged = render(realdocs.doc("merge"), "html")
    assert 'id="matrix"' in merged and "node rank 2" in merged and "never reported" in merged


# ---------------------------------------------------------------- terminal and Markdown


@pytest.mark.parametrize("fmt", ["terminal", "markdown"])
@pytest.mark.parametrize("name", ALL)
def test_terminal_and_markdown_state_the_status(name, fmt):
    from llmdiag.reports.base import RenderOptions

    doc = realdocs.doc(name)
    text = render(doc, fmt, RenderOptions(width=100))
    assert doc["status"].upper() in text
    if fmt == "terminal":
        assert max(len(line) for line in text.splitlines()) <= 200


def test_html_log_of_two_ranks_gets_one_plot_per_rank():
    text, page = _html(realdocs.doc("analyze-log-ranks"))
    assert "loss, rank 0" in text and "loss, rank 1" in text and "grad norm, rank 1" in text
    assert "learning rate" in text and "tokens/s" in text


@pytest.mark.distributed
def test_html_nccl_bench_per_rank_busbw():
    doc = realdocs.doc("nccl-bench")
    text, _ = _html(doc)
    assert "Per rank busbw" in text
    for bw in doc["straggler"]["rank_busbw"]:
        assert f"{bw:.4g}" in text


def test_monitor_keeps_one_run_label_from_live_samples_to_its_report(tmp_path):
    from llmdiag.monitor import sinks as S
    from llmdiag.monitor.loop import Sinks
    from tests.unit.monitor.util import make_monitor

    labels = []

    def metrics(d):
        text = render(d, "prometheus")
        labels.append(_families(text)["llmdiag_run_info"].samples[0].labels["run"])
        return text

    sinks = Sinks(prometheus_file=S.PrometheusFile(str(tmp_path / "m.prom")), render_metrics=metrics)
    doc = make_monitor("timeline-h100-faults", sinks=sinks, interval_s=0.02).run(count=3)
    final = _families(render(doc, "prometheus"))["llmdiag_run_info"].samples[0].labels["run"]
    assert len(labels) == 3 and set(labels) == {final}


def test_junit_preflight_and_merge_share_class_names(tmp_path):
    """The same check from preflight or from report merge is the same test for CI history."""
    classes = [{c.get("classname") for c in _junit(realdocs.doc(n), tmp_path).iter("testcase")}
               for n in ("preflight", "merge")]
    assert classes[0] <= classes[1] and all(re.fullmatch(r"llmdiag\.preflight\.[\w-]+", c) for c in classes[1])
