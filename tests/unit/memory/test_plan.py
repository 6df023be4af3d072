"""Plan checks, plan readers and the estimate's pipeline / sharding / verdict logic."""

from __future__ import annotations

import json

import pytest

from llmdiag.errors import UsageError
from llmdiag.memory import checks, estimate, models, readers
from llmdiag.memory.plan import Plan, parse_size

L7 = models.preset("llama2-7b")


def by_check(m, p):
    return {i.check: i for i in checks.check_plan(m, p)}


def test_valid_plan_has_no_issues():
    assert checks.check_plan(L7, Plan(tp=2, pp=4, world_size=64, global_batch=512, micro_batch=1)) == []


@pytest.mark.parametrize("kw, check, words", [
    (dict(tp=2, pp=2, dp=3, world_size=16), "world-size", ["tp(2)", "dp(3)", "16"]),
    (dict(tp=16, world_size=16), "tp-within-node", ["tp(16)", "(8)"]),
    (dict(tp=1, pp=3, world_size=3), "layers-pp", ["layers (32)", "pp (3)"]),
    (dict(pp=4, vpp=3, world_size=4), "layers-pp", ["virtual stages (3)", "12"]),
    (dict(tp=3, world_size=3, gpus_per_node=3), "heads-tp", ["heads (32)", "tp (3)"]),
    (dict(world_size=8, global_batch=100, micro_batch=2), "global-batch", ["global batch (100)", "16", "use a global batch of 96 or 112"]),
    (dict(cp=2, world_size=2, seq_len=4098), "seq-cp", ["4098", "2·cp (4)"]),
    (dict(cp=3, world_size=3, seq_len=4096), "seq-cp", ["4096", "cp (3)"]),
    (dict(ep=3, world_size=8), "experts-ep", ["ep (3)"]),
])
def test_each_violation_names_the_numbers(kw, check, words):
    issues = by_check(L7, Plan(**kw))
    assert check in issues, issues
    text = issues[check].message + " " + issues[check].fix
    for w in words:
        assert w in text


def test_gqa_and_moe_rules():
    l70 = models.preset("llama2-70b")  # 8 KV groups
    # Megatron asserts num_query_groups % tp == 0: no replication of KV heads beyond the groups
    assert "kv-groups-tp" in by_check(l70, Plan(tp=16, world_size=16, gpus_per_node=16))
    assert "kv-groups-tp" not in by_check(l70, Plan(tp=8, world_size=16))
    assert "kv-groups-tp" in by_check(l70, Plan(tp=3, world_size=3, gpus_per_node=3))
    mix = models.preset("mixtral-8x7b")
    assert "experts-ep" in by_check(mix, Plan(ep=3, world_size=24))
    assert "experts-ep" not in by_check(mix, Plan(ep=8, world_size=8))


def test_dp_auto_and_sizes():
    assert Plan(tp=2, pp=2, world_size=32).dp_size == 8
    with pytest.raises(UsageError):
        Plan(dp="auto")
    with pytest.raises(UsageError):
        Plan(zero=4, dp=1)
    assert parse_size("80GiB") == 80 * 2**30 and parse_size("40 GB") == 40 * 10**9 and parse_size("1024B") == 1024
    with pytest.raises(ValueError):
        parse_size("lots")


def test_deepspeed_and_megatron_readers(tmp_path):
    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps({"train_micro_batch_size_per_gpu": 4, "train_batch_size": 256, "bf16": {"enabled": True},
                              "zero_optimization": {"stage": 2, "reduce_bucket_size": 5e8},
                              "optimizer": {"type": "AdamW"}, "gradient_accumulation_steps": "auto"}))
    got, warnings = readers.from_deepspeed(ds)
    assert got == {"framework": "deepspeed", "deepspeed_engine": True, "zero": 2, "bucket_mb": 1000.0, "micro_batch": 4,
                   "global_batch": 256, "precision": "bf16", "optimizer": "adamw"}
    assert warnings == []
    y = tmp_path / "m.yaml"
    y.write_text("parallel_policy:\n  tensor_model_parallel_size: 8\n  pipeline_model_parallel_size: 4\n"
                 "  data_parallel_size: auto\n  sequence_parallel: true\nrecompute_granularity: selective\n")
    got, warnings = readers.from_megatron_yaml(y)
    assert got == {"framework": "megatron", "tp": 8, "pp": 4, "dp": "auto", "sequence_parallel": True,
                   "recompute": "selective"}
    assert warnings == []
    y.write_text("parallel_policy: [1, 2")
    with pytest.raises(UsageError):
        readers.from_megatron_yaml(y)


def test_hf_config(tmp_path):
    f = tmp_path / "config.json"
    f.write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
                             "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
                             "tie_word_embeddings": False}))
    assert models.from_hf_config(f).total_params() == models.preset("llama3-8b").total_params()
    f.write_text("{}")
    with pytest.raises(UsageError, match="lacks"):
        models.from_hf_config(f)


def test_worst_stage_is_last_with_large_vocab_and_first_otherwise():
    l3 = models.preset("llama3-8b")
    p = Plan(pp=4, world_size=4, seq_len=8192, micro_batch=4, recompute="full", global_batch=4)
    est = estimate.estimate(l3, p)
    assert est["worst_stage"] == 3 and est["breakdown"]["logits"] == 12 * 8192 * 4 * 128256  # fp32-upcast CE
    est = estimate.estimate(l3, p.replace(framework="megatron"))
    assert est["worst_stage"] == 3 and est["breakdown"]["logits"] == 6 * 8192 * 4 * 128256  # vocab-parallel CE
    est = estimate.estimate(l3, p.replace(recompute="none", global_batch=64))
    assert est["worst_stage"] == 0 and est["breakdown"]["logits"] == 0


def test_pipeline_in_flight_and_interleaving():
    p = Plan(pp=4, world_size=4, global_batch=64)
    assert estimate.in_flight(p, 0) == 4 and estimate.in_flight(p, 3) == 1
    assert estimate.in_flight(p.replace(global_batch=2), 0) == 2  # fewer micro batches than stages
    assert estimate.in_flight(p.replace(vpp=2), 0) == pytest.approx(4 * (1 + 3 / 8))


def test_expert_parallel_shards_experts():
    mix = models.preset("mixtral-8x7b")
    one = estimate.stage_params(mix, None, Plan(dp=1), 0)
    eight = estimate.stage_params(mix, None, Plan(ep=8, dp=8), 0)
    assert one - eight == pytest.approx(mix.layers * 7 * mix.expert_params())


def test_oom_only_when_optimizer_state_arrives():
    p = Plan(dp=1, seq_len=512, recompute="full")
    b = estimate.estimate(L7, p)["breakdown"]
    gpu = b["total"] - b["optimizer_states"] // 2  # step 1 fits, the moments do not
    v = estimate.verdict(b, gpu)
    assert v["verdict"] == "out-of-memory" and "step 2" in v["oom_when"]
    assert estimate.verdict(b, b["total"] - 2 * b["optimizer_states"])["oom_when"] == "step 1"
    assert estimate.verdict(b, int(b["total"] / 0.95))["verdict"] == "tight"


def test_suggestions_keep_the_gpu_count_and_rank_by_cost():
    from llmdiag.memory import search

    gpu = 40 * 2**30
    p = Plan(dp=8, seq_len=4096)  # no world size: the 8 GPUs stay 8
    tips = search.suggest(models.preset("llama2-13b"), p, gpu)
    assert tips
    costs = [t["expected_cost"] for t in tips]
    assert costs == sorted(costs)
    for t in tips:
        q = t["plan"]
        assert q["tp"] * q["pp"] * q["cp"] * q["dp_size"] == 8
        assert t["total"] <= estimate.FITS_FRACTION * gpu
