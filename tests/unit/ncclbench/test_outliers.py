"""Slow nodes and links found by comparing them with each other (median/MAD), no threshold set."""

from __future__ import annotations

import pytest

from llmdiag.ncclbench import pairwise, verdict
from llmdiag.ncclbench.pairwise import localise, mad, outliers
from llmdiag.probes.nccl import NcclBenchProbe
from llmdiag.config import Config
from llmdiag.context import Context


def test_mad_and_outliers_name_only_the_20x_slower_value():
    values = {"n0": 1.02, "n1": 0.97, "n2": 0.05, "n3": 1.0, "n4": 0.99}
    t = outliers(values, 0.5)
    assert t["low"] == ["n2"] and t["median"] == pytest.approx(0.99)
    assert t["floor"] <= 0.5 * t["median"] and t["mad_log10"] > 0
    assert mad([1.0]) == 0.0 and mad([1.0, 2.0, 3.0]) == pytest.approx(1.4826)


def test_four_noisy_healthy_links_and_one_20x_slower_node():
    """What a busy 4-host test bed measured: healthy links 0.21-0.54 GB/s, the shaped node 0.0048."""
    links = [{"a": a, "b": b, "gbps": g} for a, b, g in ((0, 1, 0.21), (1, 2, 0.0048), (2, 3, 0.0048), (3, 0, 0.54),
                                                         (2, 0, 0.0047), (2, 1, 0.0049))]
    v = localise(["n0", "n1", "n2", "n3"], links, 0.5)
    assert [n["node"] for n in v["slow_nodes"]] == ["n2"] and v["slow_links"] == []


def test_a_noisy_but_healthy_set_has_no_outlier():
    # a busy machine: values spread widely, none an outlier by the robust test
    assert outliers({"n0": 1.0, "n1": 0.55, "n2": 0.8, "n3": 0.45, "n4": 0.7}, 0.5)["low"] == []


def test_link_floor_needs_the_relative_drop_and_the_mad():
    links = [{"a": a, "b": b, "gbps": g} for a, b, g in ((0, 1, 1.0), (1, 2, 0.05), (2, 3, 1.1), (3, 0, 0.9),
                                                         (1, 3, 1.0), (2, 0, 1.05))]
    v = localise(["n0", "n1", "n2", "n3"], links, 0.5)
    assert v["slow_links"] == [{"a": "n1", "b": "n2", "gbps": 0.05}] and v["slow_nodes"] == []
    assert v["threshold_gbps"] <= 0.5 * v["reference_gbps"] and "mad_log10" in v


def _pw(slow_node_links):
    labels = ["node-0", "node-1", "node-2", "node-3"]
    links = [{"a": a, "b": b, "gbps": g} for a, b, g in slow_node_links]
    v = localise(labels, links, 0.5)
    return {"bytes": 1 << 20, "iters": 2, "low_fraction": 0.5, "loopback": False, "notes": [],
            "nodes": [{"node": n, "rank": i} for i, n in enumerate(labels)],
            "links": [dict(lk, a=labels[lk["a"]], b=labels[lk["b"]]) for lk in links], **v}


SLOW2 = ((0, 1, 1.0), (1, 2, 0.04), (2, 3, 0.05), (3, 0, 1.1), (2, 0, 0.045), (2, 1, 0.05))


def _result(pw, expected=None):
    # rank 0's own collective time is the longest (it waited for everyone): per-rank busbw blames it
    row = {"collective": "all_reduce", "size": 1 << 20, "count": 1 << 18, "type": "float", "redop": "sum", "root": -1,
           "out_of_place": {"time_us": 1000.0, "algbw": 1.0, "busbw": 1.5, "wrong": 0},
           "in_place": {"time_us": 1000.0, "algbw": 1.0, "busbw": 1.5, "wrong": 0},
           "rank_time_us": {"out_of_place": [9000.0, 1000.0, 1000.0, 1000.0], "in_place": [9000.0, 1000.0, 1000.0, 1000.0]}}
    result = {"world_size": 4, "nodes": 4, "hosts": ["node-0", "node-1", "node-2", "node-3"], "rows": [row],
              "spec": {"check": True}, "pairwise": pw}
    settings = {"plateau_sizes": 1, "straggler_fraction": 0.5, "expected_busbw_gbps": expected, "min_fraction": 0.9}
    return verdict.build_doc(result, settings)


def test_slowest_rank_line_names_the_node_the_links_name():
    doc = _result(_pw(SLOW2))
    assert doc["straggler"]["host"] == "node-2" and doc["straggler"]["rank"] == 2
    assert doc["straggler"]["median_busbw"] > doc["straggler"]["busbw"]
    assert not [f for f in doc["findings"] if f["check"] == "straggler"]  # pairwise/node names it once
    node = [f for f in doc["findings"] if f["check"] == "pairwise/node"]
    assert [f["node"] for f in node] == ["node-2"] and "median" in node[0]["summary"]


def test_expected_busbw_fails_only_the_named_node():
    doc = _result(_pw(SLOW2), expected=100.0)
    assert [f for f in doc["findings"] if f["check"] == "all_reduce/busbw"][0]["status"] == "fail"
    probe = NcclBenchProbe()
    by_node = {}
    for k in range(4):
        ctx = Context.create(config=Config.default(), env={}, node=f"node-{k}")
        by_node[f"node-{k}"] = [r for r in probe._group_results(ctx, doc, "cluster process group")
                                if r.status.value == "fail"]
    assert {n for n, fails in by_node.items() if fails} == {"node-2"}
    assert {r.check for r in by_node["node-2"]} == {"all_reduce/busbw", "pairwise/node"}


def test_pairwise_module_constant_is_the_usual_cutoff():
    assert pairwise.MAD_CUTOFF == 3.5
