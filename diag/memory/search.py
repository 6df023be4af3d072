"""What fits: a bounded search over parallel layouts and memory knobs, ranked by an explained cost.

Layouts: tp (within a node, dividing heads and KV groups), pp (at most the layers), cp (when the
sequence allows), ep (MoE), and dp = world / (tp·pp·cp) for the fixed GPU count. Knobs: ZeRO
stage (or Megatron's distributed optimizer), recompute, micro batch, 8-bit optimizer state and
CPU offload. Memory falls and cost rises monotonically along every knob, so for each layout the
most frugal setting is tried first (a layout where even that does not fit is dropped), then the
knob settings in order of cost until one fits: the cheapest fitting plan of each layout.

The cost is a relative step-time overhead built from named terms, each a rule of thumb:
- recompute: full re-runs the forward (+33 % of a 3-pass step), per-op SAC ~+12 %, Megatron
  selective ~+2 %;
- pipeline bubble: (pp−1) / (micro batches + pp−1) of 1F1B;
- tensor parallel: two all-reduces of s·b·h per layer and pass, ~4 % per doubling in a node;
- context parallel: ring attention exchanges K/V, ~6 % per doubling; expert parallel: all-to-all, ~5 %;
- data parallel: ZeRO-1/2 move what an all-reduce moves (≈0); ZeRO-3 gathers weights again in
  backward (1.5× the volume, ~8 %);
- a halved micro batch: ~4 % (smaller GEMMs); 8-bit optimizer: ~2 %; CPU offload of the
  optimizer ~30 %, of weights ~60 % (PCIe transfers every step).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from llmdiag.memory import checks, groups
from llmdiag.memory.estimate import FITS_FRACTION, estimate
from llmdiag.memory.models import ModelSpec
from llmdiag.memory.plan import Plan

RECOMPUTE_COST = {"none": 0.0, "selective": 0.02, "sac": 0.12, "full": 0.33}
OFFLOAD = {"none": ({}, 0.0), "optimizer": ({"offload_optimizer": True, "offload_grads": True}, 0.30),
           "optimizer,params": ({"offload_optimizer": True, "offload_grads": True, "offload_params": True}, 0.60)}


def _divisors(n: int) -> list[int]:
    """Divisors in ascending order, found up to √n (a world of 10^6 GPUs takes a millisecond)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def layouts(m: ModelSpec, base: Plan, world: int) -> list[dict[str, int]]:
    out = []
    for tp in _divisors(world):
        if tp > base.gpus_per_node or m.heads % tp or m.kv % tp:
            continue
        for pp in _divisors(world // tp):
            if pp > 64 or m.layers < pp:
                continue
            for cp in _divisors(world // (tp * pp)):
                if cp > 8 or base.seq_len % (2 * cp if cp > 1 else 1) or (cp > 1 and base.seq_len < 8192):
                    continue
                dp = world // (tp * pp * cp)
                eps = [1]
                if m.moe:
                    eps = [e for e in _divisors(m.experts) if e <= 64 and groups.check(
                        base.replace(tp=tp, pp=pp, cp=cp, ep=e, dp=dp, pp_layers=None)) is None]
                for ep in eps:
                    out.append({"tp": tp, "pp": pp, "cp": cp, "ep": ep, "dp": dp})
    return out


def _knobs(base: Plan, offload: bool = True) -> list[dict[str, Any]]:
    zeros: list[dict[str, Any]] = [{"zero": 0, "distributed_optimizer": False}]
    zeros += [{"zero": 0, "distributed_optimizer": True}] if base.framework == "megatron" else []
    zeros += [{"zero": z, "distributed_optimizer": False} for z in (1, 2, 3)]
    recompute = ["none", "selective", "full"] + (["sac"] if base.framework == "torch" else [])
    if base.attention == "flash":
        recompute.remove("selective")  # recomputes the attention core, which flash attention never stores
    mbs = sorted({base.micro_batch, *(base.micro_batch >> i for i in range(1, 4) if base.micro_batch >> i)}, reverse=True)
    opts = [base.optimizer] + (["adam8bit"] if base.optimizer in ("adam", "adamw") else [])
    out = []
    for z, rc, mb, opt, off in itertools.product(zeros, recompute, mbs, opts, OFFLOAD if offload else ["none"]):
        out.append({**z, "recompute": rc, "micro_batch": mb, "optimizer": opt, "offload": off})
    return out


def cost_terms(p: Plan, base: Plan, knob: dict[str, Any]) -> dict[str, float]:
    """Named relative overheads of a plan (fractions of a step's time)."""
    terms = {"recompute": RECOMPUTE_COST[p.recompute]}
    if p.pp > 1:
        terms["pipeline_bubble"] = (p.pp - 1) / (p.num_microbatches + p.pp - 1)
    if p.tp > 1:
        terms["tensor_parallel"] = 0.04 * math.log2(p.tp)
    if p.cp > 1:
        terms["context_parallel"] = 0.06 * math.log2(p.cp)
    if p.ep > 1:
        terms["expert_parallel"] = 0.05 * math.log2(p.ep)
    if p.zero == 3:
        terms["zero3_regather"] = 0.08
    elif p.zero == 2:
        terms["zero2"] = 0.01
    if p.micro_batch < base.micro_batch:
        terms["smaller_micro_batch"] = 0.04 * math.log2(base.micro_batch / p.micro_batch)
    if p.optimizer == "adam8bit" and base.optimizer != "adam8bit":
        terms["8bit_optimizer"] = 0.02
    if knob["offload"] != "none":
        terms["cpu_offload"] = OFFLOAD[knob["offload"]][1]
    return {k: round(v, 4) for k, v in terms.items() if v}


def _comm_bytes(m: ModelSpec, p: Plan) -> dict[str, int]:
    """Bytes each GPU sends per step, by kind (16-bit values)."""
    n = m.total_params() / (p.tp * p.pp)
    d = p.dp_size * p.cp
    out = {}
    if d > 1:
        out["data_parallel"] = int((3 if p.zero == 3 else 2) * n * 2 * (d - 1) / d)
    if p.tp > 1:
        mbs = max(1, p.num_microbatches)
        tokens = p.seq_len / p.cp * p.micro_batch * mbs
        out["tensor_parallel"] = int(4 * 2 * tokens * m.hidden * 2 * (p.tp - 1) / p.tp * m.layers / p.pp)
    return out


def _settings(base: Plan, lay: dict[str, int], knob: dict[str, Any]) -> dict[str, Any]:
    """Only what differs from the starting plan, as flag names and values."""
    out: dict[str, Any] = {}
    for k in ("tp", "pp", "cp", "ep"):
        if lay[k] != getattr(base, k):
            out[k] = lay[k]
    for k in ("zero", "recompute", "micro_batch", "optimizer"):
        if knob[k] != getattr(base, k):
            out[k] = knob[k]
    if knob["distributed_optimizer"] and not base.distributed_optimizer:
        out["distributed_optimizer"] = True
    if knob["offload"] != "none":
        out["offload"] = knob["offload"]
    if lay["tp"] > 1 and not base.sequence_parallel and base.framework == "megatron":
        out["sequence_parallel"] = True
    return out


def _plan(base: Plan, lay: dict[str, int], knob: dict[str, Any]) -> Plan:
    kw = {k: lay[k] for k in ("tp", "pp", "cp", "ep")}
    kw.update({k: knob[k] for k in ("zero", "recompute", "micro_batch", "optimizer", "distributed_optimizer")})
    kw.update(OFFLOAD[knob["offload"]][0])
    if lay["tp"] > 1 and base.framework == "megatron":
        kw["sequence_parallel"] = True
    return base.replace(dp=lay["dp"], world_size=base.world if base.world_size is None else base.world_size,
                        pp_layers=None, **kw)


def suggest(m: ModelSpec | None, plan: Plan, gpu_memory: int, *, params: float | None = None,
            limit: int = 5, world: int | None = None, offload: bool = True) -> list[dict[str, Any]]:
    """The cheapest fitting plans on ``world`` GPUs (default: the plan's), best first."""
    if m is None:
        return []
    world = world or plan.world
    base = plan.replace(world_size=world, dp="auto", pp_layers=None)
    knobs = sorted(_knobs(base, offload), key=lambda k: sum(cost_terms(_plan(base, {"tp": 1, "pp": 1, "cp": 1, "ep": 1,
                                                                              "dp": world}, k), base, k).values()))
    frugal = {"zero": 3, "distributed_optimizer": False, "recompute": "full", "micro_batch": min(k["micro_batch"] for k in knobs),
              "optimizer": "adam8bit" if base.optimizer in ("adam", "adamw") else base.optimizer,
              "offload": "optimizer,params" if offload else "none"}
    found: list[dict[str, Any]] = []
    for lay in layouts(m, base, world):
        try:
            if checks.failing(checks.check_plan(m, _plan(base, lay, frugal))):
                continue
            if estimate(m, _plan(base, lay, frugal), quick=True)["breakdown"]["total"] > FITS_FRACTION * gpu_memory:
                continue  # not even the most frugal setting fits this layout
        except Exception:  # noqa: BLE001 - an impossible combination is simply not a candidate
            continue
        # the cheapest fitting setting, and the cheapest that keeps the optimizer as given
        picks: list[tuple[Plan, dict[str, Any], dict[str, Any]]] = []
        for knob in sorted(knobs, key=lambda k: sum(cost_terms(_plan(base, lay, k), base, k).values())):
            if picks and knob["optimizer"] != base.optimizer:
                continue
            p = _plan(base, lay, knob)
            est = estimate(m, p, gpu_memory=gpu_memory, quick=True)
            if est["verdict"] == "fits":
                est = estimate(m, p, gpu_memory=gpu_memory)  # every stage, for the plan shown
            if est["verdict"] == "fits":
                picks.append((p, knob, est))
                if knob["optimizer"] == base.optimizer:
                    break
        for p, knob, est in picks:
            found.append(_result(m, base, lay, p, knob, est))
    found.sort(key=lambda x: (x["expected_cost"], x["total"]))
    return found[:limit]


def _result(m: ModelSpec, base: Plan, lay: dict[str, int], p: Plan, knob: dict[str, Any],
            est: dict[str, Any]) -> dict[str, Any]:
    terms = cost_terms(p, base, knob)
    settings = _settings(base, lay, knob)
    return {
        "change": " ".join(f"--{k.replace('_', '-')}" + ("" if v is True else f" {v}") for k, v in settings.items())
                  or "(the plan as given)",
        "settings": settings, "expected_cost": round(sum(terms.values()), 4), "cost_terms": terms,
        "comm_bytes_per_step": _comm_bytes(m, p),
        "total": est["breakdown"]["total"], "headroom": est["headroom"], "breakdown": est["breakdown"],
        "peak_phase": est["peak"]["phase"], "verdict": est["verdict"],
        "plan": {k: v for k, v in p.to_dict().items() if k in (
            "tp", "pp", "dp_size", "cp", "ep", "zero", "micro_batch", "recompute", "distributed_optimizer",
            "sequence_parallel", "optimizer", "offload_params", "offload_optimizer")},
    }


def smallest_gpu_count(m: ModelSpec, plan: Plan, gpu_memory: int, *, max_gpus: int = 4096) -> dict[str, Any]:
    """The fewest GPUs (1, 2, 4, then multiples of a node) on which some plan fits without CPU
    offload (with it, almost anything fits on one GPU, at the CPU's pace), with that plan; ``gpus``
    is None when nothing fits up to the largest size tried (``searched_up_to``)."""
    node = plan.gpus_per_node
    sizes = [n for n in (1, 2, 4) if n < node] + [node * k for k in range(1, max_gpus // node + 1)]

    def fits(n: int) -> list[dict[str, Any]]:
        return suggest(m, plan, gpu_memory, world=n, limit=1, offload=False)

    # doubling to a size that fits, then bisection among the node multiples below it
    lo, hi = -1, None
    i = 0
    while i < len(sizes):
        if fits(sizes[i]):
            hi = i
            break
        lo = i
        i = len(sizes) if i == len(sizes) - 1 else min(i * 2 + 1, len(sizes) - 1)  # the bound is tried too
    if hi is None:
        return {"searched_up_to": sizes[-1], "gpus": None, "plan": None}
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(sizes[mid]):
            hi = mid
        else:
            lo = mid
    return {"searched_up_to": sizes[-1], "gpus": sizes[hi], "plan": fits(sizes[hi])[0]}
