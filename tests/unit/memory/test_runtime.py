"""Runtime terms around the model (llmdiag.memory.runtime): cuBLAS/TE workspaces, the
sequence-parallel all-gather, NCCL's NVLS buffers and TE userbuffers — hand arithmetic per term,
and where each lands (inside the caching allocator or outside it)."""

from __future__ import annotations

import pytest

from llmdiag.memory import estimate, models, runtime
from llmdiag.memory.plan import Plan

L8 = models.preset("llama3-8b")
MIB = 2**20


def _line(est, name):
    return next(x for x in est["lines"] if x["name"] == name)


@pytest.mark.parametrize("kind, framework, expected", [
    ("a100", "torch", 2 * (4096 * 1024 * 2 + 16 * 1024 * 8)),  # PyTorch :4096:2:16:8, two handles
    ("v100", "megatron", 2 * 8519680 + 4 * MIB),  # + TE's 4 MiB before Hopper
    ("h100", "megatron", 2 * 32 * MIB + 32 * MIB),  # 32 MiB each from sm_90 on
    ("b200", "torch", 2 * 32 * MIB),
    (None, "torch", 2 * 8519680),  # unknown generation: PyTorch's pre-Hopper default
])
def test_cublas_workspaces_per_handle_and_generation(kind, framework, expected):
    assert runtime.cublas_workspaces(Plan(dp=1, gpu_kind=kind, framework=framework))[0] == expected


def test_sp_gather_buffer_is_one_gathered_layer_input():
    p = Plan(tp=8, world_size=8, sequence_parallel=True, seq_len=4096, micro_batch=3)
    assert runtime.sp_gather_buffer(L8, p)[0] == 2 * 4096 * 3 * 4096  # 96 MiB, not × layers
    assert runtime.sp_gather_buffer(L8, p.replace(cp=2, world_size=16))[0] == 2 * 2048 * 3 * 4096
    assert runtime.sp_gather_buffer(L8, p.replace(sequence_parallel=False))[0] == 0
    assert runtime.sp_gather_buffer(L8, Plan(dp=1, sequence_parallel=True))[0] == 0  # tp 1: nothing to gather
    assert runtime.sp_gather_buffer(None, p)[0] == 0  # --params only: no shapes


def test_tp_comm_overlap_userbuffers():
    p = Plan(tp=4, world_size=4, sequence_parallel=True, seq_len=8192, micro_batch=1, tp_comm_overlap=True)
    assert runtime.tp_comm_overlap_buffers(L8, p)[0] == 10 * 2 * 8192 * 4096  # 640 MiB
    assert runtime.tp_comm_overlap_buffers(L8, p.replace(tp_comm_overlap=False))[0] == 0


@pytest.mark.parametrize("plan, group, expected", [
    (Plan(tp=8, pp=2, dp=2, world_size=32), "tp", 8),
    (Plan(tp=8, pp=2, dp=2, world_size=32), "dp", 1),  # stride 8: the other member is on another node
    (Plan(tp=2, dp=4, world_size=8), "dp", 4),  # stride 2 inside one 8-GPU node
    (Plan(tp=2, dp=16, world_size=32), "dp", 4),
    (Plan(tp=2, cp=2, dp=2, world_size=8), "dp", 4),  # dp × cp: strides 2 and 4
    (Plan(tp=4, pp=4, world_size=16), "mp", 8),  # dp 1: stages 0 and 1 share a node
    (Plan(tp=8, world_size=8, gpus_per_node=4), "tp", 4),  # a TP group across two 4-GPU nodes
])
def test_local_ranks_follow_the_tp_cp_dp_pp_order(plan, group, expected):
    assert runtime.local_ranks(plan, group) == expected


def test_nvls_buffers_match_nccls_logged_total_for_an_8_gpu_group():
    # NCCL on 8 × H200: "nHeads 8 … nvlsPerRankSize 301989888 nvlsTotalSize 2415919104"
    assert runtime.NVLS_PER_LOCAL_RANK == 301989888
    p = Plan(tp=8, pp=2, dp=2, world_size=32, gpu_kind="h100")
    n, local = runtime.nvls_buffers(p, ["dp", "tp", "pp", "mp"])
    assert n == 2415919104 and local == {"tp": 8}  # mp (gradient norm) and pp (send/recv) not charged
    assert runtime.nvls_buffers(p.replace(gpu_kind="a100"), ["tp"])[0] == 0  # no NVLS before Hopper
    assert runtime.nvls_buffers(Plan(tp=2, dp=4, world_size=8, gpu_kind="h200"), ["dp", "tp"]) == \
        (4 * 301989888, {"dp": 4})  # a 2-rank TP group does not use NVLS; the 4-rank dp group does


def test_terms_land_inside_or_outside_the_allocator():
    p = Plan(tp=8, pp=2, dp=2, world_size=32, gpu_kind="h100", framework="megatron", sequence_parallel=True,
             distributed_optimizer=True, seq_len=4096, micro_batch=1, global_batch=64, tp_comm_overlap=True)
    est = estimate.estimate(L8, p)
    inside = ("cublas_workspaces", "sp_gather_buffer")
    outside = ("cuda_context", "nccl_buffers", "nccl_nvls_buffers", "tp_comm_overlap_buffers", "managed_memory")
    assert est["memory"]["outside_allocator"] == sum(_line(est, n)["bytes"] for n in outside)
    assert _line(est, "nccl_nvls_buffers")["bytes"] == 8 * 301989888
    assert _line(est, "tp_comm_overlap_buffers")["bytes"] == 10 * 2 * 4096 * 4096
    assert _line(est, "cublas_workspaces")["bytes"] == 3 * 32 * MIB
    assert _line(est, "sp_gather_buffer")["bytes"] == 2 * 4096 * 4096
    # the two inside terms raise the allocated peak by their bytes (the forward/backward phase peaks)
    base = estimate.estimate(L8, p.replace(sequence_parallel=False, tp_comm_overlap=False, gpu_kind="a100"))
    assert est["peak"]["phase"] == base["peak"]["phase"] == "forward/backward"
    # without SP every saved replicated tensor is whole: compare the SP plan with its own terms removed
    sp_only = estimate.stage_breakdown(L8, None, p, 0)
    lines = {x.name: x.bytes for x in sp_only["lines"]}
    assert sp_only["allocated"] == pytest.approx(sum(lines[n] for n in (
        "weights", "gradients", "master_weights", "optimizer_states", "activations", "logits", "gathered_params",
        "comm_buckets", *inside)), rel=1e-9)
    assert sp_only["device"] - sp_only["reserved"] == pytest.approx(sum(lines[n] for n in outside), abs=1)


def test_terms_are_zero_where_their_mechanism_is_absent():
    est = estimate.estimate(L8, Plan(world_size=1, dp=1))
    for name in ("sp_gather_buffer", "nccl_nvls_buffers", "tp_comm_overlap_buffers"):
        assert _line(est, name)["bytes"] == 0, name
    assert _line(est, "cublas_workspaces")["bytes"] == 2 * 8519680  # every GPU run has its cuBLAS handles


def test_tp_comm_overlap_is_read_from_a_megatron_or_nemo_yaml(tmp_path):
    from llmdiag.memory import job

    for text in ("tensor_model_parallel_size: 4\nsequence_parallel: true\ntp_comm_overlap: true\nseq_length: 8192\n",
                 "model:\n  tensor_model_parallel_size: 4\n  sequence_parallel: true\n  ub_tp_comm_overlap: true\n"
                 "  encoder_seq_length: 8192\n"):
        y = tmp_path / "m.yaml"
        y.write_text(text)
        from llmdiag.memory import readers

        fields, _warnings = readers.from_megatron_yaml(str(y))
        p = job.resolve_plan({}, [fields], {"world_size": 4})
        assert p.tp_comm_overlap and p.tp == 4
        est = estimate.estimate(L8, p)
        assert _line(est, "tp_comm_overlap_buffers")["bytes"] == 10 * 2 * 8192 * 4096


def test_an_eager_loaded_context_is_the_measured_1_2_gib():
    p = Plan(tp=8, world_size=8)
    lazy, eager = (_line(estimate.estimate(L8, p.replace(module_loading=m)), "cuda_context")["bytes"]
                   for m in ("lazy", "eager"))
    assert lazy == estimate.CUDA_CONTEXT and eager == int(1.2 * 2**30)
    assert _line(estimate.estimate(L8, p.replace(gpu_kind="v100", module_loading="eager")), "cuda_context")["bytes"] \
        == int(1.2 * 2**30)  # not counted twice
    with pytest.raises(Exception, match="module_loading"):
        Plan(dp=1, module_loading="sometimes")


@pytest.mark.parametrize("notes, training, eager", [
    ("Megatron-DeepSpeed (BLOOM prototyping, Feb 2022), A100-80GB", {}, True),
    ("measured Aug 2022 on A100", {}, False),  # after CUDA 11.7
    ("run in December 2021", {}, True),
    ("", {"framework": "torch 1.11 + apex"}, True),
    ("", {"framework": "megatron-core core_v0.6.0"}, False),  # no date, no version: today's lazy default
    ("CUDA 11.8, Feb 2022 config reused", {}, False),  # a stated CUDA version wins over a date
    ("CUDA 11.3", {}, True),
])
def test_cases_before_cuda_11_7_load_modules_eagerly(notes, training, eager):
    from llmdiag.memory import cases

    assert cases._before_lazy_loading({"notes": notes, "training": training}) is eager
