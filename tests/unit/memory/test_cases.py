"""The published and measured cases of ../shared/memory/cases-dev.json, reproduced by the estimator.

Each case is mapped onto estimator inputs by the meaning of its fields (llmdiag.memory.cases),
never by a per-case number; the test holds each expressed case to its tolerance hint (analytic
cases to print rounding). KNOWN_GAPS lists the cases that are outside today, with the reason;
they are strict xfails, so a case that starts passing must be moved out of the list.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from llmdiag.memory import cases
from tests.conftest import SHARED

CASES_FILE = Path(os.environ.get("LLMDIAG_MEMORY_CASES", SHARED / "memory" / "cases-dev.json"))
BASE = cases.load(CASES_FILE) if CASES_FILE.is_file() else []
ALL = BASE + [v for c in BASE for v in cases.related_variants(c)]  # + measured neighbours under "related"

KNOWN_GAPS = {
    "megatron_toy_weight_optimizer": "physical count of stage 0 is 3456 params (norms replicated, the final "
                                     "norm on the last stage); Megatron's formula spreads the final norm over "
                                     "stages and divides norms by tp (3400): 31104 vs 30600 bytes, +1.6 %",
    "torchtune_llama31_8b_qlora_1x4090": "estimated at the 2048-token maximum; the README's run trains on "
                                         "alpaca samples mostly far shorter than max_seq_len (+20 %)",
}


@pytest.mark.skipif(not ALL, reason=f"no cases file at {CASES_FILE}")
@pytest.mark.parametrize("case", ALL, ids=lambda c: c["id"])
def test_case_within_its_tolerance(case):
    try:
        r = cases.evaluate(case)
    except cases.NotExpressed as exc:
        pytest.skip(f"not a training-step quantity: {exc}")
    if case["id"] in KNOWN_GAPS:
        pytest.xfail(KNOWN_GAPS[case["id"]]) if not r["ok"] else pytest.fail("known gap now passes: update KNOWN_GAPS")
    assert r["ok"], r
    if r["error"] is not None and not case["kind"].startswith("analytic"):
        assert r["verdict"] != "out-of-memory", "a run that ran is called out-of-memory"


def test_most_cases_are_expressed():
    if not ALL:
        pytest.skip("no cases file")
    expressed = []
    for c in ALL:
        try:
            expressed.append(cases.evaluate(c))
        except cases.NotExpressed:
            pass
    assert len(expressed) >= len(ALL) - 1
    measured = [r for r in expressed if r["error"] is not None and not r["kind"].startswith("analytic")]
    within = sum(abs(r["error"]) <= 0.15 for r in measured)
    assert within >= 0.8 * len(measured), [(r["id"], round(r["error"], 3)) for r in measured]


def test_mapping_reads_names_and_refuses_what_it_cannot_express():
    case = {"id": "named", "kind": "measured", "source": "pytorch/torchtitan benchmarks",
            "model": {"name": "Llama 3.1 8B"}, "parallel": {"fsdp": 8, "gpus": "8x H100 80GB"},
            "training": {"local_batch": 1, "seq_len": 8192, "recompute": "selective (op)"},
            "quantity": "peak active GPU memory (max over ranks)", "value": 40.0, "unit": "GiB",
            "tolerance_hint": "±15%"}
    ex = cases.express(case)
    assert ex.model.name == "llama3-8b" and ex.plan.zero == 3 and ex.plan.recompute == "sac"
    assert ex.measure == "allocated" and ex.plan.seq_len == 8192 and ex.gpu_memory == 80 * 2**30
    case["training"]["recompute"] = "selective, every 2 layers"
    assert (cases.express(case).plan.recompute, cases.express(case).plan.recompute_interval) == ("full", 2)
    with pytest.raises(cases.NotExpressed):
        cases.evaluate({**case, "model": {"name": "an unknown model"}})
    with pytest.raises(cases.NotExpressed):
        cases.evaluate({**case, "parallel": {"zero_stage": 7}})  # the plan itself is refused


HELD_OUT = cases.load(Path(__file__).resolve().parents[3] / "bench" / "data" / "memory-heldout.json")


#: held-out runs still outside ±15 %, with the mechanism the estimate lacks (strict xfails)
HELD_OUT_GAPS = {
    "mcore_ci_moe_small_tp2_ep2_8experts_top1_distopt": "Megatron's default allgather token dispatcher gathers the "
    "tokens of the whole tp×ep group into every MoE layer; the plan has no dispatcher, the estimate gathers over tp "
    "only (-24 %)",
    "flagperf_llama2_7b_deepspeed_zero3_h800_dp8": "nvidia-smi of a ZeRO-3 run keeping up to "
    "stage3_max_live_parameters (1e9) gathered weights alive, and its fragmentation: neither is modelled (-17 %)",
    # measured while loading, not training: max_memory_allocated is never reset after the model is built
    "litgpt_hub_llama3_8b_qlora_nf4_r32_qv_a10g_mbs2": "litgpt builds the whole model in bf16 on the GPU before it "
    "quantises it to NF4, and its printed peak (never reset) is that load peak, the size of the bf16 model (-33 %)",
    "litgpt_restable_llama2_7b_qlora_nf4_r8_qv_a100_mbs1": "the same load peak of the bf16 model before NF4 (-32 %)",
    "litgpt_restable_llama2_7b_lora_fsdp2_a100_mbs4": "a peak that does not grow with the micro batch (22.2 / 22.5 / "
    "23.4 GB at 1 / 2 / 4): the model loaded before FSDP shards it, not a training step (-50 %)",
    "mcore_release_mixtral_8x7b_tp2_pp4_ep4_h100": "the release test's world size is not published: read at the "
    "smallest data parallelism that holds TP2 PP4 EP4, the last stage's distributed-optimizer shard is 4x too big "
    "if the job ran on 128 GPUs (+53 %)",
    "llamafactory_5977_llama3_8b_full_zero3_3090_oom": "a ZeRO-3 run that ran out of memory on 24 GB, estimated "
    "tight: DeepSpeed's start-up (each parameter materialised whole while loading) is not modelled",
    "llamafactory_5977_llama3_8b_full_zero3_offload_3090": "a user's rough '13G' of nvidia-smi for ZeRO-3 with CPU "
    "offload: prefetched and persistent parameters kept on the GPU are not modelled (-50 %)",
    "llamafactory_4133_qwen15_7b_full_zero2_a100_40g_oom": "a ZeRO-2 run that ran out of memory on 40 GB, estimated "
    "tight: DeepSpeed's start-up buffers (flat fp16 groups, fp32 partitions built at once) are not modelled",
}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.xfail(reason=HELD_OUT_GAPS[c["id"]], strict=True))
                                  if c["id"] in HELD_OUT_GAPS else c for c in HELD_OUT], ids=lambda c: c["id"])
def test_held_out_run_within_15_percent_and_not_called_out_of_memory(case):
    """Published runs no constant was fitted to (bench/data/memory-heldout.json): each within ±15 %
    of its measured memory, and none that trained called out-of-memory."""
    r = cases.evaluate(case)
    assert r["ok"] and abs(r["error"]) <= 0.15, r
    assert r["verdict"] != "out-of-memory", r


def _case(**over):
    c = {"id": "x", "kind": "measured", "source": "somewhere", "quantity": "peak reserved", "value": 1, "unit": "GiB",
         "model": {"hidden": 1024, "layers": 4, "heads": 8, "vocab": 1000, "seq": 512, "swiglu": True},
         "parallel": {"dp": 1}, "training": {"micro_batch": 1, "precision": "bf16"}}
    for k, v in over.items():
        c[k] = {**c[k], **v} if isinstance(v, dict) else v
    return c


def test_mapping_reads_meaning_not_stray_words():
    """Free text in a field says what it says: the first dtype named is the precision, "no fp32 master"
    turns the master copy off, a file name's digit is no recompute interval."""
    ex = cases.express(_case(training={"precision": "bf16 (pure bf16, no fp32 master copy)"}))
    assert (ex.plan.precision, ex.plan.master_weights) == ("bf16", False)
    ex = cases.express(_case(training={"recompute": "selective op (per-op SAC; llama3_8b.toml default)"}))
    assert ex.plan.recompute == "sac"
    ex = cases.express(_case(training={"recompute": "selective (every 2 layers)"}))
    assert (ex.plan.recompute, ex.plan.recompute_interval) == ("full", 2)


def test_mapping_carries_attention_backend_model_extras_and_trainer_habits():
    ex = cases.express(_case(training={"attention": "unfused (--attention-backend unfused)"}))
    assert ex.plan.attention == "eager"
    ex = cases.express(_case(model={"experts": 8, "top_k": 2, "shared_experts": 1, "dense_layers": 1,
                                    "dense_ffn": 4096, "kv_lora_rank": 512, "q_lora_rank": 256, "qk_nope_dim": 64,
                                    "qk_rope_dim": 32, "v_head_dim": 64}))
    assert (ex.model.shared_experts, ex.model.dense_layers, ex.model.kv_lora_rank, ex.model.mla) == (1, 1, 512, True)
    ex = cases.express(_case(source="pytorch/torchtitan benchmarks 2025-06", parallel={"fsdp": 8, "tp": 2},
                             training={"compile": True}))
    assert ex.plan.compile_loss and ex.plan.sequence_parallel
    ex = cases.express(_case(source="pytorch/torchtitan:benchmarks/llama3_h100_202412_torchtitan.md",
                             training={"compile": True}))
    assert not ex.plan.compile_loss  # its train.py kept the loss eager until early 2025
    ex = cases.express(_case(training={"framework": "HF transformers 4.52 + PEFT"}))
    assert not ex.plan.fused_norm
    ex = cases.express(_case(training={"framework": "torchtune"}))
    assert ex.plan.fused_norm


def test_mapping_reads_where_and_when_a_number_was_taken():
    """Megatron logs its memory from the last rank (the last pipeline stage); torchtune computed the loss on the
    full logits until mid-2024; bitsandbytes' 32-bit PagedAdamW is a paged optimizer too; the GPU is the one of
    the ``gpus`` field, not one a note mentions."""
    last = _case(parallel={"pp": 4, "dp": 1}, training={"framework": "Megatron-LM"},
                 quantity="max allocated, logged to tensorboard by the last rank")
    assert cases.express(last).stage == -1
    assert cases.express(_case(parallel={"pp": 4, "dp": 1})).stage is None
    old = _case(source="meta-pytorch/torchtune PR #961 (2024-05-10)", training={"optimizer": "bitsandbytes PagedAdamW"})
    ex = cases.express(old)
    assert (ex.plan.loss, ex.plan.optimizer) == ("auto", "paged-adamw")
    assert cases.express(_case(source="pytorch/torchtune recipes 2024-11")).plan.loss == "chunked"
    ex = cases.express(_case(parallel={"gpus": "1x H100 80GB"}, notes="a reviewer ran it on an A100 too"))
    assert ex.plan.gpu_kind == "h100"
