"""Races between ranks in real runs (data/races/README.md): what the log shows first is not always what failed
first."""

from __future__ import annotations

from pathlib import Path

from llmdiag.logs import analyze_paths

DATA = Path(__file__).parent / "data" / "races"


def test_a_root_cause_that_only_lost_its_peer_is_not_the_first_failing_rank():
    """torchrun names rank 0 (SIGABRT, the first to exit) but rank 0's own error is gloo's "Connection closed by
    peer"; rank 1 raised: rank 1 failed first, its exception is the top root cause, rank 0's abort a consequence."""
    doc = analyze_paths([str(DATA / "root_cause_lost_its_peer.log")])
    assert doc["first_failing_rank"] == 1
    top = doc["root_causes"][0]
    assert (top["kind"], top["rank"]) == ("python_exception", 1)
    assert "injected failure" in top["summary"]
    cf = next(f for f in doc["findings"] if f["kind"] == "child_failed")
    assert cf["rank"] == 0 and cf["facts"]["root_cause_only_lost_its_peer"] is True
    abort = next(f for f in doc["findings"] if f["kind"] == "sigabrt")
    assert abort["rank"] == 0 and abort["facts"]["listed_beside_root_cause"] is True


def test_the_usual_order_keeps_torchruns_root_cause(tmp_path):
    """The same run without the race (rank 1 exits first with code 1): torchrun's Root Cause stands."""
    text = (DATA / "root_cause_lost_its_peer.log").read_text().split("terminate called")[0]
    text += ("Root Cause (first observed failure):\n[0]:\n  time      : 2026-12-07_00:40:09\n  host      : localhost\n"
             "  rank      : 1 (local_rank: 1)\n  exitcode  : 1 (pid: 7196)\n  error_file: <N/A>\n"
             "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
             "======================================================\n")
    log = tmp_path / "train.log"
    log.write_text("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n".join(["", text]))
    doc = analyze_paths([str(log)])
    assert doc["first_failing_rank"] == 1
    assert not any(f["facts"].get("root_cause_only_lost_its_peer") for f in doc["findings"])


def test_a_root_cause_that_only_lost_its_peer_beside_a_rank_that_died_silently():
    """The live matrix's SIGABRT case in CI (the last 2500 characters of its log): rank 1 aborts itself and prints
    nothing; rank 0 raises gloo's "Connection closed by peer", aborts on its way out ("terminate called without an
    active exception") and exits first, so torchrun's Root Cause is rank 0. The rank that died of its own is the
    one of the failure table that raised nothing: rank 1."""
    doc = analyze_paths([str(DATA / "root_cause_lost_its_peer_signal.log")])
    assert doc["first_failing_rank"] == 1
    cf = next(f for f in doc["findings"] if f["kind"] == "child_failed")
    assert cf["rank"] == 0 and cf["facts"]["root_cause_only_lost_its_peer"] is True
