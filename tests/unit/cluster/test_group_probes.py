"""Group probes: one registry property says which probes run across the nodes in cluster mode.

The smoke run is one (it was a name in a list that did not match its name, so it ran locally on
each node); a third-party probe becomes one by ``group = True``. In the group, findings about a
rank (a diverged replica, a slow rank) are reported by that rank's node only.
"""

from __future__ import annotations

import pytest

from llmdiag.cluster.agent import Agent, AgentOptions
from llmdiag.cluster.world import World
from llmdiag.config import Config
from llmdiag.context import Context
from llmdiag.errors import PluginError
from llmdiag.probe import BaseProbe, Requirement
from llmdiag.probes.smoke import SmokeTrainProbe
from llmdiag.registry import builtin_probes, is_group_probe, validate
from llmdiag.result import Status
from tests.conftest import cli_env


class _Collective(BaseProbe):
    name = "my-allgather"
    description = "a plugin that runs its own collective"
    group = True

    def run(self, ctx):
        return []


class _Local(BaseProbe):
    name = "my-local"
    description = "a plugin that checks this node"

    def run(self, ctx):
        return []


class _NeedsJob(BaseProbe):
    name = "my-job"
    description = "meaningless outside a distributed job"
    requires = frozenset({Requirement.DISTRIBUTED})

    def run(self, ctx):
        return []


def test_the_builtin_group_probes_are_the_collective_ones():
    probes, _ = builtin_probes()
    assert sorted(p.name for p in probes if is_group_probe(p)) == ["nccl", "smoke-train"]


def test_a_plugin_is_a_group_probe_by_its_property_not_its_name():
    assert is_group_probe(_Collective()) and is_group_probe(_NeedsJob()) and not is_group_probe(_Local())

    class Bad(_Local):
        group = "yes"

    with pytest.raises(PluginError, match="group must be true or false"):
        validate(Bad(), "bad")


def test_the_agent_runs_group_probes_after_the_stages_and_the_rest_locally():
    world = World(node_rank=0, nnodes=2, master_addr="127.0.0.1", master_port=29500)
    ctx = Context.create(config=Config.default(), env=cli_env())
    probes = [_Local(), _Collective(), SmokeTrainProbe(), _NeedsJob()]
    agent = Agent(world, ctx, probes, AgentOptions())
    assert [p.name for p in agent.local_probes] == ["my-local"]
    assert [p.name for p in agent.group_probes] == ["my-allgather", "smoke-train", "my-job"]


def _ranks(sums, step_ms=None):
    return [{"rank": r, "host": f"node-{r}", "losses": {"1": 5.0, "2": 4.0}, "checksum": c,
             "step_ms": (step_ms or {}).get(r, [50, 10, 10])} for r, c in enumerate(sums)]


def _judge(ranks, me):
    """``me``: this node's rank, or its set of ranks (several ranks per node)."""
    ctx = Context.create(config=Config.default(), env=cli_env())
    mine = {me} if isinstance(me, int) else set(me)
    return {r.check: r for r in SmokeTrainProbe()._judge(ctx, ranks, "cluster process group", 1.5, me=mine)}


def test_with_two_ranks_per_node_the_node_of_a_diverged_rank_reports_it():
    ranks = _ranks(["a", "a", "a", "b"])  # node A holds ranks 0-1, node B ranks 2-3; rank 3 diverged
    odd = _judge(ranks, me={2, 3})["params"]
    assert odd.status == Status.FAIL and "this node's replica (rank 3 (node-3))" in odd.summary, odd.summary
    ok = _judge(ranks, me={0, 1})["params"]
    assert ok.status == Status.PASS and "rank 3 (node-3) differ" in ok.summary, ok.summary


def test_in_the_group_a_diverged_replica_is_its_own_nodes_finding():
    ranks = _ranks(["a", "a", "b", "a"])
    odd = _judge(ranks, me=2)["params"]
    assert odd.status == Status.FAIL and odd.runbook == "params-diverged"
    assert "this node's replica (rank 2 (node-2)) vs the 3 other rank(s)" in odd.summary
    for me in (0, 1, 3):
        ok = _judge(ranks, me=me)["params"]
        assert ok.status == Status.PASS and "rank 2 (node-2) differ" in ok.summary, ok.summary


def test_a_diverged_rank_0_is_blamed_not_the_majority():
    ranks = _ranks(["b", "a", "a"])
    assert _judge(ranks, me=0)["params"].status == Status.FAIL
    assert _judge(ranks, me=1)["params"].status == Status.PASS


def test_without_a_majority_every_rank_reports_the_divergence():
    ranks = _ranks(["a", "b"])
    for me in (0, 1):
        r = _judge(ranks, me=me)["params"]
        assert r.status == Status.FAIL and "no majority" in r.summary


def test_in_the_group_a_slow_rank_is_its_own_nodes_finding():
    ranks = _ranks(["a", "a", "a"], step_ms={1: [50, 90, 95]})
    slow = _judge(ranks, me=1)["step-time"]
    assert slow.status == Status.WARN and slow.summary.startswith("rank 1 (node-1) is 9.2x the median rank's time in 2 of 2 steps")
    other = _judge(ranks, me=0)["step-time"]
    assert other.status == Status.PASS and "rank 1 (node-1) slower" in other.summary


def test_smoke_inject_is_checked_as_the_trainer_checks_it():
    from llmdiag.errors import ConfigError

    Config.from_mapping({"smoke": {"inject": ["corrupt@2:rank=1", "slow@2:rank=0:factor=4"]}})
    with pytest.raises(ConfigError, match="KIND@STEP"):
        Config.from_mapping({"smoke": {"inject": ["flip@2"]}})


@pytest.mark.distributed
def test_a_corrupted_replica_in_a_real_local_run_is_found():
    """The corrupt fault changes one weight of rank 1 after a step: the checksums must differ."""
    # timeout_s: the 90 s default cut the run at load 12 (no "params" result); the bound is not under test here
    cfg = Config.from_mapping({"smoke": {"enabled": True, "steps": 4, "nproc": 2, "straggler_factor": 50.0,
                                         "timeout_s": 600, "inject": ["corrupt@2:rank=1"]}})
    ctx = Context.create(config=cfg, env=cli_env())
    results = {r.check: r for r in SmokeTrainProbe().run(ctx)}
    assert "params" in results, {k: r.summary for k, r in results.items()}
    assert results["params"].status == Status.FAIL, results["params"].summary
    assert len(set(results["params"].data["checksums"].values())) == 2
