"""What fits: nearby plans that pass the plan checks and fit in GPU memory, cheapest first.

The world size stays fixed, so more tp/pp/cp means less dp. Each candidate changes one or two
knobs; its expected cost is a rough relative slowdown (step time) from the literature's rules
of thumb, so the ranking prefers changes that cost little throughput:
distributed optimizer / ZeRO-1 (≈free: one reduce-scatter + all-gather instead of all-reduce),
selective recompute (≈2-3 %), ZeRO-2 (≈3 %), smaller micro batch (≈5 %, less arithmetic
intensity), more tp within a node (≈8 % per doubling), more pp (≈10 % per doubling: bubble),
cp (≈10 %), ZeRO-3 (≈15 %: weights gathered every step), full recompute (≈33 %: one more forward).
"""

from __future__ import annotations

from typing import Any

from llmdiag.memory import checks
from llmdiag.memory.estimate import estimate
from llmdiag.memory.models import ModelSpec
from llmdiag.memory.plan import Plan


def _candidates(p: Plan) -> list[tuple[str, float, dict[str, Any]]]:
    c: list[tuple[str, float, dict[str, Any]]] = []
    if p.zero == 0 and not p.distributed_optimizer:
        c.append(("use the distributed optimizer (shard optimizer state over dp)", 0.01, {"distributed_optimizer": True}))
        c.append(("use ZeRO stage 1", 0.01, {"zero": 1}))
    if p.recompute == "none":
        c.append(("selective activation recomputation", 0.03, {"recompute": "selective"}))
    if p.zero < 2:
        c.append(("use ZeRO stage 2 (also shard gradients)", 0.03, {"zero": 2}))
    if p.tp > 1 and not p.sequence_parallel:
        c.append(("enable sequence parallelism", 0.01, {"sequence_parallel": True}))
    mb = p.micro_batch
    while mb > 1:
        mb //= 2
        c.append((f"micro batch {mb}", 0.05 * ((p.micro_batch // mb).bit_length() - 1), {"micro_batch": mb}))
    for k in (2, 4, 8):
        tp = p.tp * k
        if tp <= p.gpus_per_node:
            c.append((f"tensor parallel {tp} (within a node)", 0.08 * (k.bit_length() - 1), {"tp": tp, "sequence_parallel": True}))
        c.append((f"pipeline parallel {p.pp * k}", 0.10 * (k.bit_length() - 1), {"pp": p.pp * k}))
        c.append((f"context parallel {p.cp * k}", 0.10 * (k.bit_length() - 1), {"cp": p.cp * k}))
    if p.zero < 3:
        c.append(("use ZeRO stage 3 / FSDP (also shard weights)", 0.15, {"zero": 3}))
    if p.recompute != "full":
        c.append(("full activation recomputation", 0.33, {"recompute": "full"}))
    return c


def suggest(m: ModelSpec | None, plan: Plan, gpu_memory: int, *, params: float | None = None,
            limit: int = 6) -> list[dict[str, Any]]:
    """Single changes, then pairs of the cheapest, that make the plan fit; ranked by expected cost."""
    # Keep the GPU count: more tp/pp/cp comes out of dp (dp follows the world size).
    base = plan.replace(world_size=plan.world, dp="auto") if plan.world_size is None else plan.replace(dp="auto")
    singles = _candidates(base)
    tried: list[tuple[str, float, dict[str, Any]]] = list(singles)
    for i, (n1, c1, k1) in enumerate(singles):
        for n2, c2, k2 in singles[i + 1:]:
            if set(k1) & set(k2):
                continue
            tried.append((f"{n1} + {n2}", c1 + c2, {**k1, **k2}))
    found: list[dict[str, Any]] = []
    seen: set[tuple] = set()
    fitting_singles: list[dict[str, Any]] = []
    for name, cost, change in sorted(tried, key=lambda x: x[1]):
        if any(all(change.get(k) == v for k, v in single.items()) for single in fitting_singles):
            continue  # a pair that contains a change which fits alone only adds cost
        try:
            new = base.replace(**change)
            issues = checks.failing(checks.check_plan(m, new))
        except Exception:  # noqa: BLE001 - an impossible combination (e.g. dp would be 0) is simply not a candidate
            continue
        if issues or new.tp * new.pp * new.cp > base.world:
            continue
        est = estimate(m, new, params=params, gpu_memory=gpu_memory)
        if est["verdict"] != "fits":
            continue
        key = tuple(sorted(change.items()))
        if key in seen:
            continue
        seen.add(key)
        fitting_singles.append(change)
        found.append({"change": name, "settings": change, "expected_cost": cost,
                      "total": est["breakdown"]["total"], "breakdown": est["breakdown"], "verdict": est["verdict"],
                      "plan": {k: v for k, v in new.to_dict().items() if k in ("tp", "pp", "dp_size", "cp", "zero",
                               "micro_batch", "recompute", "distributed_optimizer", "sequence_parallel")}})
        if len(found) >= limit:
            break
    return found
