"""The result model: contract enforcement and lossless round trips through plain dicts."""

from __future__ import annotations

import json
import math

import pytest

from llmdiag.result import ClusterReport, Evidence, NodeReport, Result, Status


def _r(status=Status.PASS, node="n1", **kw):
    base = dict(probe="p", check="c", node=node, status=status, summary="s")
    if status in (Status.WARN, Status.FAIL):
        base |= dict(remediation="do x", runbook="probe-error")
    if status is Status.SKIP:
        base |= dict(runbook="check-skipped")
    base |= kw
    return Result(**base)


def test_worst_status_ignores_skips():
    assert Status.worst([Status.PASS, Status.SKIP]) is Status.PASS
    assert Status.worst([Status.SKIP, Status.WARN, Status.PASS]) is Status.WARN
    assert Status.worst([Status.WARN, Status.FAIL]) is Status.FAIL
    assert Status.worst([]) is Status.PASS


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(status=Status.FAIL, summary="x", runbook="probe-error"), "remediation"),
        (dict(status=Status.WARN, summary="x", remediation="y"), "runbook"),
        (dict(status=Status.SKIP, summary="x"), "runbook"),
        (dict(status=Status.SKIP, summary="", runbook="check-skipped"), "reason"),
    ],
)
def test_contract_is_enforced(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Result(probe="p", check="c", node="n", **kwargs)


def test_result_is_frozen():
    r = _r()
    with pytest.raises(AttributeError):
        r.status = Status.FAIL  # type: ignore[misc]


def test_round_trip_and_json_safe():
    r = _r(Status.FAIL, evidence=(Evidence("shm", 64, 1024, "MiB"),), data={"nan": math.nan, "t": (1, 2)})
    d = r.to_dict()
    json.dumps(d, allow_nan=False)  # NaN became a string, tuples lists
    back = Result.from_dict(d)
    assert back.evidence == r.evidence and back.status is Status.FAIL and back.remediation == "do x"


def test_cluster_report_keeps_scope_and_missing_nodes():
    n1 = NodeReport(node="n1", results=(_r(), _r(Status.WARN, check="w")))
    cluster_result = _r(Status.FAIL, node="n1", probe="consistency", check="torch")
    rep = ClusterReport(command="preflight", nodes=(n1,), cluster_results=(cluster_result,), missing_nodes=("n2",))
    d = rep.to_dict()
    assert d["status"] == "fail" and d["kind"] == "cluster" and d["schema_version"]
    assert [r["scope"] for r in d["results"]] == ["node", "node", "cluster"]
    back = ClusterReport.from_dict(json.loads(json.dumps(d)))
    assert back.missing_nodes == ("n2",)
    assert len(back.nodes[0].results) == 2 and len(back.cluster_results) == 1
    assert back.to_dict()["results"] == d["results"]


def test_missing_nodes_fail_the_report_even_if_all_pass():
    rep = ClusterReport(command="preflight", nodes=(NodeReport(node="n1", results=(_r(),)),), missing_nodes=("n2",))
    assert rep.status is Status.FAIL
