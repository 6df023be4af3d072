"""Plan checks: the divisibility rules Megatron / DeepSpeed / torchtitan enforce at launch.

Each violation names the numbers that clash and a value that would satisfy the rule, so a
user fixes the plan before queueing hours for a job that dies in its first second.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from llmdiag.memory import groups
from llmdiag.memory.models import ModelSpec
from llmdiag.memory.plan import Plan


@dataclasses.dataclass(frozen=True)
class PlanIssue:
    check: str
    severity: str  # "fail" (the framework refuses) or "warn" (works, but slowly)
    message: str
    fix: str
    runbook: str = "plan-invalid"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _near(n: int, of: int) -> str:
    """Nearest values of ``of``'s divisors to ``n`` (what tp/pp could be instead)."""
    ds = sorted(_divisors(of), key=lambda d: (abs(d - n), d))[:3]
    return ", ".join(str(d) for d in sorted(ds))


def check_plan(m: ModelSpec | None, plan: Plan) -> list[PlanIssue]:
    out: list[PlanIssue] = []
    tp, pp, cp, d = plan.tp, plan.pp, plan.cp, plan.dp_size
    if plan.world_size is not None:
        prod = tp * pp * d * cp
        if prod != plan.world_size:
            mp = tp * pp * cp
            if plan.world_size % mp == 0:
                fix = f"use dp = {plan.world_size // mp} (= world / (tp×pp×cp)), or --dp auto"
            else:
                lo = mp * max(1, plan.world_size // mp)
                fix = (f"world size {plan.world_size} is not a multiple of tp×pp×cp = {mp}: run on {lo} or {lo + mp}"
                       f" GPUs, or choose tp, pp, cp whose product divides {plan.world_size}")
            out.append(PlanIssue("world-size", "fail",
                                 f"tp({tp}) × pp({pp}) × dp({d}) × cp({cp}) = {prod} != world size ({plan.world_size})", fix))
    if tp > plan.gpus_per_node:
        out.append(PlanIssue("tp-within-node", "warn",
                             f"tp({tp}) > GPUs per node ({plan.gpus_per_node}): tensor-parallel all-reduces cross the network",
                             f"keep tp <= {plan.gpus_per_node} and move the rest into pp or cp", "tp-spans-nodes"))
    elif plan.gpus_per_node % tp:
        out.append(PlanIssue("tp-within-node", "warn",
                             f"GPUs per node ({plan.gpus_per_node}) is not a multiple of tp({tp}): some TP groups span two nodes",
                             f"use tp in {_divisors(plan.gpus_per_node)}", "tp-spans-nodes"))
    if plan.global_batch is not None and plan.global_batch % (plan.micro_batch * d):
        mb = plan.micro_batch * d
        lo = max(mb, plan.global_batch // mb * mb)
        out.append(PlanIssue("global-batch", "fail",
                             f"global batch ({plan.global_batch}) is not divisible by micro batch ({plan.micro_batch}) × dp ({d}) = {mb}",
                             f"use a global batch of {lo} or {lo + mb}"))
    if plan.seq_len % cp:
        out.append(PlanIssue("seq-cp", "fail", f"sequence length ({plan.seq_len}) is not divisible by cp ({cp})",
                             f"use a sequence length of {plan.seq_len // cp * cp or cp} or {(plan.seq_len // cp + 1) * cp}"))
    elif cp > 1 and plan.seq_len % (2 * cp):
        # load-balanced (zig-zag) CP splits each sequence into 2·cp chunks
        out.append(PlanIssue("seq-cp", "fail",
                             f"sequence length ({plan.seq_len}) is not divisible by 2·cp ({2 * cp}), as load-balanced context parallelism needs",
                             f"use a sequence length that is a multiple of {2 * cp}"))
    if plan.sequence_parallel and tp > 1 and (plan.seq_len // cp) % tp:
        out.append(PlanIssue("seq-sp", "fail", f"sequence length per cp rank ({plan.seq_len // cp}) is not divisible by tp ({tp}) for sequence parallelism",
                             f"use a sequence length that is a multiple of {tp * cp}"))
    if m is None:
        return out
    n = pp * plan.vpp
    if plan.pp_layers is not None and sum(plan.pp_layers) != m.layers:
        out.append(PlanIssue("layers-pp", "fail",
                             f"the pipeline split {list(plan.pp_layers)} holds {sum(plan.pp_layers)} layers, the model has {m.layers}",
                             f"give per-stage layer counts that add up to {m.layers}"))
    elif m.layers < n:
        out.append(PlanIssue("layers-pp", "fail", f"layers ({m.layers}) are fewer than pp ({pp}) × virtual stages ({plan.vpp}) = {n}",
                             f"use pp × vpp in {{{_near(n, m.layers)}}} (divisors of {m.layers})"))
    elif m.layers % n and plan.pp_layers is None:
        # torchtitan splits unevenly; Megatron needs the first/last stage sizes given explicitly
        out.append(PlanIssue("layers-pp", "warn",
                             f"layers ({m.layers}) are not divisible by pp ({pp}) × virtual stages ({plan.vpp}) = {n}: stages hold"
                             f" {m.layers // n} or {m.layers // n + 1} layers (Megatron needs --decoder-first/last-pipeline-num-layers)",
                             f"use pp × vpp in {{{_near(n, m.layers)}}} for an even split, or give --pp-layers"))
    if m.heads % tp:
        out.append(PlanIssue("heads-tp", "fail", f"attention heads ({m.heads}) are not divisible by tp ({tp})",
                             f"use tp in {{{_near(tp, m.heads)}}}"))
    if m.kv % tp:
        # Megatron asserts num_query_groups % tensor_model_parallel_size == 0
        out.append(PlanIssue("kv-groups-tp", "fail",
                             f"KV groups ({m.kv}) are not divisible by tp ({tp})",
                             f"use tp in {{{_near(tp, m.kv)}}} (divisors of {m.kv})"))
    if m.experts > 1 and m.experts % plan.ep:
        out.append(PlanIssue("experts-ep", "fail", f"experts ({m.experts}) are not divisible by ep ({plan.ep})",
                             f"use ep in {{{_near(plan.ep, m.experts)}}}"))
    elif not m.moe and plan.ep > 1:
        out.append(PlanIssue("experts-ep", "fail", f"ep ({plan.ep}) > 1 on a dense model ({m.name}, no experts)", "use ep = 1"))
    bad_groups = groups.check(plan) if m.moe else None
    if bad_groups:
        out.append(PlanIssue("experts-ep", "fail", *bad_groups))
    return out


#: checks whose failure makes the plan invalid (a usage error, exit 2), not merely a bad fit
INVALID = ("world-size", "layers-pp", "heads-tp", "kv-groups-tp", "experts-ep", "seq-cp", "seq-sp", "global-batch")


def failing(issues: list[PlanIssue]) -> list[PlanIssue]:
    return [i for i in issues if i.severity == "fail"]
