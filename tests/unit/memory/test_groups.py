"""Expert states are sharded over the expert data-parallel group, not the dense one (issue 23)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from llmdiag.memory import checks, estimate, groups, models
from llmdiag.memory.plan import Plan

MIX = models.preset("mixtral-8x7b")
GIB = 2**30


def _states(est):
    return sum(est["breakdown"][k] for k in ("weights", "gradients", "master_weights", "optimizer_states"))


def test_group_sizes_as_each_framework_builds_them():
    # 64 GPUs, tp 2, pp 2, cp 2 -> dp 8; ep 4
    base = dict(tp=2, pp=2, cp=2, ep=4, world_size=64)
    mg = groups.of(Plan(framework="megatron", **base))  # folding: edp = tp·cp·dp / (ep·etp), etp = tp
    assert (mg.etp, mg.edp, mg.dense_shard) == (2, 4, 16)
    tt = groups.of(Plan(framework="torch", **base))  # torchtitan: etp 1 -> dp_shard·cp·tp / ep
    assert (tt.etp, tt.edp) == (1, 8)
    ds = groups.of(Plan(framework="deepspeed", **base))  # DeepSpeed-MoE: ep cut from dp(×cp), experts unsliced
    assert (ds.etp, ds.edp, ds.etp_replicates) == (1, 4, True)
    assert groups.of(Plan(framework="torch", etp=2, **base)).edp == 4


def test_mixtral_ep8_on_8_gpus_keeps_expert_states_unsharded():
    """Hand arithmetic: every GPU holds one whole expert per layer (32 × 3·4096·14336 = 5.64 B
    parameters) whose expert data-parallel group is 1, so Megatron's distributed optimizer keeps
    2 + 4 (fp32 main_grad) + 4 + 8 = 18 B for each; only the dense rest is sharded 8 ways."""
    p = Plan(framework="megatron", distributed_optimizer=True, ep=8, world_size=8)
    expert = MIX.layers * MIX.expert_params()
    assert expert == 5_637_144_576
    dense = MIX.total_params() - MIX.layers * MIX.experts * MIX.expert_params()
    est = estimate.estimate(MIX, p, gpu_memory=80 * GIB)
    assert _states(est) == pytest.approx(expert * 18 + dense * (2 + 4 + 12 / 8), rel=1e-6)
    assert _states(est) > 100 * GIB
    assert est["verdict"] == "out-of-memory"


def test_fsdp_with_ep_does_not_divide_experts_by_the_dense_group():
    p = Plan(framework="torch", zero=3, ep=8, world_size=8)
    lines = {x["name"]: x for x in estimate.estimate(MIX, p)["lines"]}
    expert = MIX.layers * MIX.expert_params()
    dense = MIX.total_params() - MIX.layers * MIX.experts * MIX.expert_params()
    assert lines["weights"]["bytes"] == pytest.approx(2 * dense / 8 + 2 * expert, rel=1e-6)
    assert lines["optimizer_states"]["bytes"] == pytest.approx(8 * dense / 8 + 8 * expert, rel=1e-6)
    # with ep 1 FSDP does shard all experts 8 ways
    one = {x["name"]: x for x in estimate.estimate(MIX, p.replace(ep=1))["lines"]}
    assert one["optimizer_states"]["bytes"] == pytest.approx(8 * MIX.total_params() / 8, rel=1e-6)


@pytest.mark.parametrize("spec, kw", [
    # Megatron-LM megatron/core/transformer/moe/README.md, "Reference Best Parallel Mapping" (MCore v0.8,
    # 8×H100 80GB nodes, seq 4096, MBS 1, GBS 256, BF16, distributed optimizer): these trained.
    (MIX, dict(world_size=64, tp=1, ep=8, pp=4, vpp=8)),
    (models.ModelSpec("mixtral-8x22b", 56, 6144, 48, 32768, 16384, kv_heads=8, experts=8, top_k=2),
     dict(world_size=128, tp=4, ep=2, pp=8, vpp=7)),
])
def test_published_megatron_moe_mappings_are_not_called_out_of_memory(spec, kw):
    p = Plan(framework="megatron", distributed_optimizer=True, sequence_parallel=True, micro_batch=1,
             global_batch=256, seq_len=4096, **kw)
    assert checks.check_plan(spec, p) == []
    est = estimate.estimate(spec, p, gpu_memory=80 * GIB)
    assert est["verdict"] != "out-of-memory", est["breakdown"]


def test_expert_layout_rules_follow_the_framework():
    # tp 2 on 8 GPUs: dp 4. DeepSpeed cuts ep from dp (8 does not divide 4); Megatron's folding
    # needs ep × etp (8 × 2) to divide tp·cp·dp = 8; with etp 1 it does.
    assert "experts-ep" in {i.check for i in checks.check_plan(MIX, Plan(framework="deepspeed", tp=2, ep=8, world_size=8))}
    assert "experts-ep" in {i.check for i in checks.check_plan(MIX, Plan(framework="megatron", tp=2, ep=8, world_size=8))}
    assert checks.check_plan(MIX, Plan(framework="megatron", tp=2, ep=8, etp=1, world_size=8)) == []


def test_cli_mixtral_ep8_distributed_optimizer_is_out_of_memory():
    r = subprocess.run([sys.executable, "-m", "llmdiag", "estimate-memory", "--model", "mixtral-8x7b", "--world-size", "8",
                        "--ep", "8", "--framework", "megatron", "--distributed-optimizer", "--gpu-memory", "80GiB",
                        "--format", "json"], capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "out-of-memory"
    w = next(x for x in doc["lines"] if x["name"] == "optimizer_states")
    assert w["inputs"]["expert_shard_group"] == 1 and w["inputs"]["shard_group"] == 8
