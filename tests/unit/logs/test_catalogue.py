"""The signature catalogue: every example line is recognised as exactly its own kind, through the
real reader and analyzer; every runbook it names exists; the number tables are complete."""

from __future__ import annotations

import pytest

from llmdiag import runbooks
from llmdiag.logs import analyze_paths, catalogue

EXAMPLES = [(e.kind, line) for e in catalogue.ENTRIES for line in e.examples]
#: kinds that an example line may bring along besides its own: an NCCL WARN line is also counted as
#: a warning, and a dead worker's "Killed" is its signal
COMPANIONS = {"nccl_warn"}


@pytest.mark.parametrize("kind,line", EXAMPLES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(EXAMPLES)])
def test_example_is_its_own_kind(tmp_path, kind, line):
    log = tmp_path / "one.log"
    log.write_text(line + "\n")
    doc = analyze_paths([str(log)])
    kinds = {f["kind"] for f in doc["findings"]}
    assert kind in kinds, (line, kinds)
    assert kinds - {kind} <= COMPANIONS - {kind}, (line, kinds)
    if catalogue.CATALOGUE[kind].fatal:
        assert doc["status"] == "fail"


def test_every_runbook_exists():
    for rb in catalogue.runbook_ids():
        assert runbooks.exists(rb), rb


def test_entries_are_complete():
    for e in catalogue.ENTRIES:
        assert e.meaning and e.causes and e.fix and e.runbook, e.kind
        assert e.severity in (catalogue.ERROR, catalogue.WARNING)
        assert not e.patterns or e.keywords, e.kind  # a pattern needs a prefilter word
    assert set(catalogue.NCCL_RETURN_CODES) >= {1, 2, 3, 4, 5, 6}
    assert catalogue.IB_WC_STATUS[12][0] == "IBV_WC_RETRY_EXC_ERR"
    for x in (13, 31, 43):
        assert catalogue.XIDS[x][1] == "application"
    for x in (48, 63, 64, 74, 79, 92, 94, 95, 119, 120):
        assert catalogue.XIDS[x][1] == "hardware"


@pytest.mark.parametrize("line,name", [
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "cudaErrorIllegalAddress"),
    ("RuntimeError: CUDA error: unspecified launch failure", "cudaErrorLaunchFailure"),
    ("RuntimeError: CUDA error: misaligned address", "cudaErrorMisalignedAddress"),
    ("RuntimeError: CUDA error: device-side assert triggered", "cudaErrorAssert"),
])
def test_cuda_errors_say_which_and_why(tmp_path, line, name):
    log = tmp_path / "c.log"
    log.write_text(line + "\n")
    f = analyze_paths([str(log)])["findings"][0]
    assert f["facts"]["cuda_error_name"] == name and f["cause"] == catalogue.CUDA_ERRORS[f["facts"]["cuda_error"]
                                                                                        .lower()][2]


@pytest.mark.parametrize("xid,origin", [(13, "application"), (79, "hardware"), (109, "driver")])
def test_xid_origin(tmp_path, xid, origin):
    log = tmp_path / "x.log"
    log.write_text(f"[Tue Mar  5 10:11:12 2024] NVRM: Xid (PCI:0000:b1:00): {xid}, pid=1234, name=python, Ch 0010\n")
    f = analyze_paths([str(log)])["findings"][0]
    assert f["kind"] == "ecc_xid" and f["facts"]["xid_origin"] == origin
    assert ("application" in f["cause"]) == (origin == "application")


@pytest.mark.parametrize("codes,kinds", [
    ([6, 6, 6], {"nccl_remote_error"}), ([2, 2, 3], {"nccl_internal_error", "nccl_system_error"}),
    ([2, 6, 3], {"nccl_internal_error", "nccl_system_error"}), ([5], {"nccl_invalid_usage"}),
    ([4], {"nccl_invalid_argument"}), ([1, 1], {"nccl_unhandled_cuda_error"}),
])
def test_return_code_chains(tmp_path, codes, kinds):
    log = tmp_path / "rc.log"
    log.write_text("".join(f"node-1:100:200 [0] NCCL INFO init.cc:{10 + i} -> {c}\n" for i, c in enumerate(codes)))
    doc = analyze_paths([str(log)])
    assert {f["kind"] for f in doc["findings"]} == kinds and doc["status"] == "fail"
