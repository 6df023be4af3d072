"""Rank 0 lifts its soft open-file limit to what the store of N nodes needs (2 per node)."""

from __future__ import annotations

import multiprocessing as mp
import resource

import pytest


def _child(q, soft, hard, nnodes):
    from llmdiag.cluster.agent import Agent, AgentOptions
    from llmdiag.cluster.world import World

    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    class Ctx:
        node = "node-0"

    a = Agent(World(node_rank=0, nnodes=nnodes, master_addr="127.0.0.1", master_port=1), Ctx(), [], AgentOptions())
    a._raise_fd_limit()
    q.put((resource.getrlimit(resource.RLIMIT_NOFILE)[0], [(r.check, r.status.value, r.runbook) for r in a.results]))


def _run(soft, hard, nnodes):
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q, soft, hard, nnodes))
    p.start()
    out = q.get(timeout=30)
    p.join(10)
    return out


def test_soft_limit_raised_within_the_hard_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 4000:
        pytest.skip(f"the hard open-files limit here is {hard}; the test needs 4000")
    got, results = _run(256, 4000, 1000)
    assert got == 2 * 1000 + 256 and results == []


def test_hard_limit_too_low_is_a_warning_with_a_runbook():
    got, results = _run(256, 600, 1000)
    assert got == 600
    assert results == [("store-fd-limit", "warn", "nofile-low")]


def test_local_probes_that_did_not_finish_are_findings_not_a_silent_gap():
    """A starved node whose local probes overrun the join keeps what finished and names the rest."""
    from llmdiag.cluster.agent import Agent, AgentOptions
    from llmdiag.cluster.world import World
    from llmdiag.result import Result, Status

    class Ctx:
        node = "node-2"

    class P:
        def __init__(self, name):
            self.name = name

    a = Agent(World(node_rank=2, nnodes=4, master_addr="127.0.0.1", master_port=1), Ctx(), [],
              AgentOptions(timeout_s=30))
    ok = Result(probe="software", check="torch", node="node-2", status=Status.PASS, summary="torch 2.13.0")
    rep = a._unfinished_report([P("software"), P("system")], {"software": [ok]})
    assert rep.node_rank == 2
    assert [(r.probe, r.check, r.status, r.runbook) for r in rep.results] == [
        ("software", "torch", Status.PASS, None), ("system", "probe", Status.FAIL, "probe-timeout")]
    assert "did not finish" in rep.results[1].summary and "30 s" in rep.results[1].summary
