"""Process groups as the frameworks build them, and which group shards which state.

Every state is sharded over the group that really holds a replica of it, and those groups differ
for dense and expert parameters:

- dense parameters (attention, norms, embedding, dense MLPs, shared experts): tensor-parallel over
  ``tp``; the distributed optimizer / ZeRO / FSDP shard them over the data-parallel group with
  context parallelism folded in, ``dp × cp`` (Megatron's ``data_parallel_group_with_cp``,
  torchtitan's ``dp_shard_cp``, DeepSpeed's data (× sequence) parallel group);
- routed experts: ``E / ep`` experts per GPU, each cut ``etp`` ways (expert tensor parallel),
  sharded over the *expert* data-parallel group only:
  - Megatron-core ("MoE parallel folding", Megatron-LM ``megatron/core/transformer/moe/README.md``):
    the attention side is generated as ``tp-cp-dp-pp``, the expert side as ``etp-ep-edp-pp`` over
    the same GPUs, so ``edp = world / (etp × ep × pp) = tp·cp·dp / (etp·ep)``;
    ``--expert-tensor-parallel-size`` defaults to ``--tensor-model-parallel-size``;
  - torchtitan (``ParallelDims``): ``dp_shard_mod_ep = dp_shard·cp / ep`` when ``etp = tp`` and
    ``dp_shard·cp·tp / ep`` when ``etp = 1`` (its default): the same formula;
  - DeepSpeed-MoE (and Megatron-DeepSpeed): the expert-parallel group is cut from the data-parallel
    group, ``edp = dp·cp / ep``; experts are not tensor-sliced (every TP rank holds the whole expert)
    unless expert tensor parallelism is enabled.

So Mixtral 8x7B with ``ep = 8`` on 8 GPUs has ``edp = 1``: the distributed optimizer cannot shard
the ~5.6 B expert parameters of a GPU at all, and FSDP does not either.
"""

from __future__ import annotations

import dataclasses

from llmdiag.memory.plan import Plan


@dataclasses.dataclass(frozen=True)
class Groups:
    tp: int
    pp: int
    cp: int
    dp: int
    ep: int
    etp: int  # expert tensor parallel: how many ways one expert's matrices are cut
    edp: int  # expert data parallel: the group expert states are sharded over (0: the layout is impossible)
    etp_replicates: bool  # DeepSpeed: the TP ranks hold the same (unsliced) experts

    @property
    def dense_shard(self) -> int:
        """The group ZeRO / FSDP / the distributed optimizer shard dense states over."""
        return self.dp * self.cp

    @property
    def expert_shard(self) -> int:
        return max(1, self.edp)

    def communicators(self, moe: bool) -> list[str]:
        """Groups with their own NCCL communicator (each holds buffers on every member)."""
        out = [g for g, v in (("dp", self.dp * self.cp), ("tp", self.tp), ("pp", self.pp), ("cp", self.cp),
                              ("ep", self.ep)) if v > 1]
        if moe and self.etp > 1 and self.etp != self.tp:
            out.append("etp")
        if moe and self.edp > 1 and self.edp != self.dense_shard:
            out.append("edp")
        return out


def expert_tp(plan: Plan) -> int:
    """Expert tensor-parallel size: as given, else the framework's default (Megatron-core: tp;
    torchtitan: 1 with expert parallelism, tp without; DeepSpeed-MoE: 1)."""
    if plan.etp is not None:
        return plan.etp
    if plan.ds_optimizer:
        return 1
    # without expert parallelism torchtitan's experts follow the dense tensor parallelism
    return plan.tp if plan.framework == "megatron" or plan.ep == 1 else 1


def of(plan: Plan) -> Groups:
    tp, cp, dp, ep = plan.tp, plan.cp, plan.dp_size, plan.ep
    etp = expert_tp(plan)
    if plan.ds_optimizer and plan.etp is None:
        # DeepSpeed-MoE: expert parallel cut from the data-parallel group, experts replicated over tp
        span = dp * cp
        edp = span // ep if span % ep == 0 else 0
        return Groups(tp, plan.pp, cp, dp, ep, 1, edp, True)
    span = tp * cp * dp
    edp = span // (ep * etp) if span % (ep * etp) == 0 else 0
    return Groups(tp, plan.pp, cp, dp, ep, etp, edp, False)


def check(plan: Plan) -> tuple[str, str] | None:
    """Why the expert layout cannot be built (message, fix), or None."""
    g = of(plan)
    if g.edp:
        return None
    if g.etp_replicates:
        span = plan.dp_size * plan.cp
        return (f"ep ({plan.ep}) does not divide dp×cp ({span}) that DeepSpeed cuts expert-parallel groups from",
                f"use ep in the divisors of {span}")
    span = plan.tp * plan.cp * plan.dp_size
    return (f"ep ({plan.ep}) × expert tp ({g.etp}) = {plan.ep * g.etp} does not divide tp×cp×dp ({span}) that"
            f" expert groups are cut from (world / pp)",
            f"use ep × expert tp dividing {span}")
