"""JUnit XML for CI systems: a report becomes test suites of test cases.

Mapping (the same for every kind; docs/reports.md has the details):
- fail → ``<failure message="summary" type="runbook id">`` with evidence, remediation and
  the runbook command in the body;
- skip → ``<skipped message="reason"/>``;
- warn → a passing test case with ``<properties><property name="status" value="warn"/>``
  and the details in ``<system-out>`` (CI systems show it, the gate stays green) — unless
  the report is ``strict`` (``--strict``), where a warning fails the run and so becomes a
  ``<failure>`` too.
Text from logs may hold control characters that XML 1.0 cannot carry; they are replaced.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

from llmdiag.reports import docview as dv
from llmdiag.reports.base import RenderOptions

_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(text: Any) -> str:
    return _XML_BAD.sub("\ufffd", str(text if text is not None else ""))


class Suites:
    """Builds ``<testsuites>`` with counts kept consistent with the cases added."""

    def __init__(self, name: str, strict: bool = False):
        self.root = ET.Element("testsuites", name=_clean(name))
        self.strict = strict
        self._suites: dict[str, ET.Element] = {}

    def case(self, suite: str, classname: str, name: str, status: str, message: str = "", details: str = "",
             kind: str = "", time_s: Any = None) -> None:
        s = self._suites.get(suite)
        if s is None:
            s = ET.SubElement(self.root, "testsuite", name=_clean(suite))
            self._suites[suite] = s
        tc = ET.SubElement(s, "testcase", classname=_clean(classname), name=_clean(name))
        t = dv.finite(time_s)
        if t is not None:
            tc.set("time", f"{t:.3f}")
        status = dv.status_of(status, "pass")
        if status == "warn" and not self.strict:
            props = ET.SubElement(tc, "properties")
            ET.SubElement(props, "property", name="status", value="warn")
            ET.SubElement(tc, "system-out").text = _clean(f"WARN: {message}\n{details}".rstrip())
        elif status in ("fail", "warn"):
            el = ET.SubElement(tc, "failure", message=_clean(message), type=_clean(kind or status))
            el.text = _clean(details)
        elif status == "skip":
            ET.SubElement(tc, "skipped", message=_clean(message))
        elif details:
            ET.SubElement(tc, "system-out").text = _clean(details)

    def text(self) -> str:
        totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        for s in self._suites.values():
            cases = s.findall("testcase")
            counts = {
                "tests": len(cases),
                "failures": sum(1 for c in cases if c.find("failure") is not None),
                "errors": 0,
                "skipped": sum(1 for c in cases if c.find("skipped") is not None),
            }
            for k, v in counts.items():
                s.set(k, str(v))
                totals[k] += v
        for k, v in totals.items():
            self.root.set(k, str(v))
        ET.indent(self.root)
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(self.root, encoding="unicode") + "\n"


def _result_details(r: Mapping[str, Any]) -> str:
    from llmdiag.reports.cluster import evidence_line

    lines = [str(r.get("summary", ""))]
    for ev in r.get("evidence") or ():
        if isinstance(ev, Mapping) and "name" in ev:
            lines.append("  " + evidence_line(ev))
    if r.get("remediation"):
        lines.append(f"fix: {r['remediation']}")
    if r.get("runbook"):
        lines.append(f"runbook: llmdiag runbook {r['runbook']}")
    return "\n".join(lines)


def _add_results(js: Suites, rs: list[Mapping[str, Any]], suite_of, prefix: str = "llmdiag") -> None:
    for r in rs:
        suite = suite_of(r)
        js.case(suite, f"{prefix}.{suite}.{r.get('probe', '?')}", str(r.get("check", "?")), str(r.get("status")),
                str(r.get("summary", "")), _result_details(r), str(r.get("runbook") or ""), r.get("duration_s"))


def cluster(doc: Mapping[str, Any], opts: RenderOptions) -> str:
    js = Suites(f"llmdiag {doc.get('command', 'preflight')}", strict=bool(doc.get("strict")))
    known = set(dv.node_names(doc))
    _add_results(js, dv.results(doc),
                 lambda r: str(r.get("node")) if r.get("scope", "node") == "node" and r.get("node") in known
                 else "cluster")
    for node in dv.missing_nodes(doc):
        js.case(node, f"llmdiag.{node}", "reported", "fail", f"node {node} never reported",
                "The node was expected but sent no report: it is down, unreachable, or its agent failed.",
                "cluster-node-missing")
    secs = doc.get("sections") or {}
    if isinstance(secs.get("nccl_bench"), Mapping):
        _bench_cases(js, secs["nccl_bench"])
    if isinstance(secs.get("memory"), Mapping):
        _memory_cases(js, secs["memory"])
    return js.text()


def _bench_cases(js: Suites, doc: Mapping[str, Any]) -> None:
    for r in doc.get("checks") or ():
        if isinstance(r, Mapping) and "status" in r:
            _add_results(js, [r], lambda r: "nccl-bench")
    for row in dv.bench_rows(doc):
        wrong = [row[p].get("wrong") for p in dv.PLACEMENTS if row[p].get("wrong") is not None]
        bw = row["out_of_place"].get("busbw")
        bad = any(w > 0 for w in wrong)
        msg = f"{row['collective']} {row['size_bytes']} B: busbw {bw if bw is not None else '-'} GB/s"
        js.case("nccl-bench", f"llmdiag.nccl-bench.{row['collective']}", f"{row['size_bytes']} B",
                "fail" if bad else "pass", msg + (f", {max(wrong):g} wrong elements" if bad else ""),
                "" if not bad else "Collective results were wrong: a data corruption on a GPU or link.",
                "nccl-wrong-results" if bad else "")
    for p in dv.pairs(doc):
        st = dv.status_of(p.get("status"), "pass")
        js.case("nccl-bench", "llmdiag.nccl-bench.pairwise", f"{p['a']} <-> {p['b']}", st,
                f"busbw {p['busbw'] if p['busbw'] is not None else '-'} GB/s")


def nccl_bench(doc: Mapping[str, Any], opts: RenderOptions) -> str:
    js = Suites("llmdiag nccl-bench")
    _bench_cases(js, doc)
    js.case("nccl-bench", "llmdiag.nccl-bench", "overall", str(doc.get("status")),
            str(doc.get("summary") or f"nccl-bench {doc.get('status')}"), kind="nccl-bench")
    return js.text()


def log_analysis(doc: Mapping[str, Any], opts: RenderOptions) -> str:
    js = Suites("llmdiag analyze-log")
    fs = dv.findings(doc)
    for i, f in enumerate(fs):
        where = ":".join(str(x) for x in (f.get("file"), f.get("line")) if x is not None)
        name = f"{f.get('kind', 'finding')} #{i + 1}" + (f" rank {f['rank']}" if f.get("rank") is not None else "")
        details = "\n".join(str(x) for x in (
            f.get("message"), f"at {where}" if where else None, f"step {f['step']}" if f.get("step") is not None else None,
            f"cause: {f['cause']}" if f.get("cause") else None, f"next: {f['next_step']}" if f.get("next_step") else None,
            f"runbook: llmdiag runbook {f['runbook']}" if f.get("runbook") else None) if x)
        js.case("analyze-log", f"llmdiag.analyze-log.{f.get('kind', 'finding')}", name,
                dv.severity_status(f.get("severity")), str(f.get("message", "")), details, str(f.get("runbook") or ""))
    if not fs:
        js.case("analyze-log", "llmdiag.analyze-log", "no findings", "pass", "no problem found in the log")
    return js.text()


def _memory_cases(js: Suites, doc: Mapping[str, Any]) -> None:
    word, why = dv.verdict(doc)
    total, gpu = dv.breakdown_total(doc), dv.gpu_memory_bytes(doc)
    detail = f"predicted {total / 2**30:.2f} GiB" if total is not None else "no total"
    if gpu is not None:
        detail += f" of {gpu / 2**30:.2f} GiB"
    js.case("estimate-memory", "llmdiag.estimate-memory", "fits", dv.verdict_status(doc), f"{word}: {why or detail}",
            detail + "".join(f"\n- {s}" for s in dv.text_items(doc.get("suggestions"))), "cuda-oom")
    for r in doc.get("plan_checks") or ():
        if isinstance(r, Mapping):
            name = r.get("check") or r.get("name") or "plan"
            js.case("estimate-memory", "llmdiag.estimate-memory.plan", str(name), str(r.get("status", "pass")),
                    str(r.get("summary") or r.get("message") or ""), _result_details(r), str(r.get("runbook") or ""))


def memory_estimate(doc: Mapping[str, Any], opts: RenderOptions) -> str:
    js = Suites("llmdiag estimate-memory")
    _memory_cases(js, doc)
    return js.text()


def monitor(doc: Mapping[str, Any], opts: RenderOptions) -> str:
    js = Suites("llmdiag monitor")
    node = str(doc.get("node") or "node")
    fired: dict[str, list[Mapping[str, Any]]] = {}
    for a in doc.get("alerts") or ():
        fired.setdefault(str(a.get("rule")), []).append(a)
    for rule in list(doc.get("rules") or ()) + [r for r in fired if r not in (doc.get("rules") or ())]:
        alerts = fired.get(rule, [])
        st = "fail" if any(a.get("severity") == "critical" for a in alerts) else ("warn" if alerts else "pass")
        msg = f"{len(alerts)} alert(s): {alerts[0].get('message')}" if alerts else "no alert"
        js.case(node, f"llmdiag.monitor.{node}", rule, st, msg,
                "\n".join(str(a.get("message")) for a in alerts), str(alerts[0].get("runbook") or "") if alerts else "")
    if not doc.get("gpu_count"):
        js.case(node, f"llmdiag.monitor.{node}", "gpus", "skip", str(doc.get("gpu_note") or "GPUs absent"))
    return js.text()


def generic(doc: Mapping[str, Any], opts: RenderOptions) -> str:
    js = Suites(f"llmdiag {doc.get('command', '')}".strip())
    js.case(str(doc.get("command", "llmdiag")), "llmdiag", "overall", str(doc.get("status")),
            str(doc.get("summary") or doc.get("status")))
    return js.text()
