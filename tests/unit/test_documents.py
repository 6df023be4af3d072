"""The document model's contract: one schema_version format, the compatibility rule, closed
vocabularies, and strict reading (an unknown key or a missing required field is an error)."""

from __future__ import annotations

import json
import subprocess

import pytest

from llmdiag import documents as D
from llmdiag.vocab import AlertSeverity, LauncherKind, Severity, Status, Verdict
from tests.conftest import cli_env, llmdiag_argv


def _log_doc(**extra) -> dict:
    return {"schema_version": "1.0", "command": "analyze-log", "kind": "log-analysis", "status": "fail",
            "findings": [{"kind": "nan-loss", "severity": "error", "message": "loss is NaN"}], **extra}


def test_a_document_of_its_type_reads_into_it_with_enum_members():
    d = D.read(_log_doc(), strict=True)
    assert type(d) is D.LogAnalysisDoc and d.status is Status.FAIL
    assert d.findings[0].severity is Severity.ERROR and d.findings[0].status is Status.FAIL
    assert D.problems(_log_doc()) == []


@pytest.mark.parametrize("change, says", [
    (lambda d: d.update(loss_last=1.0), "loss_last: unknown key"),
    (lambda d: d["findings"][0].update(sevrity="error"), "findings[0].sevrity: unknown key"),
    (lambda d: d["findings"][0].pop("message"), "findings[0].message: missing (required)"),
    (lambda d: d.pop("findings"), "findings: missing (required)"),
    (lambda d: d["findings"][0].update(severity="eror"), "findings[0].severity: 'eror' is not one of"),
    (lambda d: d.update(status="passed"), "status: 'passed' is not one of"),
])
def test_unknown_keys_missing_fields_and_unknown_words_are_errors_when_strict(change, says):
    doc = _log_doc()
    change(doc)
    assert any(p.startswith(says) for p in D.problems(doc)), D.problems(doc)
    with pytest.raises(D.DocumentError, match="log-analysis document: "):
        D.read(doc, strict=True)
    D.read(doc, strict=False)  # a user's renderer shows what it can


def test_the_tests_read_strictly_by_default():
    with pytest.raises(D.DocumentError):
        D.read(_log_doc(extra_field=1))


def test_versions_one_format_and_the_compatibility_rule():
    assert D.SCHEMA_VERSION == "1.0" and D.version({"schema_version": D.SCHEMA_VERSION}) == (1, 0)
    assert D.version({"schema_version": 1}) == (1, 0)  # analyze-log before one format for all kinds
    assert D.problems({**_log_doc(), "schema_version": 1}) == []
    # a newer minor adds keys this reader does not know: ignored; the same key in 1.0 is not
    assert D.problems(_log_doc(schema_version="1.7", added_later=[1])) == []
    assert D.problems(_log_doc(added_later=[1])) == ["added_later: unknown key"]
    # another major is refused, and so is a version that is not MAJOR.MINOR
    assert "is not one this llmdiag reads" in D.problems(_log_doc(schema_version="2.0"))[0]
    assert "is not MAJOR.MINOR" in D.problems(_log_doc(schema_version="v1"))[0]
    for kind in D.KINDS:
        if kind != "generic":
            assert D.schema(kind)["properties"]["schema_version"]["pattern"] == D.SCHEMA_VERSION_PATTERN


def test_generic_documents_keep_their_own_keys():
    doc = {"schema_version": "1.0", "command": "x", "kind": "generic", "status": "pass", "findings": []}
    assert D.problems(doc) == []


def test_vocabularies_are_closed_and_print_as_their_words():
    assert Status.FAIL == "fail" and f"{Status.FAIL}" == "fail" and json.dumps([Verdict.OUT_OF_MEMORY]) == \
        '["out-of-memory"]'
    with pytest.raises(ValueError):
        Status("fial")
    with pytest.raises(AttributeError):
        Status.FIAL  # noqa: B018 - the typo is the test
    assert AlertSeverity.CRITICAL.status is Status.FAIL and Severity.INFO.status is Status.PASS
    assert D.schema("memory-estimate")["properties"]["verdict"]["enum"] == list(Verdict.words())
    from llmdiag.launcher import LAUNCHERS, Launcher

    assert all(isinstance(spec.kind, LauncherKind) for spec in LAUNCHERS)
    with pytest.raises(ValueError):
        Launcher("x", "torchrn", when=(), fields={})


def test_report_render_of_a_file_with_an_unknown_key_is_one_line(tmp_path):
    saved = tmp_path / "old.json"
    saved.write_text(json.dumps(_log_doc(loss_last=1.0)))
    env = cli_env(LLMDIAG_STRICT_DOCUMENTS="0")  # as a user runs it
    p = subprocess.run(llmdiag_argv("report", "render", str(saved), "-f", "junit"), capture_output=True,
                       text=True, env=env, timeout=60)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "unknown key(s) loss_last" in p.stderr, p.stderr
    saved.write_text(json.dumps(_log_doc(schema_version="1.9", loss_last=1.0)))  # a newer minor: fine
    p = subprocess.run(llmdiag_argv("report", "render", str(saved), "-f", "junit"), capture_output=True,
                       text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr


def test_an_optional_list_reads_its_rows_into_their_type():
    """``list[Row] | None`` with a value: the rows are read as Row (they stayed dicts before)."""
    doc = {"schema_version": "1.0", "command": "report merge", "kind": "cluster", "status": "fail",
           "counts": {}, "nodes": [], "missing_nodes": [], "results": [],
           "sections": {"port_matrix": {"ports": [29500], "tested": 2, "failed": 1, "problems": [
               {"src": "a", "dst": "b", "port": 29500, "outcome": "refused", "detaill": "typo"}]}}}
    d = D.read(doc, strict=False)
    (p,) = d.sections.port_matrix.problems
    assert isinstance(p, D.PortProblem) and (p.src, p.port) == ("a", 29500)
    assert D.problems(doc) == ["sections.port_matrix.problems[0].detaill: unknown key"]
    assert D.read({**doc, "sections": {}}, strict=True).sections.port_matrix is None


def test_the_log_metrics_name_what_reports_show_and_keep_the_per_column_pairs_open():
    d = D.read(_log_doc(metrics={"num_steps_with_loss": 3, "loss_last": 2.5, "tflops_per_gpu_max": 180.0}),
               strict=True)
    assert d.metrics.num_steps_with_loss == 3 and d.metrics.loss_last == 2.5
    assert D.problems(_log_doc(metrics={"num_stepz": 1})) == []  # an open summary: extra columns are its own
