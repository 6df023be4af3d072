"""Reading what people run: HF config.json of each family, DeepSpeed JSON, NeMo YAML, torchtitan
TOML (fixtures shaped like the published files), and the features they switch on."""

from __future__ import annotations

import json
import subprocess

import pytest

from llmdiag.errors import UsageError
from llmdiag.memory import estimate, models, readers
from llmdiag.memory.plan import Plan, parse_size
from tests.conftest import REPO, cli_env, llmdiag_argv

FIX = REPO / "tests" / "fixtures" / "memory"
GIB = 2**30


def run(*args):
    return subprocess.run(llmdiag_argv("estimate-memory", *args), capture_output=True, text=True, env=cli_env(), timeout=120)


# Published parameter counts (model cards / safetensors metadata; DeepSeek-V3 without its MTP layer).
@pytest.mark.parametrize("name, params", [
    ("deepseek-v3.json", 671_026_419_200), ("gemma-2-2b.json", 2_614_341_888), ("mistral-7b.json", 7_241_732_096),
    ("qwen1.5-moe-a2.7b.json", 14_315_784_192), ("qwen2-7b.json", 7_615_616_512), ("phi-2.json", 2_779_683_840),
])
def test_hf_config_families_count_exactly(name, params):
    assert models.from_hf_config(FIX / name).total_params() == params


def test_deepseek_v3_is_mla_with_shared_and_dense_first_experts():
    m, warnings = models.read_hf_config(FIX / "deepseek-v3.json")
    assert (m.experts, m.top_k, m.shared_experts, m.dense_layers, m.mla) == (256, 8, 1, 3, True)
    assert round(m.active_params() / 1e9, 1) == 37.6  # "37B activated"
    assert warnings == ["config.json key 'num_nextn_predict_layers' read but not used by the estimate"]
    # dense-first layers hold no experts: stage 0 of pp=61 is one dense layer
    plan = Plan(pp=61, dp=1, ep=1)
    assert estimate.stage_params(m, None, plan, 1) < estimate.stage_params(m, None, plan, 5)


def test_gemma2_head_dim_and_gemma3_nested_text_config():
    g2 = models.from_hf_config(FIX / "gemma-2-2b.json")
    assert g2.head_dim == 256 and g2.q_dim == 2048 != g2.hidden and g2.tied
    g3, warnings = models.read_hf_config(FIX / "gemma-3-4b.json")
    assert g3.layers == 34 and g3.qk_norm
    assert any("vision_config" in w for w in warnings)


def test_sizes():
    assert parse_size("80GiB") == parse_size("80G") == 80 * GIB
    assert parse_size("80GB") == 80 * 10**9 and parse_size("2TB") == 2 * 10**12 and parse_size("1TiB") == 2**40
    with pytest.raises(ValueError, match="no unit"):
        parse_size("80")
    with pytest.raises(ValueError, match="unknown unit"):
        parse_size("80 furlongs")


def test_deepspeed_offload_and_buckets():
    fields, warnings = readers.from_deepspeed(FIX / "ds_zero3_offload.json")
    assert fields["zero"] == 3 and fields["offload_params"] and fields["offload_optimizer"] and fields["offload_grads"]
    assert fields["ds_overlap_comm"] and fields["precision"] == "bf16" and fields["global_batch"] == 32
    named = sorted(w.split("'")[1] for w in warnings)
    assert named == ["activation_checkpointing.partition_activations", "elasticity.enabled",
                     "zero_optimization.stage3_max_live_parameters", "zero_optimization.stage3_max_reuse_distance"]
    assert "recompute" not in fields  # an activation_checkpointing block does not mean the model recomputes
    m = models.preset("llama2-70b")
    on = estimate.estimate(m, Plan(dp=8, **fields))["breakdown"]
    off = estimate.estimate(m, Plan(dp=8, zero=3, framework="deepspeed", micro_batch=1))["breakdown"]
    assert on["optimizer_states"] == on["master_weights"] == on["weights"] == 0
    assert on["total"] < off["total"] / 2
    fields, _ = readers.from_deepspeed(FIX / "ds_zero2_overlap.json")
    b = estimate.estimate(None, Plan(dp=8, **fields), params=7e9)
    lines = {x["name"]: x["bytes"] for x in b["lines"]}
    assert lines["comm_buckets"] == 9 * 10**9  # 4.5 × (5e8 + 5e8) × 2 B, transformers' DeepSpeed docs


def test_nemo_yaml_reads_seq_recompute_and_devices():
    fields, warnings = readers.from_megatron_yaml(FIX / "nemo_llama3_70b.yaml")
    assert fields["seq_len"] == 8192 and fields["world_size"] == 32 and fields["recompute"] == "full"
    assert fields["recompute_layers"] == 2 and fields["distributed_optimizer"] and fields["precision"] == "bf16"
    assert (fields["tp"], fields["pp"], fields["vpp"]) == (4, 4, 5)
    named = " ".join(warnings)
    for key in ("model.num_layers", "model.hidden_size", "model.num_query_groups"):
        assert key in named  # model dimensions come from --model, and the user is told


def test_torchtitan_toml():
    fields, model, warnings = readers.from_torchtitan_toml(FIX / "torchtitan_llama3_8b.toml")
    assert model == "llama3-8b" and fields["zero"] == 3 and fields["dp"] == "auto"
    assert fields["recompute"] == "sac" and fields["seq_len"] == 8192 and fields["fused_norm"] is False
    assert not [w for w in warnings if "parallel" in w]
    p = run("--torchtitan-toml", str(FIX / "torchtitan_llama3_8b.toml"), "--world-size", "8", "--gpu-memory", "96GB",
            "--format", "json")
    doc = json.loads(p.stdout)
    assert doc["model"]["name"] == "llama3-8b" and doc["plan"]["recompute"] == "sac" and doc["plan"]["dp_size"] == 8
    assert doc["verdict"] in ("fits", "tight")


def test_bad_config_files_are_one_line_errors(tmp_path):
    bad = tmp_path / "t.toml"
    bad.write_text("[activation_checkpoint]\nmode = 'sometimes'\n")
    with pytest.raises(UsageError, match="mode"):
        readers.from_torchtitan_toml(bad)
    p = run("--model", "gpt2", "--torchtitan-toml", str(bad))
    assert p.returncode == 2 and "Traceback" not in p.stderr


def test_features_change_the_estimate_the_right_way():
    m = models.preset("llama3-8b")
    base = Plan(dp=1, seq_len=4096)
    tot = lambda **kw: estimate.estimate(m, base.replace(**kw))["breakdown"]["total"]  # noqa: E731
    assert tot(recompute="full") < tot(recompute="sac") < tot(recompute="none")
    assert tot(recompute="full", recompute_interval=2) > tot(recompute="full")
    assert tot(lora_rank=8, base_quant="nf4") < tot(lora_rank=8) < tot()
    assert tot(fp8="torchao") < tot()  # 8-bit saved inputs, weights cast per matmul
    te = estimate.estimate(m, base.replace(fp8="te", framework="megatron"))["lines"]
    cache = {x["name"]: x for x in te}["gathered_params"]
    assert cache["bytes"] == 2 * 32 * m.attention_params() + 2 * 32 * m.dense_mlp_params()  # FP8 weight + transpose
    assert tot(loss="fused") < tot(loss="chunked") < tot(loss="upcast")
    assert tot(optimizer="adam8bit") < tot()
    assert tot(optimizer_in_backward=True, recompute="full") < tot(recompute="full")  # no step with all gradients
    assert tot(offload_activations=True) < tot()
    # with flash attention, Megatron's selective recompute has nothing left to save
    assert tot(framework="megatron", recompute="selective") > 0.999 * tot(framework="megatron")
    peak = estimate.estimate(m, base.replace(optimizer_impl="foreach", recompute="full"))["peak"]
    assert peak["phase"] == "optimizer step" and peak["allocated"] < peak["reserved"] < peak["device"]


def test_uneven_pipeline_split_has_a_per_stage_table():
    m = models.preset("llama3-405b")  # 126 layers over 8 stages, as torchtitan runs it
    p = run("--model", "llama3-405b", "--pp", "8", "--tp", "8", "--world-size", "512", "--zero", "3",
            "--recompute", "full", "--seq-len", "8192", "--gpu-memory", "80GiB", "--format", "json")
    doc = json.loads(p.stdout)
    assert p.returncode in (0, 1), p.stderr
    assert [s["layers"] for s in doc["stages"]] == [15, 16, 16, 16, 16, 16, 16, 15]
    assert {c["check"]: c["severity"] for c in doc["plan_checks"]}["layers-pp"] == "warn"
    assert sum(s["layers"] for s in doc["stages"]) == m.layers
    p = run("--model", "llama3-405b", "--pp", "8", "--pp-layers", "16,16,16,16,16,16,16,16", "--world-size", "8",
            "--gpu-memory", "80GiB")
    assert p.returncode == 2 and "holds 128 layers, the model has 126" in p.stderr


def test_mla_and_shared_experts_from_flags():
    p = run("--layers", "61", "--hidden", "7168", "--heads", "128", "--vocab", "129280", "--ffn", "2048",
            "--experts", "256", "--top-k", "8", "--shared-experts", "1", "--dense-layers", "3", "--dense-ffn", "18432",
            "--q-lora-rank", "1536", "--kv-lora-rank", "512", "--qk-nope-dim", "128", "--qk-rope-dim", "64",
            "--v-head-dim", "128", "--world-size", "256", "--ep", "8", "--gpu-memory", "80GiB", "--format", "json")
    doc = json.loads(p.stdout)
    v3 = models.from_hf_config(FIX / "deepseek-v3.json")
    assert doc["model"]["params"] == v3.total_params() - 58 * 256  # all but the router's score-correction bias
