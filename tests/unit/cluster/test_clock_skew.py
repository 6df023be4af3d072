"""Clock skew is judged against the median of every node's clock, not against rank 0's.

Offsets are measured from rank 0 (rank 0's own is 0); a rank 0 whose clock is off makes every
other node's offset large, and only the median tells that rank 0 is the odd one out.
"""

from __future__ import annotations

import time

from llmdiag.cluster import clock
from llmdiag.cluster.merge import build_report
from llmdiag.result import NodeReport

FIVE_MIN_MS = 300_000.0


def test_judge_names_a_skewed_rank_0_not_the_healthy_nodes():
    # rank 0 is 5 min ahead: every other node reads as 5 min behind rank 0
    skews = {"node-0": 0.0, "node-1": -FIVE_MIN_MS + 0.4, "node-2": -FIVE_MIN_MS - 1.2, "node-3": -FIVE_MIN_MS}
    v = clock.judge(skews, 100.0)
    assert [n for n, _ in v.off] == ["node-0"] and not v.split
    assert abs(v.off[0][1] - FIVE_MIN_MS) < 2


def test_judge_healthy_one_off_and_undecidable():
    assert clock.judge({"a": 0.0, "b": 3.0, "c": -4.0}, 100.0).off == ()
    v = clock.judge({"a": 0.0, "b": 2.0, "c": -2500.0, "d": 1.0}, 100.0)
    assert [n for n, _ in v.off] == ["c"] and v.off[0][1] < -2400 and not v.split
    # two nodes, or two camps of equal size: nobody can say which clock is wrong
    two = clock.judge({"a": 0.0, "b": 150.0}, 100.0)
    assert two.split and {n for n, _ in two.off} == {"a", "b"}
    camps = clock.judge({"a": 0.0, "b": 1.0, "c": 9000.0, "d": 9001.0}, 100.0)
    assert camps.split and len(camps.off) == 4
    assert clock.judge({}, 100.0).off == ()


def _doc(rank: int, skew_ms: float, rtt_ms: float = 0.4) -> dict:
    c = {"skew_ms": 0.0, "rtt_ms": 0.0, "reference": True} if rank == 0 else {"skew_ms": skew_ms, "rtt_ms": rtt_ms}
    return NodeReport(node=f"node-{rank}", node_rank=rank, results=(),
                      meta={"world": {"nnodes": 4, "node_rank": rank}, "clock": c}).to_dict()


def _skew_results(docs) -> list[dict]:
    d = build_report(docs, skew_warn_ms=100).to_dict()
    return [r for r in d["results"] if r["check"] == "clock-skew"]


def test_report_warns_rank_0_when_its_clock_is_off():
    docs = [_doc(0, 0)] + [_doc(r, -FIVE_MIN_MS + r) for r in (1, 2, 3)]
    [res] = _skew_results(docs)
    assert res["node"] == "node-0" and res["status"] == "warn"
    assert "node-0's clock is 299998 ms ahead" in res["summary"] and "ahead of the median of the 4 nodes" in res["summary"]


def test_report_two_nodes_apart_names_both_once():
    [res] = _skew_results([_doc(0, 0), _doc(1, 5000.0)])
    assert res["status"] == "warn" and res["node"] == "node-0, node-1" and "cannot be told" in res["summary"]


def test_a_real_time_server_with_a_skewed_clock_blames_rank_0():
    """Rank 0's time server serves a clock 5 min fast; three clients measure it over loopback."""
    with clock.TimeServer("tok", host="127.0.0.1", now=lambda: time.time() + FIVE_MIN_MS / 1000) as ts:
        measured = [clock.measure("127.0.0.1", ts.port, "tok") for _ in range(3)]
    assert all(abs(m["skew_ms"] + FIVE_MIN_MS) < 1000 for m in measured), measured
    docs = [_doc(0, 0)] + [_doc(r, m["skew_ms"], m["rtt_ms"]) for r, m in enumerate(measured, 1)]
    [res] = _skew_results(docs)
    assert res["node"] == "node-0" and "ahead of" in res["summary"]
