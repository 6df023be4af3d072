"""A run's progress records, and the partial document built from them (no ranks needed)."""

from __future__ import annotations

import json

import pytest

from llmdiag.ncclbench import verdict
from llmdiag.ncclbench.config import BenchSpec
from llmdiag.ncclbench.progress import LineFile, Progress, planned_rows
from llmdiag.reports.base import RenderOptions, render


def test_line_file_hands_over_whole_lines_only(tmp_path):
    f = LineFile(tmp_path / "p.jsonl")
    assert f.poll() == []  # nothing written yet
    f.emit({"row": {"size": 1}})
    with open(f.path, "a") as fh:
        fh.write('{"row": {"si')  # a line the worker is still writing
    assert f.poll() == [{"row": {"size": 1}}]
    with open(f.path, "a") as fh:
        fh.write('ze": 2}}\n')
    assert f.poll() == [{"row": {"size": 2}}]


def test_planned_rows_counts_what_the_sweep_measures():
    # all_gather on 4 float ranks: 4 and 8 bytes give 0 elements per rank (no row), 16 gives 1
    assert planned_rows(BenchSpec(collectives=("all_gather",), sizes=(4, 8, 16)), 4) == 1
    # sendrecv needs 2 ranks
    assert planned_rows(BenchSpec(collectives=("all_reduce", "sendrecv"), sizes=(1024, 2048)), 1) == 2


ROW = {"collective": "all_reduce", "size": 1024, "count": 256, "type": "float", "redop": "sum", "root": -1,
       "out_of_place": {"time_us": 10.0, "algbw": 0.1, "busbw": 0.1, "wrong": 0},
       "in_place": {"time_us": 10.0, "algbw": 0.1, "busbw": 0.1, "wrong": 0},
       "rank_time_us": {"out_of_place": [10.0, 10.0], "in_place": [10.0, 10.0]}}


@pytest.mark.parametrize("reason,status", [("interrupted", "warn"), ("timed out", "fail"), ("peer left", "fail")])
def test_partial_document_keeps_the_rows_and_says_why(reason, status):
    shown = []
    p = Progress(BenchSpec(sizes=(1024, 2048)), shown.append)
    p.record({"world": {"world_size": 2, "backend": "gloo", "device": "cpu", "hosts": ["a", "b"], "nodes": 2,
                        "planned_rows": 2}})
    p.record({"measuring": {"collective": "all_reduce", "size": 1024, "index": 0, "planned": 2}})
    p.record({"row": ROW})
    p.record({"measuring": {"collective": "all_reduce", "size": 2048, "index": 1, "planned": 2}})
    assert len(shown) == 4  # the listener hears every record as it comes
    doc = verdict.build_doc(p.result(world_size=2, backend="gloo"), {}, p.stop(reason, "why"))
    assert doc["status"] == status and doc["results"] == [ROW]
    assert doc["stopped"] == {"reason": reason, "detail": "why", "measuring": "all_reduce 2KB (row 2 of 2)",
                              "rows_measured": 1, "rows_planned": 2}
    assert doc["findings"][0]["summary"] == f"{reason} after 1 of 2 rows; still running: all_reduce 2KB (row 2 of 2): why"
    text = render(doc, "terminal")
    assert f"# PARTIAL RUN ({reason}): 1 of 2 rows measured" in text and "        1024           256" in text
    for fmt in ("markdown", "html", "prometheus", "junit"):
        assert render(doc, fmt)
    assert json.loads(render(doc, "json"))["stopped"]["reason"] == reason


def test_a_run_stopped_before_the_ranks_met_still_has_a_report():
    p = Progress(BenchSpec(sizes=(1024,)))
    doc = verdict.build_doc(p.result(world_size=4, backend="gloo"), {}, p.stop("timed out", "rendezvous"))
    assert doc["results"] == [] and doc["straggler"] is None and doc["status"] == "fail"
    assert "4 rank(s) on ? node(s), backend gloo, device ?" in render(doc, "terminal")


def test_rows_streamed_to_the_terminal_are_not_repeated_by_the_stdout_report(tmp_path):
    """The stdout report after rows streamed on the same terminal: the partial note, footers and
    findings, no table; a file output of the same run keeps the whole table."""
    import io

    from llmdiag.reports.base import emit_all

    p = Progress(BenchSpec(sizes=(1024, 2048)))
    p.record({"world": {"world_size": 2, "backend": "gloo", "device": "cpu", "hosts": ["a", "b"], "nodes": 2}})
    p.record({"row": ROW})
    doc = verdict.build_doc(p.result(world_size=2, backend="gloo"), {}, p.stop("interrupted", "Ctrl-C"))
    screen = io.StringIO()
    emit_all(doc, [("terminal", None), ("terminal", tmp_path / "r.txt")], stream=screen,
             stream_extra={"rows_shown": 1})
    shown, whole = screen.getvalue(), (tmp_path / "r.txt").read_text()
    row = "        1024           256"
    assert row not in shown and "# Collective test" not in shown and "# llmdiag nccl-bench:" not in shown, shown
    assert "# PARTIAL RUN (interrupted): 1 rows measured" in shown and "# Avg bus bandwidth" in shown, shown
    assert "WARN" in shown.splitlines()[-1], shown
    assert row in whole and "# Collective test: all_reduce" in whole and "# Avg bus bandwidth" in whole
    # fewer rows seen than measured (stderr lost some): the whole table, not a summary
    assert row in render(doc, "terminal", RenderOptions(extra={"rows_shown": 0}))
