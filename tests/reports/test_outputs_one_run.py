"""One run, every output: ``-o FORMAT:FILE`` (repeatable) writes several formats from the same
run, each read back by its real consumer; conflicting outputs are refused before any work;
``llmdiag report render SAVED.json`` turns any saved document into any format."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest

from llmdiag import documents
from llmdiag.reports.base import FORMATS, RenderOptions, render
from tests.conftest import cli_env, llmdiag_argv
from tests.reports import realdocs

XSD = Path(__file__).resolve().parent / "data" / "junit-10.xsd"
SCHEMAS = Path(documents.__file__).resolve().parent / "schemas"
NEEDS_PROMTOOL = pytest.mark.skipif(not shutil.which("promtool"), reason="promtool (Debian: prometheus) not installed")
NEEDS_XMLLINT = pytest.mark.skipif(not shutil.which("xmllint"), reason="xmllint (Debian: libxml2-utils) not installed")


def llmdiag(*args: str, cwd=None, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(llmdiag_argv(*args), capture_output=True, text=True, env=cli_env(NO_COLOR="1"),
                          timeout=300, cwd=cwd, input=stdin)


def consume_json(path: Path) -> dict:
    doc = json.loads(path.read_text())
    schema = json.loads((SCHEMAS / f"{doc['kind']}.json").read_text())
    errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]
    assert not errors, errors[:3]
    return doc


def consume_prometheus(path: Path) -> None:
    proc = subprocess.run(["promtool", "check", "metrics"], input=path.read_text(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def consume_junit(path: Path) -> None:
    proc = subprocess.run(["xmllint", "--noout", "--schema", str(XSD), str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    junitparser = pytest.importorskip("junitparser")
    xml = junitparser.JUnitXml.fromfile(str(path))
    assert xml.tests == sum(1 for suite in xml for _ in suite) > 0


@NEEDS_PROMTOOL
@NEEDS_XMLLINT
def test_one_preflight_run_writes_json_prometheus_and_junit(tmp_path):
    j, p, x = tmp_path / "pf.json", tmp_path / "pf.prom", tmp_path / "pf.xml"
    proc = llmdiag("preflight", "--probe", "system", "--probe", "filesystem", "--width", "100",
                   "-o", f"json:{j}", "-o", f"prometheus:{p}", "-o", f"junit:{x}", cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    assert "system/shm" in proc.stdout  # -f's report (terminal) still on stdout
    doc = consume_json(j)
    consume_prometheus(p)
    consume_junit(x)
    # the three files are the same run: each is what that run's document renders to
    assert p.read_text() == render(doc, "prometheus") and x.read_text() == render(doc, "junit")
    assert render(doc, "terminal", RenderOptions(width=100)) == proc.stdout


def test_plain_output_takes_the_format_report_off_stdout(tmp_path):
    proc = llmdiag("preflight", "--probe", "system", "-f", "json", "-o", str(tmp_path / "a.json"),
                   "-o", f"markdown:{tmp_path / 'a.md'}")
    assert proc.returncode in (0, 1) and proc.stdout == "", proc.stderr
    doc = json.loads((tmp_path / "a.json").read_text())
    assert (tmp_path / "a.md").read_text() == render(doc, "markdown")
    alone = llmdiag("preflight", "--probe", "system", "-o", "json:-")  # FORMAT:- alone: that format on stdout
    assert alone.returncode in (0, 1) and json.loads(alone.stdout)["kind"] == "cluster"


@pytest.mark.parametrize("args, says", [
    (["-f", "json", "-o", "a.json", "-f", "prometheus", "-o", "b.prom"], "--format given more than once"),
    (["-o", "a.json", "-o", "b.prom"], "-o given 2 times without a format"),
    (["-f", "json", "-o", "prometheus:-"], "2 outputs on stdout"),
    (["-o", "json:-", "-o", "junit:-"], "2 outputs on stdout"),
    (["-o", "json:same", "-o", "junit:same"], "is the same file as"),
    (["-o", "json:"], "no file after json:"),
])
def test_conflicting_outputs_are_refused_before_any_work(tmp_path, args, says):
    proc = llmdiag("preflight", "--probe", "system", *args, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and says in proc.stderr and proc.stderr.startswith("llmdiag: ")
    assert list(tmp_path.iterdir()) == []  # nothing written


def _kinds():
    seen = {}
    for name in realdocs.NAMES:
        kind = {"preflight": "cluster", "merge": "cluster", "nccl-bench": "nccl-bench", "monitor": "monitor"}.get(
            name, "memory-estimate" if name.startswith("estimate") else "log-analysis")
        seen.setdefault(kind, name)
    return [pytest.param(n, marks=pytest.mark.distributed) if n in realdocs.DISTRIBUTED else n
            for n in seen.values()]


@pytest.mark.parametrize("name", _kinds())
def test_report_render_every_saved_kind_in_every_format(tmp_path, name):
    doc = realdocs.doc(name)
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps(doc))
    outs = [f"{f}:{tmp_path / ('out.' + f)}" for f in FORMATS if f != "terminal"]
    proc = llmdiag("report", "render", str(saved), "--width", "90", *[a for o in outs for a in ("-o", o)])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == render(doc, "terminal", RenderOptions(width=90))
    for f in FORMATS:
        if f != "terminal":
            assert (tmp_path / f"out.{f}").read_text() == render(doc, f), f
    assert json.loads(saved.read_text()) == doc  # the input untouched
    piped = llmdiag("report", "render", "-", "-f", "prometheus", stdin=saved.read_text())
    assert piped.returncode == 0 and piped.stdout == render(doc, "prometheus")


@pytest.mark.parametrize("content, says", [
    ("not json at all", "not a JSON report"),
    ('{"kind": "x", "schema_version": "1.0"}', "unknown report kind 'x'"),
    ('{"kind": "monitor", "schema_version": "2.0"}', "schema_version 2.0 is not one this llmdiag reads"),
    ('[1, 2]', "not an llmdiag report"),
    ('{"kind": "cluster", "schema_version": "1.0", "command": "preflight", "status": "pass"}',
     "not a complete cluster report"),
    ('{"kind": "monitor", "schema_version": "1.0", "command": "monitor", "status": "pass", "node": "n",'
     ' "gpu_count": 0, "samples": 1, "alerts": 7, "latest": 5}', "not a valid monitor report"),
])
def test_report_render_refuses_what_is_not_a_report(tmp_path, content, says):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    proc = llmdiag("report", "render", str(bad), "-f", "junit")
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr.count("\n") == 1 and says in proc.stderr and "Traceback" not in proc.stderr
