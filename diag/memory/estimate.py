"""Per-GPU memory of one training step, stage by stage and phase by phase, line by line.

Model states (weights, gradients, fp32 master weights, optimizer moments) follow the ZeRO
paper's accounting; ZeRO stage ≥1 and Megatron's distributed optimizer shard optimizer state
and master weights over the data-parallel group (× context parallel, as Megatron does), stage
≥2 also gradients, stage 3 / FSDP also weights; offload moves them to the CPU; LoRA freezes
the base (NF4 / int8 when quantised) and trains small adapters.

Two phases peak, and the larger one is reported (REFERENCE §3, docs/estimate-memory.md):
- forward/backward: the model states, the activations the pipeline keeps in flight, the loss
  (logits, their fp32 upcast and the cross-entropy backward), gathered ZeRO-3/FSDP layers and
  communication buckets;
- optimizer step: the model states with every gradient and the step's temporaries (PyTorch's
  foreach Adam keeps an fp32 copy of the second moment's square root).
The caching allocator reserves more than is allocated (freed activation blocks of other sizes
stay cached), and CUDA context and NCCL buffers live outside it: allocated < reserved < device.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from llmdiag.memory import activations, groups, runtime
from llmdiag.memory.models import ModelSpec
from llmdiag.memory.plan import Plan

GIB = 1024**3
REDUCE_BYTES = 4  # FSDP's reduce dtype under mixed precision (torchtitan mixed_precision_reduce = float32)
CUDA_CONTEXT = int(0.5 * GIB)  # driver context with lazy module loading (cuBLAS workspaces: runtime.py)
# The context by GPU generation where it is known to differ: Volta (V100) measured ~1.2 GiB (its
# kernels are not lazily loaded by the CUDA 11/12 builds PyTorch ships for sm_70 as for sm_80+)
CUDA_CONTEXT_BY_GPU = {"v100": int(1.2 * GIB)}
# Before CUDA 11.7 every kernel of every library was loaded when the context was created: over
# 1 GB (pytorch/pytorch#107667, REFERENCE §3); 11.7 brought lazy module loading. The one eager
# context measured here is the V100's 1.2 GiB.
CUDA_CONTEXT_EAGER = int(1.2 * GIB)
NCCL_PER_COMM = int(0.5 * GIB)  # rough buffers per communicator
# Caching-allocator gap: share of the short-lived bytes (activations, loss, gathered weights,
# step temporaries) the allocator keeps reserved but not allocated, plus a little of the rest.
RESERVE_TRANSIENT = 0.15
RESERVE_PERSISTENT = 0.02
FITS_FRACTION = 0.95  # at most this share of GPU memory: "fits"
TIGHT_FRACTION = 1.10  # up to this share: "tight" (within the estimate's error band); above: out-of-memory
OPT_BYTES = {"adam": 8, "adamw": 8, "adam8bit": 2, "paged-adam8bit": 2, "paged-adamw": 8, "sgd": 4}
#: optimizers whose state torch.optim allocates like the parameter (fp32 per state with a master copy)
_PARAM_DTYPE_STATE = ("adam", "adamw", "sgd")
QUANT_BYTES = {"none": None, "nf4": 4.127 / 8, "int8": 1.0 + 4 / 4096}  # NF4 with double-quantised block scales


@dataclasses.dataclass
class Line:
    name: str
    bytes: float
    formula: str
    inputs: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "bytes": int(round(self.bytes)), "formula": self.formula, "inputs": self.inputs}


def split_layers(layers: int, plan: Plan) -> list[int]:
    """Layers per pipeline stage: the plan's explicit split, else even with the remainder on the
    middle stages (the first holds the embedding, the last the loss)."""
    if plan.pp_layers is not None:
        return [int(x) for x in plan.pp_layers]
    base, rem = divmod(layers, plan.pp)
    out = [base] * plan.pp
    order = list(range(1, plan.pp - 1)) + [plan.pp - 1, 0] if plan.pp > 2 else list(range(plan.pp))
    for st in order[:rem]:
        out[st] += 1
    return out


def _stage_range(m: ModelSpec, plan: Plan, stage: int) -> range:
    split = split_layers(m.layers, plan)
    start = sum(split[:stage])
    return range(start, start + split[stage])


def _layer_linear_params(m: ModelSpec, plan: Plan, i: int) -> tuple[float, float]:
    """One GPU's share of layer ``i``'s matrices: (dense, routed experts).

    Dense matrices (attention, dense MLP, shared experts) are cut ``tp`` ways; the routed experts
    are spread ``ep`` ways and each cut by the expert tensor-parallel size (groups.expert_tp)."""
    t = plan.tp
    if m.is_moe_layer(i):
        return ((m.attention_params() + m.shared_expert_params()) / t,
                m.experts / plan.ep * m.expert_params() / groups.expert_tp(plan))
    return (m.attention_params() + m.dense_mlp_params()) / t, 0.0


def _lora_params(m: ModelSpec, plan: Plan, i: int) -> float:
    """Adapter parameters of layer ``i`` on one GPU: r × (in + out) per targeted linear."""
    r, h = plan.lora_rank, m.hidden
    mats = [(h, m.q_dim), (h, m.v_dim)] if plan.lora_targets == "qv" else \
        [(h, m.q_dim), (h, m.kv_dim), (h, m.v_dim), (m.v_dim if m.mla else m.q_dim, h)]
    if plan.lora_targets == "all":
        f = m.ffn if m.is_moe_layer(i) else (m.dense_ffn or m.ffn)
        mats += [(h, f), (f, h)] + ([(h, f)] if m.gated else [])
    return sum(r * (a + b) for a, b in mats) / plan.tp


@dataclasses.dataclass
class StageParams:
    trainable: float  # parameters with gradients and optimizer state, per GPU
    frozen: float  # LoRA: the frozen base, per GPU
    frozen_bytes: float  # bytes of the frozen base (quantised linears)
    largest: float  # largest unit ZeRO-3 / FSDP gathers at once (a layer, or the embedding)
    head_params: float  # output projection on this stage (its gradient exists at the loss peak)
    linear: float = 0.0  # transformer-layer matrices on this GPU (what FP8 linears cast)
    expert: float = 0.0  # of ``trainable``: routed-expert parameters (sharded over the expert data-parallel group)
    expert_frozen_bytes: float = 0.0  # of ``frozen_bytes``: the frozen routed experts (LoRA)
    largest_frozen_bytes: float = 0.0  # LoRA: bytes of the largest gathered unit at its stored dtype (NF4/int8)


def stage_params(m: ModelSpec | None, params: float | None, plan: Plan, stage: int,
                 largest_layer: float | None = None) -> float:
    """Parameters one GPU of pipeline stage ``stage`` holds (tensor and expert sharding applied)."""
    sp = _stage_params(m, params, plan, stage, largest_layer)
    return sp.trainable + sp.frozen


def _stage_params(m: ModelSpec | None, params: float | None, plan: Plan, stage: int,
                  largest_layer: float | None = None) -> StageParams:
    if m is None:
        n = float(params) / (plan.tp * plan.pp)
        return StageParams(n, 0.0, 0.0, float(largest_layer or 0.0) / plan.tp, 0.0)
    w = 4 if plan.precision == "fp32" else 2
    q = QUANT_BYTES[plan.base_quant] or w
    lin = other = lora = expert = 0.0
    largest = largest_b = 0.0
    for i in _stage_range(m, plan, stage):
        dense, routed = _layer_linear_params(m, plan, i)
        li = dense + routed
        lin += li
        expert += routed
        other += m.layer_norm_params() + (m.router_params() if m.is_moe_layer(i) else 0)
        largest = max(largest, li)
        largest_b = max(largest_b, li * q)
        if plan.lora_rank:
            lora += _lora_params(m, plan, i)
    head = 0.0
    if stage == 0:
        other += m.vocab * m.hidden / plan.tp + m.positions * m.hidden
        largest = max(largest, m.vocab * m.hidden / plan.tp)
        largest_b = max(largest_b, m.vocab * m.hidden / plan.tp * w)
    if stage == plan.pp - 1:
        other += m.norm_params()
        if not m.tied or plan.pp > 1:  # a tied head on another stage keeps its own copy
            head = m.vocab * m.hidden / plan.tp
            other += head
            largest = max(largest, head)
            largest_b = max(largest_b, head * w)
    if plan.lora_rank:
        return StageParams(lora, lin + other, lin * q + other * w, largest, 0.0, lin, 0.0, expert * q, largest_b)
    return StageParams(lin + other, 0.0, 0.0, largest, head, lin, expert)


def _shards(plan: Plan, expert: bool = False) -> tuple[int, int, int, int]:
    """(group, optimizer shard, gradient shard, weight shard) of dense or routed-expert states."""
    g = groups.of(plan)
    d = g.expert_shard if expert else g.dense_shard
    opt = d if (plan.zero >= 1 or plan.distributed_optimizer) else 1
    return d, opt, (d if plan.zero >= 2 else 1), (d if plan.zero == 3 else 1)


def _state_bytes(n_t: float, frozen_bytes: float, plan: Plan, expert: bool) -> dict[str, tuple[float, str]]:
    """Bytes and formula of each model state of ``n_t`` trainable parameters (plus a frozen base)
    sharded over the group that holds them (dense: dp×cp; routed experts: expert data parallel)."""
    _, shard_opt, shard_grad, shard_w = _shards(plan, expert)
    w = 4 if plan.precision == "fp32" else 2
    g = plan.grad_bytes
    master = 4 if plan.precision != "fp32" and plan.master_weights else 0
    k = OPT_BYTES[plan.optimizer]
    kform = f"{k} B ({plan.optimizer})"
    if plan.framework == "torch" and not master and w == 2 and plan.optimizer in _PARAM_DTYPE_STATE:
        # pure 16-bit training: torch.optim creates its state with zeros_like(param), in the
        # parameter's dtype (AdamW's exp_avg / exp_avg_sq in bf16: 4 B, not 8)
        k = k // 4 * w
        kform = f"{k} B ({plan.optimizer} state in the 16-bit parameter dtype, no master copy)"
    wbytes = (n_t * w + frozen_bytes) / shard_w
    wform = f"P × {w} B / {shard_w}" + (f" + frozen base ({plan.base_quant}) / {shard_w}" if frozen_bytes else "")
    gbytes, gform = n_t * g / shard_grad, f"P_trainable × {g} B / {shard_grad}"
    if plan.framework == "megatron" and plan.deepspeed_engine and plan.zero == 0 and plan.precision != "fp32":
        # Megatron-DeepSpeed without ZeRO: DeepSpeed's BF16_Optimizer (FP16_Optimizer for fp16) keeps
        # the 16-bit gradients and an unsharded fp32 copy they are accumulated into
        gbytes, gform = 6 * n_t, "P_trainable × (2 B 16-bit + 4 B fp32 copy, DeepSpeed BF16_Optimizer, unsharded)"
    elif plan.ds_optimizer and plan.zero >= 1 and plan.precision != "fp32":
        if plan.framework == "megatron" and plan.precision == "bf16" and plan.zero == 1:
            # Megatron-DeepSpeed's BF16_Optimizer copies the bf16 gradients of a backward into an
            # unsharded fp32 buffer after it ends: both exist at the end of backward
            gbytes, gform = 6 * n_t, "P_trainable × (2 B bf16 + 4 B BF16_Optimizer fp32, unsharded)"
        else:
            # DeepSpeed's ZeRO optimizers keep an fp32 gradient partition beside the 16-bit gradients
            # (stage 3: only the partition; its estimator counts 18 B/param)
            g16 = 0 if plan.zero == 3 else 2 * n_t / shard_grad
            gbytes = g16 + 4 * n_t / shard_opt
            gform = (f"P × 2 B / {shard_grad} + " if g16 else "") + f"fp32 partition P × 4 B / {shard_opt}"
    return {"weights": (wbytes, wform), "gradients": (gbytes, gform),
            "master_weights": (n_t * master / shard_opt, f"P_trainable × {master} B / {shard_opt}"),
            "optimizer_states": (n_t * k / shard_opt, f"P_trainable × {kform} / {shard_opt}")}


def model_state_lines(n: float | StageParams, plan: Plan) -> list[Line]:
    sp = n if isinstance(n, StageParams) else StageParams(float(n), 0.0, 0.0, 0.0, 0.0)
    g = groups.of(plan)
    n_t = sp.trainable
    inp: dict[str, Any] = {"params_per_gpu": int(sp.trainable + sp.frozen), "trainable_per_gpu": int(n_t),
                           "zero": plan.zero, "shard_group": g.dense_shard}
    dense = _state_bytes(n_t - sp.expert, sp.frozen_bytes - sp.expert_frozen_bytes, plan, expert=False)
    parts = {k: (b, f) for k, (b, f) in dense.items()}
    if sp.expert or sp.expert_frozen_bytes:
        inp.update(expert_params_per_gpu=int(sp.expert), expert_shard_group=g.expert_shard,
                   ep=g.ep, expert_tp=g.etp)
        routed = _state_bytes(sp.expert, sp.expert_frozen_bytes, plan, expert=True)
        parts = {k: (dense[k][0] + routed[k][0], f"dense: {dense[k][1]}; experts: {routed[k][1]}") for k in dense}
    (wbytes, wform), (gbytes, gform) = parts["weights"], parts["gradients"]
    (mbytes, mform), (obytes, oform) = parts["master_weights"], parts["optimizer_states"]
    if plan.offload_params:
        wbytes, wform = 0.0, "offloaded to CPU (gathered per layer: see gathered_params)"
    if plan.offload_grads or plan.offload_optimizer and plan.zero >= 1:
        gbytes, gform = 0.0, "offloaded to CPU with the optimizer (a bucket stays: see comm_buckets)"
    elif plan.optimizer_in_backward:
        gbytes, gform = sp.largest * plan.grad_bytes, "optimizer in backward: one layer's gradients at a time"
    if plan.offload_optimizer:
        mbytes = obytes = 0.0
        mform = oform = "offloaded to CPU"
    elif _paged(plan):
        obytes, oform = 0.0, "paged: in CUDA managed memory (working set: managed_memory; all of it: host)"
    return [
        Line("weights", wbytes, wform, inp),
        Line("gradients", gbytes, gform, inp),
        Line("master_weights", mbytes, mform, inp),
        Line("optimizer_states", obytes, oform, inp),
    ]


def warmup_microbatches(plan: Plan, stage: int) -> tuple[int, int]:
    """(forward passes before the first backward, all forward passes) of one pipeline rank per step.

    A pass is one micro batch through one model chunk (``vpp`` chunks of L/(pp·vpp) layers per rank).
    - 1F1B (Megatron ``forward_backward_pipelining_without_interleaving``, torch.distributed.pipelining
      ``Schedule1F1B``): ``min(pp − rank − 1, m)`` warm-up forwards;
    - interleaved 1F1B, Megatron-core (``megatron/core/pipeline_parallel/schedules.py``,
      ``forward_backward_pipelining_with_interleaving``): ``2·(pp − rank − 1) + (vpp − 1)·g`` with
      ``g = microbatch_group_size_per_vp_stage`` (default pp), capped at all ``m·vpp`` passes
      (then every forward runs before the first backward);
    - interleaved 1F1B, torch.distributed.pipelining (torchtitan, ``ScheduleInterleaved1F1B``): the
      same with ``g`` = micro batches per round, ``m // max(1, m // pp)``.
    """
    m, p, v = plan.num_microbatches, plan.pp, plan.vpp
    if v == 1:
        return min(p - stage - 1, m), m
    if plan.global_batch is None:
        m = 2 * p  # unknown: enough micro batches that the cap does not bite (the worst case)
    g = p if plan.framework != "torch" else m // max(1, m // p)
    return min(2 * (p - stage - 1) + (v - 1) * g, m * v), m * v


def in_flight(plan: Plan, stage: int) -> float:
    """Micro batches of a whole stage whose activations a rank holds at its peak.

    At the peak a rank has run its warm-up forwards and the first steady-state forward (1F1B runs
    a forward before each backward), unless every pass is warm-up. Each pass of an interleaved
    schedule holds one chunk, 1/vpp of the rank's layers. So interleaving holds
    (2(pp−r−1) + (vpp−1)·pp + 1)/vpp stage-equivalents on rank r — pp + (pp−1)/vpp on the first
    rank, Korthikanti's factor 1 + (pp−1)/(pp·vpp) — but when the pipeline has no more micro batches
    than stages the cap leaves m, the same as 1F1B."""
    if plan.pp == 1:
        return 1.0
    warm, total = warmup_microbatches(plan, stage)
    return min(warm + 1, total) / plan.vpp


def _layer_mode(plan: Plan, pos: int) -> str:
    """Recompute mode of the ``pos``-th layer of a stage (Megatron block count, torchtitan interval)."""
    if plan.recompute in ("none", "selective"):
        return plan.recompute
    if plan.recompute_layers is not None and pos >= plan.recompute_layers:
        return "none"
    if pos % plan.recompute_interval:
        return "none"
    return plan.recompute


def activation_lines(m: ModelSpec, plan: Plan, stage: int) -> list[Line]:
    rng = _stage_range(m, plan, stage)
    flight = in_flight(plan, stage)
    memo: dict[tuple[str, bool], float] = {}
    per_layer = []
    for pos, i in enumerate(rng):
        key = (_layer_mode(plan, pos), m.is_moe_layer(i))
        if key not in memo:
            memo[key] = activations.layer_bytes(m, plan, recompute=key[0], moe_layer=key[1])
        per_layer.append(memo[key])
    kind = m.is_moe_layer(rng[-1]) if len(rng) else m.moe
    inputs = {"s": plan.seq_len, "b": plan.micro_batch, "h": m.hidden, "a": m.heads, "t": plan.tp,
              "cp": plan.cp, "sp": plan.sequence_parallel, "recompute": plan.recompute,
              "attention": plan.attention, "layers_on_stage": len(rng), "micro_batches_in_flight": flight,
              "per_layer_bytes": int(max(per_layer, default=0)),
              "terms": {name: int(v) for name, v in activations.layer_terms(m, plan, moe_layer=kind)}}
    total = sum(per_layer) * flight
    formula = "Σ per_layer × micro_batches_in_flight"
    if plan.recompute in ("full", "sac") and len(rng):  # backward re-runs a layer and holds its activations
        work = activations.layer_bytes(m, plan.replace(offload_activations=False), recompute="none", moe_layer=kind)
        total += work
        inputs["recompute_working_set_bytes"] = int(work)
        formula += " + one recomputed layer"
    if plan.ds_optimizer and plan.framework == "megatron" and plan.pp > 1:
        # DeepSpeed's pipeline engine keeps each in-flight micro batch's stage output for its
        # backward (Megatron-LM frees the output's data once sent)
        out = 2 * plan.seq_len / plan.cp * plan.micro_batch * m.hidden / (plan.tp if plan.sequence_parallel else 1)
        total += out * flight
        inputs["pipe_output_buffers_bytes"] = int(out * flight)
        formula += " + pipeline output buffers"
    if plan.recompute not in ("full", "sac") and plan.offload_activations and len(rng):
        # one layer's activations in flight to / from the CPU
        work = 2 * activations.layer_bytes(m, plan.replace(offload_activations=False), moe_layer=kind)
        total += work
        formula = "offloaded; two layers in transfer"
    return [Line("activations", total, formula, inputs), loss_line(m, plan, stage)]


def loss_line(m: ModelSpec, plan: Plan, stage: int) -> Line:
    """Peak of the loss on the last stage: logits, their fp32 upcast and the cross-entropy backward.

    N tokens, V/t vocabulary columns per GPU (vocab-parallel when tp > 1):
    - vocab-parallel (Megatron): 16-bit logits + an fp32 softmax computed in place, whose backward
      reuses it; the 16-bit gradient appears beside it: 6·N·V/t;
    - upcast (``F.cross_entropy(logits.float())``): backward holds the fp32 log-probabilities,
      the fp32 gradient of them and the fp32 gradient of the logits: 12·N·V/t (measured on CPU);
    - chunked (torchtune's CEWithChunkedOutputLoss): the peak is at the end of forward: every
      chunk's fp32 log-probabilities stay saved until backward (4·N·V) beside the 16-bit logits
      (2·N·V), while the last chunk's fp32 copy of its logits (4·N·V/chunks) is still alive; in
      backward the logits are freed and the log-probabilities go chunk by chunk:
      6·N·V/t + 4·N·V/(t·chunks) (measured through the allocator on CPU, chunks 4, 8 and 16);
    - compiled (torch.compile fuses the upcast into the kernel: only 16-bit logits and gradients):
      4·N·V/t, chunked 2·N·V/t + 2·N·V/(t·chunks);
    - fused (fused linear cross-entropy, CCE, Liger): no logits are materialised: ~0.
    """
    n = plan.seq_len / plan.cp * plan.micro_batch
    v = m.vocab / plan.tp
    inp = {"tokens": int(n), "V_per_gpu": int(v), "loss": plan.loss_kind, "compiled": plan.compile_loss}
    if stage != plan.pp - 1:
        return Line("logits", 0.0, "no loss on this stage", inp)
    kind, c = plan.loss_kind, plan.loss_chunks
    if kind == "vocab-parallel":
        return Line("logits", 6 * n * v, "6·N·V/t (16-bit logits + fp32 softmax, in place)", inp)
    if kind == "upcast" and plan.compile_loss:
        return Line("logits", 4 * n * v, "4·N·V/t (compiled: 16-bit logits + 16-bit gradient)", inp)
    if kind == "upcast":
        return Line("logits", 12 * n * v, "12·N·V/t (fp32 log-probs + their grad + logits grad)", inp)
    if kind == "chunked":
        inp["chunks"] = c
        if plan.compile_loss:
            return Line("logits", 2 * n * v + 2 * n * v / c, "2·N·V/t + 2·N·V/t / chunks (compiled)", inp)
        return Line("logits", 6 * n * v + 4 * n * v / c,
                    "6·N·V/t + 4·N·V/t / chunks (fp32 log-probs, 16-bit logits, one chunk's fp32 copy)", inp)
    return Line("logits", 0.0, "fused linear + cross-entropy: logits never materialised", inp)


def _buckets(plan: Plan, trainable: float) -> tuple[float, str]:
    dp = plan.dp_size * plan.cp
    if dp <= 1 and plan.zero == 0:
        return 0.0, "no data parallelism"
    if plan.ds_optimizer:
        rb = (plan.bucket_mb if plan.bucket_mb is not None else 1000.0) * 1e6
        if plan.zero == 3:
            pre = (plan.ds_prefetch_bucket or 5e7) * 2
            return rb + pre, "reduce bucket + stage3 prefetch bucket (2 B/element)"
        ag = (plan.ds_allgather_bucket or 5e8) * 2
        f = 4.5 if plan.ds_overlap_comm else 1.0
        return f * (rb + ag), f"{f:g} × (reduce + allgather bucket) × 2 B" + (" (overlap_comm)" if f > 1 else "")
    if plan.framework == "torch" and plan.zero == 0 and not plan.optimizer_in_backward:
        # DDP copies gradients into flat buckets unless gradient_as_bucket_view=True
        return trainable * plan.grad_bytes, "DDP gradient buckets (a copy of the gradients)"
    return 0.0, "gradients reduced in place (grad buffer / FSDP reduce-scatter)"


def stage_breakdown(m: ModelSpec | None, params: float | None, plan: Plan, stage: int,
                    largest_layer: float | None = None) -> dict[str, Any]:
    """The phases of one stage: lines of the peaking phase, allocated, reserved, device bytes."""
    sp = _stage_params(m, params, plan, stage, largest_layer)
    states = model_state_lines(sp, plan)
    sb = {x.name: x.bytes for x in states}
    if m is not None:
        act, loss = activation_lines(m, plan, stage)
    else:
        act = Line("activations", 0, "not estimated (--params gives model states only)", {})
        loss = Line("logits", 0, "not estimated (--params gives model states only)", {})
    gathered, gform = _gathered(sp, plan)
    gline = Line("gathered_params", gathered, gform, {"largest_layer_params_per_gpu": int(sp.largest)})
    bucket, bform = _buckets(plan, sp.trainable)
    bline = Line("comm_buckets", bucket, bform, {"dp_cp": plan.dp_size * plan.cp, "framework": plan.framework})
    temps = 0.0
    if not plan.fused_optimizer and not plan.offload_optimizer and not plan.optimizer_in_backward:
        # foreach Adam: fp32 sqrt(v) of the whole group (dense and expert shards)
        temps = 4 * ((sp.trainable - sp.expert) / _shards(plan)[1] + sp.expert / _shards(plan, expert=True)[1])
    tline = Line("optimizer_step_temporaries", temps, "foreach optimizer: 4 B × P_trainable / shard" if temps
                 else "fused optimizer: none", {"optimizer_impl": "fused" if plan.fused_optimizer else "foreach"})
    # Gradients live through forward only when a buffer keeps them (Megatron, DeepSpeed ZeRO,
    # accumulation over micro batches); PyTorch frees them after the step (set_to_none).
    persistent = plan.framework != "torch" or plan.num_microbatches > 1 or plan.pp > 1
    grads_fb = sb["gradients"] if persistent or plan.optimizer_in_backward else sp.head_params * plan.grad_bytes
    gnote = "" if grads_fb == sb["gradients"] else "; at the loss peak only the head's"
    if _fsdp_under_pp(plan):
        # FSDP under a pipeline schedule reduce-scatters only after the stage's last micro batch:
        # until then every gradient is held unsharded, accumulated in the reduce dtype (fp32)
        grads_fb = sp.trainable * REDUCE_BYTES
        gnote = f"; under PP: unsharded until the last micro batch, P_trainable × {REDUCE_BYTES} B (fp32 reduce dtype)"
    ws, wsform = runtime.cublas_workspaces(plan)
    wline = Line("cublas_workspaces", ws, wsform, {"gpu_kind": plan.gpu_kind, "framework": plan.framework})
    spg, spform = runtime.sp_gather_buffer(m, plan)
    spline = Line("sp_gather_buffer", spg, spform, {"tp": plan.tp, "sequence_parallel": plan.sequence_parallel})
    base = sb["weights"] + sb["master_weights"] + sb["optimizer_states"] + ws
    fb_transient = act.bytes + loss.bytes + gathered + spg
    fb = base + grads_fb + bucket + fb_transient
    step = base + sb["gradients"] + bucket + temps
    if plan.optimizer_in_backward:
        step = 0.0
    phase = "forward/backward" if fb >= step else "optimizer step"
    allocated = max(fb, step)
    transient = fb_transient if phase == "forward/backward" else temps
    # the allocator keeps the larger phase's short-lived blocks cached for the other one
    gap = RESERVE_TRANSIENT * max(fb_transient, temps) + RESERVE_PERSISTENT * (allocated - transient)
    comms = groups.of(plan).communicators(m is not None and m.moe)
    if plan.framework == "megatron":
        # Megatron also reduces every step over the model-parallel group (gradient norm) and, with
        # a pipeline and tied embeddings, over the embedding group (first and last stage)
        if plan.tp * plan.pp > 1:
            comms.append("mp")
        if plan.pp > 1 and m is not None and m.tied:
            comms.append("embedding")
        # and barriers on the default group (print_datetime, checkpoint saves): the world's own
        # communicator, apart from any subgroup with the same ranks
        if plan.world > 1:
            comms.append("world")
    lines = list(states)
    if phase == "forward/backward":
        lines[1] = dataclasses.replace(lines[1], bytes=grads_fb, formula=lines[1].formula + gnote)
        lines += [act, loss, gline, bline, dataclasses.replace(tline, bytes=0.0), wline, spline]
    else:
        lines += [dataclasses.replace(act, bytes=0.0), dataclasses.replace(loss, bytes=0.0),
                  dataclasses.replace(gline, bytes=0.0), bline, tline, wline, dataclasses.replace(spline, bytes=0.0)]
    ctx = CUDA_CONTEXT_BY_GPU.get((plan.gpu_kind or "").lower(), CUDA_CONTEXT)
    if plan.module_loading == "eager":
        ctx = max(ctx, CUDA_CONTEXT_EAGER)
    managed = _managed_line(sp, plan)
    nvls, nvls_local = runtime.nvls_buffers(plan, comms)
    ub, ubform = runtime.tp_comm_overlap_buffers(m, plan)
    outside = [
        Line("cuda_context", ctx, "CUDA context" + (f" ({plan.gpu_kind})" if plan.gpu_kind else "")
             + f" ({plan.module_loading} module loading)", {"module_loading": plan.module_loading}),
        Line("nccl_buffers", NCCL_PER_COMM * len(comms), "NCCL buffers × communicators",
             {"communicators": comms, "per_communicator": NCCL_PER_COMM}),
        Line("nccl_nvls_buffers", nvls, "NVLink SHARP: local ranks × 288 MiB per communicator with > 2 on a node"
             if nvls else "no NVLS (pre-Hopper, or no group with more than two ranks on a node)",
             {"local_ranks": nvls_local, "per_local_rank": runtime.NVLS_PER_LOCAL_RANK}),
        Line("tp_comm_overlap_buffers", ub, ubform, {"tp_comm_overlap": plan.tp_comm_overlap}),
        managed,
    ]
    lines += [Line("allocator_reserve", gap, f"reserved − allocated: {RESERVE_TRANSIENT:g} × short-lived blocks"
                   f" + {RESERVE_PERSISTENT:g} × the rest", {"fraction_transient": RESERVE_TRANSIENT})] + outside
    outside_bytes = sum(x.bytes for x in outside)
    host = host_lines(sp, plan)
    layers = len(_stage_range(m, plan, stage)) if m is not None else None
    return {"stage": stage, "layers": layers, "params_per_gpu": int(sp.trainable + sp.frozen), "phase": phase,
            "allocated": int(allocated), "reserved": int(allocated + gap),
            "device": int(allocated + gap + outside_bytes),
            "outside_allocator": int(outside_bytes), "host": int(sum(x.bytes for x in host)),
            "phases": {"forward_backward": int(fb), "optimizer_step": int(step)}, "lines": lines, "host_lines": host,
            "first_step_allocated": int(allocated - (sb["optimizer_states"] + sb["master_weights"] if phase == "forward/backward" else 0))}


def _fsdp_under_pp(plan: Plan) -> bool:
    """torchtitan's FSDP2 with pipeline parallelism: ``reshard_after_forward`` off (``"default"``
    turns it off when PP is on) and gradient sync only on the last micro batch's backward
    (torch.distributed.pipelining calls ``set_requires_gradient_sync(last_backward)``)."""
    return plan.framework == "torch" and plan.zero == 3 and plan.pp > 1 and not plan.offload_params


def _gathered(sp: StageParams, plan: Plan) -> tuple[float, str]:
    """Unsharded weights ZeRO-3 / FSDP hold during forward/backward, with FP8 weight copies."""
    gathered, form = 0.0, "no gathered weights (weights not sharded)"
    wg = 1 if plan.fp8_allgather else (4 if plan.precision == "fp32" else 2)
    if _fsdp_under_pp(plan):
        # the stage's weights stay gathered across its micro batches (at their stored dtype; a
        # LoRA base quantised, the adapters 16-bit), plus one layer's 16-bit gradient before it is
        # cast into the fp32 accumulator
        frozen = sp.frozen_bytes if plan.lora_rank else 0.0
        gathered = sp.trainable * wg + frozen + 2 * sp.largest * (0 if plan.lora_rank else 1)
        form = "under PP: the stage's weights unsharded between micro batches (reshard_after_forward off)"
    elif plan.zero == 3 or plan.offload_params:
        if plan.lora_rank:
            # a frozen base is gathered at its stored dtype (NF4/int8 under QLoRA) and has no
            # gradient: this layer and the prefetched next one
            gathered = 2 * sp.largest_frozen_bytes
            form = f"frozen base gathered at its stored dtype ({plan.base_quant if plan.base_quant != 'none' else 'bf16'}): this + next layer"
        else:
            per = 4.0 if plan.framework == "deepspeed" else 2 * wg + 2  # DeepSpeed: 4·L_max; FSDP: this + next layer + grads
            gathered = per * sp.largest
            form = "unsharded largest layer(s) during forward/backward"
    if plan.fp8 == "te" and not plan.fp8_allgather and not plan.offload_params:
        # Transformer Engine casts each weight to FP8 once per step and keeps the FP8 copy and its
        # transpose for the remaining micro batches and the backward (is_first_microbatch caching)
        gathered += 2 * sp.linear / (plan.dp_size * plan.cp if plan.zero == 3 else 1)
        form += "; FP8 weight copies (TE: weight + transpose, 1 B each)"
    return gathered, form


def _paged(plan: Plan) -> bool:
    return plan.optimizer.startswith("paged") and not plan.offload_optimizer


def _managed_line(sp: StageParams, plan: Plan) -> Line:
    """CUDA managed memory on the device: a paged optimizer's working set.

    bitsandbytes' paged optimizers (PagedAdamW8bit, the 32-bit PagedAdamW; torchtune's low-memory recipes) allocate their
    state with ``cudaMallocManaged`` outside the caching allocator; the driver evicts its pages to
    host memory under pressure and brings a parameter's state back (prefetched) for its update.
    What must fit on the device is that working set: the state of the largest unit."""
    if not _paged(plan):
        return Line("managed_memory", 0.0, "no managed memory", {})
    k = OPT_BYTES[plan.optimizer]
    return Line("managed_memory", k * sp.largest, f"paged optimizer working set: largest unit × {k} B",
                {"largest_params_per_gpu": int(sp.largest)})


def host_lines(sp: StageParams, plan: Plan) -> list[Line]:
    """Host memory one GPU's process needs for what lives off the device (CPU offload, paged state)."""
    out: list[Line] = []
    dense = _state_bytes(sp.trainable - sp.expert, sp.frozen_bytes - sp.expert_frozen_bytes, plan, expert=False)
    routed = _state_bytes(sp.expert, sp.expert_frozen_bytes, plan, expert=True)
    part = {k: dense[k][0] + routed[k][0] for k in dense}
    shard_opt = _shards(plan)[1]
    if plan.offload_params:
        out.append(Line("weights", part["weights"], "offloaded weights (16-bit, sharded)", {}))
    if plan.offload_optimizer:
        out.append(Line("master_weights", part["master_weights"], "offloaded fp32 master weights", {}))
        out.append(Line("optimizer_states", part["optimizer_states"], f"offloaded optimizer state ({plan.optimizer})", {}))
    if plan.offload_grads or plan.offload_optimizer and plan.zero >= 1:
        # the CPU optimizer steps on fp32 gradients (DeepSpeed's partition, FSDP's CPU grads)
        out.append(Line("gradients", 4 * sp.trainable / shard_opt, "offloaded fp32 gradients, P_trainable × 4 B / shard", {}))
    if _paged(plan):
        out.append(Line("optimizer_states", part["optimizer_states"],
                        "paged optimizer state (managed memory; evicted to host under pressure)", {}))
    return out


OVERHEADS = ("gathered_params", "comm_buckets", "optimizer_step_temporaries", "cublas_workspaces", "sp_gather_buffer",
             "allocator_reserve", "cuda_context", "nccl_buffers", "nccl_nvls_buffers", "tp_comm_overlap_buffers",
             "managed_memory")


def stage_lines(m: ModelSpec | None, params: float | None, plan: Plan, stage: int) -> list[Line]:
    return stage_breakdown(m, params, plan, stage)["lines"]


def estimate(m: ModelSpec | None, plan: Plan, *, params: float | None = None,
             gpu_memory: int | None = None, largest_layer: float | None = None,
             quick: bool = False) -> dict[str, Any]:
    """Breakdown of the worst stage, every stage's peak, the verdict against ``gpu_memory`` (bytes).

    ``quick`` (the search): only the stages that can be the worst — the first (most micro batches
    in flight, the embedding), the second (an extra layer of an uneven split) and the last (the loss).
    """
    stages = (sorted({0, min(1, plan.pp - 1), plan.pp - 1}) if quick else range(plan.pp)) if m is not None else [0]
    per_stage = [stage_breakdown(m, params, plan, st, largest_layer) for st in stages]
    worst = max(per_stage, key=lambda x: x["device"])
    lines = worst["lines"]
    breakdown = {x.name: int(round(x.bytes)) for x in lines if x.name not in OVERHEADS}
    breakdown["overheads"] = sum(int(round(x.bytes)) for x in lines if x.name in OVERHEADS)
    breakdown["total"] = sum(breakdown.values())
    out: dict[str, Any] = {
        "breakdown": breakdown,
        "lines": [x.to_dict() for x in lines],  # overheads itemised: gathered_params ... nccl_buffers
        "worst_stage": worst["stage"],
        "peak": {"phase": worst["phase"], "allocated": worst["allocated"], "reserved": worst["reserved"],
                 "device": breakdown["total"], **{f"{k}_allocated": v for k, v in worst["phases"].items()}},
        "stage_totals": {str(x["stage"]): x["device"] for x in per_stage},
        "stages": [{k: v for k, v in x.items() if k not in ("lines", "host_lines")} for x in per_stage],
        "memory": placement(worst, plan),
        "params_total": int(m.total_params()) if m is not None else int(params or 0),
        "gpu_memory": gpu_memory,
    }
    out.update(verdict(breakdown, gpu_memory))
    return out


def placement(stage: dict[str, Any], plan: Plan) -> dict[str, Any]:
    """Where the worst stage's bytes live: the caching allocator (reserved), the device outside it
    (CUDA context, NCCL buffers, managed memory), and host RAM (offload, paged state) per GPU and
    per node. The verdict judges the device; host RAM is what the node must have besides."""
    host = stage["host"]
    per_node = min(plan.gpus_per_node, plan.world)
    return {"device": stage["device"], "allocator_reserved": stage["reserved"],
            "outside_allocator": stage["outside_allocator"], "host_per_gpu": host,
            "host_per_node": host * per_node, "gpus_per_node": per_node,
            "host_lines": [x.to_dict() for x in stage["host_lines"]]}


def verdict(breakdown: dict[str, int], gpu_memory: int | None) -> dict[str, Any]:
    """fits (≤ 95 % of the GPU), tight (≤ 110 %: inside the estimate's error band), out-of-memory."""
    if not gpu_memory:
        return {"verdict": "unknown", "oom_when": None, "headroom": None}
    total = breakdown["total"]
    before_step = total - breakdown["optimizer_states"] - breakdown["master_weights"]  # allocated at the first step
    if total <= FITS_FRACTION * gpu_memory:
        v, when = "fits", None
    elif total <= TIGHT_FRACTION * gpu_memory:
        v, when = "tight", None
    else:
        v = "out-of-memory"
        when = "step 1" if before_step > gpu_memory else "first optimizer step (step 1 passes, step 2 fails)"
    return {"verdict": v, "oom_when": when, "headroom": int(gpu_memory - total)}
