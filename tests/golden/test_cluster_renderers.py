"""Golden tests: terminal (fixed width, no colour) and Markdown renderings of a fixed report.

Regenerate after an intended change with ``LLMDIAG_REGEN_GOLDEN=1 pytest tests/golden``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from llmdiag.result import ClusterReport, Evidence, NodeReport, Result, Status
from llmdiag.reports.base import RenderOptions, render

HERE = Path(__file__).parent
SCHEMA = HERE.parent.parent / "docs" / "report-schema.json"


def fixed_report() -> dict:
    n1 = NodeReport(
        node="node-0", node_rank=0, started_at=1000.0, finished_at=1002.5,
        results=(
            Result(probe="software", check="torch", node="node-0", status=Status.PASS, summary="torch 2.5.1+cu124"),
            Result(probe="system", check="shm", node="node-0", status=Status.FAIL,
                   summary="/dev/shm is 64 MiB [rank3]: looks like markup but is text",
                   evidence=(Evidence("/dev/shm size", 64, 1024, "MiB"),),
                   remediation="Start the container with --shm-size=16g (or --ipc=host).", runbook="shm-too-small"),
            Result(probe="gpu", check="probe", node="node-0", status=Status.SKIP,
                   summary="skipped: no NVIDIA driver", runbook="check-skipped"),
        ),
    )
    n2 = NodeReport(
        node="node-1", node_rank=1, started_at=1000.2, finished_at=1002.0,
        results=(
            Result(probe="ports", check="master_port", node="node-1", status=Status.WARN,
                   summary="port 29500 | busy (held by python, pid 4242)",
                   evidence=(Evidence("port", 29500, "free", ""),),
                   remediation="Stop the leftover job: kill 4242.", runbook="probe-error"),
        ),
    )
    consistency = Result(probe="consistency", check="torch", node="node-1", status=Status.FAIL,
                         summary="node-1: torch 2.4.0+cu121, 1 other node: 2.5.1+cu124",
                         remediation="Install the same torch on every node.", runbook="probe-error")
    return ClusterReport(command="preflight", nodes=(n1, n2), cluster_results=(consistency,),
                         missing_nodes=("node-2",), created_at=1003.0, duration_s=2.5).to_dict()


@pytest.mark.parametrize("fmt, name", [("terminal", "cluster.txt"), ("markdown", "cluster.md")])
def test_golden(fmt, name):
    text = render(fixed_report(), fmt, RenderOptions(width=100, color=False))
    path = HERE / "data" / name
    if os.environ.get("LLMDIAG_REGEN_GOLDEN") or not path.exists():
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text()


def test_terminal_escapes_markup_and_has_no_ansi():
    text = render(fixed_report(), "terminal", RenderOptions(width=100, color=False))
    assert "[rank3]:" in text and "\x1b[" not in text


def test_terminal_color_when_asked():
    text = render(fixed_report(), "terminal", RenderOptions(width=100, color=True))
    assert "\x1b[" in text and "[rank3]:" in text


def test_json_validates_against_documented_schema():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text())
    doc = json.loads(render(fixed_report(), "json"))
    jsonschema.validate(doc, schema)
    bad = dict(doc, results=[dict(doc["results"][1], remediation=None)])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
