"""Per-GPU memory of one training step for the worst pipeline stage, line by line.

Model states (weights, gradients, fp32 master weights, optimizer moments) follow the ZeRO
paper's accounting; ZeRO stage ≥1 and Megatron's distributed optimizer shard optimizer state
and master weights over the data-parallel group (× context parallel, as Megatron does), stage
≥2 also gradients, stage 3 / FSDP also weights. Activations come from
:mod:`llmdiag.memory.activations` times the layers the pipeline schedule keeps in flight.
Overheads are the runtime costs the textbook formulas omit (REFERENCE §3).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from llmdiag.memory import activations
from llmdiag.memory.models import ModelSpec
from llmdiag.memory.plan import Plan

GIB = 1024**3
CUDA_CONTEXT = int(0.5 * GIB)  # context + cuBLAS workspace with lazy module loading
NCCL_PER_COMM = int(0.5 * GIB)  # rough buffers per communicator
ALLOCATOR_RESERVE = 0.05  # caching-allocator fragmentation, fraction of the rest
TIGHT_FRACTION = 0.90  # above this share of GPU memory the plan is "tight"
OPT_BYTES = {"adam": 8, "adamw": 8, "adam8bit": 2, "sgd": 4}


@dataclasses.dataclass
class Line:
    name: str
    bytes: float
    formula: str
    inputs: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "bytes": int(round(self.bytes)), "formula": self.formula, "inputs": self.inputs}


def stage_params(m: ModelSpec | None, params: float | None, plan: Plan, stage: int) -> float:
    """Parameters one GPU of pipeline stage ``stage`` holds (tensor and expert sharding applied)."""
    if m is None:
        return float(params) / (plan.tp * plan.pp)
    t = plan.tp
    per_stage = math.ceil(m.layers / plan.pp)
    layer = (m.attention_params() / t + m.experts / plan.ep * m.expert_params() / t
             + m.router_params() + 2 * m.norm_params())
    n = per_stage * layer
    if stage == 0:
        n += m.vocab * m.hidden / t + m.positions * m.hidden
    if stage == plan.pp - 1:
        n += m.norm_params()
        if not m.tied or plan.pp > 1:  # a tied head on another stage keeps its own copy
            n += m.vocab * m.hidden / t
    return n


def model_state_lines(n: float, plan: Plan) -> list[Line]:
    d = plan.dp_size * plan.cp
    w = 4 if plan.precision == "fp32" else 2
    g = 4 if (plan.grad_fp32 or plan.precision == "fp32") else 2
    master = 4 if plan.precision != "fp32" and plan.master_weights else 0
    k = OPT_BYTES[plan.optimizer]
    shard_opt = d if (plan.zero >= 1 or plan.distributed_optimizer) else 1
    shard_grad = d if plan.zero >= 2 else 1
    shard_w = d if plan.zero == 3 else 1
    inp = {"params_per_gpu": int(n), "zero": plan.zero, "shard_group": d}
    return [
        Line("weights", n * w / shard_w, f"P × {w} B / {shard_w}", inp),
        Line("gradients", n * g / shard_grad, f"P × {g} B / {shard_grad}", inp),
        Line("master_weights", n * master / shard_opt, f"P × {master} B / {shard_opt}", inp),
        Line("optimizer_states", n * k / shard_opt, f"P × {k} B ({plan.optimizer}) / {shard_opt}", inp),
    ]


def in_flight(plan: Plan, stage: int) -> float:
    """Micro batches whose activations a stage holds at the 1F1B peak (× interleaving factor)."""
    if plan.pp == 1:
        return 1.0
    mb = min(plan.pp - stage, plan.num_microbatches)
    if plan.vpp > 1:
        return mb * (1 + (plan.pp - 1) / (plan.pp * plan.vpp))
    return float(mb)


def activation_lines(m: ModelSpec, plan: Plan, stage: int) -> list[Line]:
    per_stage = math.ceil(m.layers / plan.pp)
    per_layer = activations.layer_bytes(m, plan)
    flight = in_flight(plan, stage)
    inputs = {"s": plan.seq_len, "b": plan.micro_batch, "h": m.hidden, "a": m.heads, "t": plan.tp,
              "cp": plan.cp, "sp": plan.sequence_parallel, "recompute": plan.recompute,
              "attention": plan.attention, "layers_on_stage": per_stage, "micro_batches_in_flight": flight,
              "per_layer_bytes": int(per_layer),
              "terms": {name: int(v) for name, v in activations.layer_terms(m, plan)}}
    total = per_layer * per_stage * flight
    formula = "per_layer × layers_on_stage × micro_batches_in_flight"
    if plan.recompute == "full":  # backward recomputes one layer at a time and holds its activations
        work = activations.layer_bytes(m, plan, recompute="none")
        total += work
        inputs["recompute_working_set_bytes"] = int(work)
        formula += " + one recomputed layer"
    lines = [Line("activations", total, formula, inputs)]
    s = plan.seq_len / plan.cp
    logits = 4 * s * plan.micro_batch * m.vocab / plan.tp if stage == plan.pp - 1 else 0.0
    lines.append(Line("logits", logits, "4·s·b·V/t (fp32 logits + loss, last stage)",
                      {"s": int(s), "b": plan.micro_batch, "V": m.vocab, "t": plan.tp}))
    return lines


OVERHEADS = ("comm_buckets", "cuda_context", "nccl_buffers", "allocator_reserve")


def overhead_lines(plan: Plan, rest: float) -> list[Line]:
    """Runtime costs outside the textbook formulas; together they form ``breakdown["overheads"]``."""
    groups = {"dp": plan.dp_size * plan.cp, "tp": plan.tp, "pp": plan.pp, "cp": plan.cp, "ep": plan.ep}
    comms = [g for g, v in groups.items() if v > 1]
    buckets = 2 * plan.bucket_mb * 1e6 if groups["dp"] > 1 else 0.0
    return [
        Line("comm_buckets", buckets, "2 × reduce bucket (DDP / ZeRO), when dp×cp > 1",
             {"bucket_mb": plan.bucket_mb, "dp_cp": groups["dp"]}),
        Line("cuda_context", CUDA_CONTEXT, "CUDA context + cuBLAS workspace (lazy module loading)", {}),
        Line("nccl_buffers", NCCL_PER_COMM * len(comms), "NCCL buffers × communicators",
             {"communicators": comms, "per_communicator": NCCL_PER_COMM}),
        Line("allocator_reserve", ALLOCATOR_RESERVE * (rest + buckets), "caching-allocator fragmentation × (model states + activations + logits + buckets)",
             {"fraction": ALLOCATOR_RESERVE}),
    ]


def stage_lines(m: ModelSpec | None, params: float | None, plan: Plan, stage: int) -> list[Line]:
    lines = model_state_lines(stage_params(m, params, plan, stage), plan)
    if m is not None:
        lines += activation_lines(m, plan, stage)
    else:
        lines += [Line("activations", 0, "not estimated (--params gives model states only)", {}),
                  Line("logits", 0, "not estimated (--params gives model states only)", {})]
    lines += overhead_lines(plan, sum(x.bytes for x in lines))
    return lines


def estimate(m: ModelSpec | None, plan: Plan, *, params: float | None = None,
             gpu_memory: int | None = None) -> dict[str, Any]:
    """Breakdown of the worst stage, the verdict against ``gpu_memory`` (bytes) when known."""
    stages = sorted({0, plan.pp - 1})
    per_stage = {st: stage_lines(m, params, plan, st) for st in stages}
    worst = max(stages, key=lambda st: sum(x.bytes for x in per_stage[st]))
    lines = per_stage[worst]
    breakdown = {x.name: int(round(x.bytes)) for x in lines if x.name not in OVERHEADS}
    breakdown["overheads"] = sum(int(round(x.bytes)) for x in lines if x.name in OVERHEADS)
    breakdown["total"] = sum(breakdown.values())
    out: dict[str, Any] = {
        "breakdown": breakdown,
        "lines": [x.to_dict() for x in lines],  # overheads itemised: comm_buckets ... allocator_reserve
        "worst_stage": worst,
        "stage_totals": {str(st): int(sum(x.bytes for x in per_stage[st])) for st in stages},
        "params_total": int(m.total_params()) if m is not None else int(params or 0),
        "gpu_memory": gpu_memory,
    }
    out.update(verdict(breakdown, gpu_memory))
    return out


def verdict(breakdown: dict[str, int], gpu_memory: int | None) -> dict[str, Any]:
    if not gpu_memory:
        return {"verdict": "unknown", "oom_when": None, "headroom": None}
    total = breakdown["total"]
    before_step = total - breakdown["optimizer_states"]  # torch allocates moments at the first step
    if total <= TIGHT_FRACTION * gpu_memory:
        v, when = "fits", None
    elif total <= gpu_memory:
        v, when = "tight", None
    else:
        v = "out-of-memory"
        when = "step 1" if before_step > gpu_memory else "first optimizer step (step 1 passes, step 2 fails)"
    return {"verdict": v, "oom_when": when, "headroom": int(gpu_memory - total)}
