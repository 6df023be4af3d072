"""JUnit XML for CI systems: a report becomes test suites of test cases.

The output follows the dialect of Jenkins' junit-10.xsd (tests/reports/data/junit-10.xsd checks
it): counts on ``<testsuite>`` (``skipped`` only there), no ``<properties>`` in a test case.
Test names are stable from run to run, so CI trend and flaky-test tracking work:
``probe/check[node]`` for preflight, ``kind[rank N]`` for log findings (one case per kind and
rank), ``collective[size B]`` for nccl-bench rows, ``rule[node]`` for monitor alerts.

- fail → ``<failure message="reason. Fix: ...">`` with evidence, fix and the runbook command in
  the body;
- skip → ``<skipped message="reason"/>``;
- warn → a passing case with ``WARN: ...`` in ``<system-out>`` (CI systems show it, the gate
  stays green) — unless the report is ``strict`` (``--strict``), where a warning becomes a
  ``<failure>`` too.
Text from logs may hold control characters that XML 1.0 cannot carry; they are replaced.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from llmdiag import documents as D
from llmdiag.reports.base import RenderOptions
from llmdiag.vocab import AlertSeverity, Status, Verdict

_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(text: Any) -> str:
    return _XML_BAD.sub("\ufffd", str(text if text is not None else ""))


def reason_and_fix(reason: str, fix: str | None) -> str:
    """A failure message: what is wrong, then what to do about it."""
    return f"{reason.rstrip('. ')}. Fix: {fix}" if fix else reason


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
        t = D.number(time_s)
        if t is not None:
            tc.set("time", f"{t:.3f}")
        status = D.status_of(status, Status.PASS)
        if status is Status.WARN and not self.strict:
            ET.SubElement(tc, "system-out").text = _clean(f"WARN: {message}\n{details}".rstrip())
        elif status in (Status.FAIL, Status.WARN):
            el = ET.SubElement(tc, "failure", message=_clean(message), type=_clean(kind or status))
            el.text = _clean(details)
        elif status is Status.SKIP:
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
            if k != "skipped":  # junit-10.xsd: <testsuites> has no skipped count
                self.root.set(k, str(v))
        ET.indent(self.root)
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(self.root, encoding="unicode") + "\n"


def _check_details(c: D.Finding) -> str:
    from llmdiag.reports.cluster import evidence_line

    lines = [c.summary]
    lines += ["  " + evidence_line(ev) for ev in c.evidence]
    if c.remediation:
        lines.append(f"fix: {c.remediation}")
    if c.runbook:
        lines.append(f"runbook: llmdiag runbook {c.runbook}")
    return "\n".join(lines)


def _check_case(js: Suites, suite: str, classname: str, name: str, c: D.Finding) -> None:
    js.case(suite, classname, name, c.status, reason_and_fix(c.summary, c.remediation), _check_details(c),
            c.runbook or c.status, getattr(c, "duration_s", None))


def cluster(d: D.ClusterDoc, opts: RenderOptions) -> str:
    js = Suites(f"llmdiag {d.command or 'preflight'}", strict=d.strict)
    known = set(d.node_names())
    for r in d.results:
        node_scope = (r.scope or "node") == "node" and r.node in known
        suite = r.node if node_scope else "cluster"
        _check_case(js, suite, f"llmdiag.preflight.{r.probe or 'check'}",
                    f"{r.label}[{r.node}]" if r.node else r.label, r)
    for node in d.missing_nodes:
        js.case(node, "llmdiag.preflight.cluster", f"cluster/reported[{node}]", Status.FAIL,
                reason_and_fix(f"node {node} never reported", f"check that {node} is up and its llmdiag agent ran"),
                "The node was expected but sent no report: it is down, unreachable, or its agent failed.",
                "cluster-node-missing")
    return js.text()


def nccl_bench(d: D.NcclBenchDoc, opts: RenderOptions) -> str:
    js = Suites("llmdiag nccl-bench", strict=False)
    suite = "nccl-bench"
    for c in d.findings:
        _check_case(js, suite, "llmdiag.nccl-bench.check", c.check, c)
    for r in d.results:
        wrong = [r.placement(p).wrong for p in ("out_of_place", "in_place") if isinstance(r.placement(p).wrong, int)]
        bad = any(w > 0 for w in wrong)
        bw = D.number(r.placement("out_of_place").busbw)
        msg = f"{r.collective} {r.size} B: busbw {bw:.4g} GB/s" if bw is not None else f"{r.collective} {r.size} B"
        js.case(suite, f"llmdiag.nccl-bench.{r.collective}", f"{r.collective}[{r.size} B]", Status.FAIL if bad else Status.PASS,
                reason_and_fix(msg + f", {max(wrong)} wrong elements", "run `llmdiag nccl-bench --pairwise` and "
                               "check the GPUs' ECC counters (`nvidia-smi -q -d ECC`)") if bad else msg,
                "Collective results were wrong: data corruption on a GPU or link." if bad else "",
                "nccl-wrong-results" if bad else "")
    if d.pairwise:
        for lk in d.pairwise.links:
            gbps, thr = D.number(lk.gbps), D.number(d.pairwise.threshold_gbps)
            slow = gbps is not None and thr is not None and gbps < thr and not d.pairwise.loopback
            js.case(suite, "llmdiag.nccl-bench.pairwise", f"pairwise[{lk.a} <-> {lk.b}]", Status.WARN if slow else Status.PASS,
                    f"busbw {gbps if gbps is not None else '-'} GB/s" + (f", below {thr:.3g}" if slow else ""))
    return js.text()


def log_analysis(d: D.LogAnalysisDoc, opts: RenderOptions) -> str:
    js = Suites("llmdiag analyze-log")
    groups: dict[tuple[str, Any], list[D.LogFinding]] = {}
    for f in d.findings:
        groups.setdefault((f.kind, f.rank), []).append(f)
    for (kind, rank), fs in groups.items():
        worst = D.worst(f.status for f in fs)
        first = fs[0]
        details = "\n".join(
            "\n".join(str(x) for x in (f.message, f"at {f.where}" if f.where else None,
                                       f"step {f.step}" if f.step is not None else None) if x) for f in fs)
        details += "".join(f"\n{label}: {v}" for label, v in (("cause", first.cause), ("next", first.next_step),
                                                              ("runbook", first.runbook and f"llmdiag runbook {first.runbook}"))
                           if v)
        where = f" ({first.where})" if first.where else ""
        name = f"{kind}[rank {rank}]" if rank is not None else kind
        js.case("analyze-log", "llmdiag.analyze-log.finding", name, worst,
                reason_and_fix(first.message + where, first.next_step), details, first.runbook or "")
    if not d.findings:
        js.case("analyze-log", "llmdiag.analyze-log.finding", "none", Status.PASS, "no problem found in the log")
    return js.text()


def memory_estimate(d: D.MemoryEstimateDoc, opts: RenderOptions) -> str:
    js = Suites("llmdiag estimate-memory")
    gib = 2**30
    detail = f"predicted {d.total / gib:.2f} GiB per GPU" if d.total is not None else "no total"
    if d.gpu_memory:
        detail += f" of {d.gpu_memory / gib:.2f} GiB"
    fix = None
    if d.verdict != Verdict.FITS:
        fix = (f"try: {d.suggestions[0].change}" if d.suggestions
               else "shard more (tp/pp/ZeRO), recompute activations or lower the micro batch")
    js.case("estimate-memory", "llmdiag.estimate-memory", "fits",
            Status.PASS if d.verdict == Verdict.FITS else (Status.WARN if d.verdict == Verdict.TIGHT else Status.FAIL),
            reason_and_fix(f"{d.verdict}: {detail}", fix),
            detail + "".join(f"\n- {s.change}: {s.total / gib:.2f} GiB" for s in d.suggestions), "cuda-oom")
    for c in d.plan_checks:
        js.case("estimate-memory", "llmdiag.estimate-memory.plan", f"plan/{c.check}", c.severity,
                reason_and_fix(c.message, c.fix), c.message + (f"\nfix: {c.fix}" if c.fix else ""), c.runbook or "")
    return js.text()


def monitor(d: D.MonitorDoc, opts: RenderOptions) -> str:
    js = Suites("llmdiag monitor")
    node = d.node or "node"
    fired: dict[str, list[D.Alert]] = {}
    for a in d.alerts:
        fired.setdefault(a.rule, []).append(a)
    for rule in list(d.rules) + [r for r in fired if r not in d.rules]:
        alerts = fired.get(rule, [])
        st = Status.worst([AlertSeverity(a.severity).status for a in alerts]) if alerts else Status.PASS
        rb = alerts[0].runbook if alerts else None
        msg = f"{len(alerts)} alert(s): {alerts[0].message}" if alerts else "no alert"
        js.case(node, f"llmdiag.monitor.{node}", f"{rule}[{node}]", st,
                reason_and_fix(msg, f"llmdiag runbook {rb}" if rb else None),
                "\n".join(a.message for a in alerts), rb or "")
    if not d.gpu_count:
        js.case(node, f"llmdiag.monitor.{node}", f"gpus[{node}]", Status.SKIP, d.gpu_note or "GPUs absent")
    return js.text()


def generic(d: D.GenericDoc, opts: RenderOptions) -> str:
    js = Suites(f"llmdiag {d.command or ''}".strip())
    js.case(str(d.command or "llmdiag"), "llmdiag", "overall", str(d.status),
            str(d.summary or d.status))
    return js.text()
