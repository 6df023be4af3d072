"""Pairwise localisation from given link numbers: which node, which link, what schedule."""

import pytest

from llmdiag.ncclbench.pairwise import localise, ring_pairs, sample_pairs

LABELS = ["n0", "n1", "n2", "n3"]


def links(*triples):
    return [{"a": a, "b": b, "gbps": g} for a, b, g in triples]


def test_ring_then_samples_schedule():
    assert ring_pairs(1) == [] and ring_pairs(2) == [(0, 1)]
    assert ring_pairs(4) == [(0, 1), (1, 2), (2, 3), (3, 0)]
    done = {frozenset(p) for p in ring_pairs(4)}
    # node 2 is the only suspect: its new partner is a healthy node it has not met (node 0)
    assert sample_pairs(4, [2], done, 2) == [(2, 0)]


def test_slow_node_named_not_its_links():
    v = localise(LABELS, links((0, 1, 10.0), (1, 2, 0.5), (2, 3, 0.4), (3, 0, 9.0), (2, 0, 0.45)), 0.5)
    assert [n["node"] for n in v["slow_nodes"]] == ["n2"]
    assert v["slow_links"] == []  # its links are explained by the node
    assert v["reference_gbps"] == pytest.approx(9.5)  # median of the nodes' best links: 10, 10, 0.5, 9
    assert v["slow_nodes"][0]["median_gbps"] == pytest.approx(0.45)


def test_slow_link_between_healthy_nodes():
    v = localise(LABELS, links((0, 1, 10.0), (1, 2, 1.0), (2, 3, 10.0), (3, 0, 10.0), (1, 3, 9.5), (2, 0, 9.8)), 0.5)
    assert v["slow_nodes"] == []
    assert v["slow_links"] == [{"a": "n1", "b": "n2", "gbps": 1.0}]


def test_noise_within_the_fraction_is_not_slow():
    v = localise(LABELS, links((0, 1, 10.0), (1, 2, 6.0), (2, 3, 8.0), (3, 0, 7.0)), 0.5)
    assert v["slow_nodes"] == [] and v["slow_links"] == []


def test_loopback_slow_link_warns_instead_of_failing():
    from llmdiag.ncclbench import verdict

    pw = {"nodes": [{"node": "h:rank0"}, {"node": "h:rank1"}, {"node": "h:rank2"}], "links": [],
          **localise(["h:rank0", "h:rank1", "h:rank2"], links((0, 1, 1.0), (1, 2, 1.0), (2, 0, 0.2)), 0.5)}
    doc = {"collectives": [], "spec": {"check": False}, "straggler": None}
    assert [f["status"] for f in verdict.findings(dict(doc, pairwise=dict(pw, loopback=True)), None, 0.9)] == ["warn"]
    assert [f["status"] for f in verdict.findings(dict(doc, pairwise=dict(pw, loopback=False)), None, 0.9)] == ["fail"]
