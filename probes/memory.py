"""Preflight probe ``memory``: the planned job's parallel-plan checks and its memory estimate
against this node's measured free GPU memory (the ``[job]`` config section)."""

from __future__ import annotations

from collections.abc import Iterable

from llmdiag.context import Context
from llmdiag.errors import UsageError
from llmdiag.probe import BaseProbe, Requirement
from llmdiag.result import Result

GIB = 2**30


class MemoryPlanProbe(BaseProbe):
    name = "memory"
    description = "Parallel-plan checks and per-GPU memory estimate of the planned job"
    requires = frozenset({Requirement.CONFIG})
    config_section = "job"
    timeout_s = 30.0

    def run(self, ctx: Context) -> Iterable[Result]:
        from llmdiag.memory import checks, estimate, job, search
        from llmdiag.memory.plan import parse_size

        sec = ctx.config.section("job")
        if not sec.get("model") and not sec.get("params"):
            yield self.skip(ctx, "plan", "[job] names neither a model nor params")
            return
        flags = {}
        if sec.get("world_size") is None and ctx.launcher.world_size:
            flags["world_size"] = ctx.launcher.world_size  # the launcher knows the job's size
        if sec.get("gpus_per_node") is None and ctx.launcher.local_world_size:
            flags["gpus_per_node"] = ctx.launcher.local_world_size
        try:
            inputs = job.resolve(sec, flags)
        except UsageError as exc:
            yield self.fail(ctx, "plan", f"the [job] plan cannot be used: {exc}",
                            remediation="fix the [job] section (see docs/estimate-memory.md)", runbook="plan-invalid")
            return
        model, plan, params = inputs.model, inputs.plan, inputs.params
        issues = checks.check_plan(model, plan)
        for i in issues:
            helper = self.fail if i.severity == "fail" else self.warn
            yield helper(ctx, f"plan-{i.check}", i.message, remediation=i.fix, runbook=i.runbook,
                         data={"plan": plan.to_dict()})
        if not issues:
            yield self.ok(ctx, "plan", f"tp={plan.tp} pp={plan.pp} dp={plan.dp_size} cp={plan.cp} ep={plan.ep} is consistent")

        free, source = job.gpu_memory_from_nvml(ctx.nvml, "memory_free_bytes")  # what the job can still allocate
        if free is None and sec.get("gpu_memory"):
            free, source = parse_size(sec["gpu_memory"]), "config job.gpu_memory"
        if free is None:
            yield self.skip(ctx, "fit", f"no GPU memory to compare with: {source}; set [job] gpu_memory to check the fit")
            return
        est = estimate.estimate(model, plan, params=params, gpu_memory=free)
        total = est["breakdown"]["total"]
        ev = [("estimated per-GPU peak", round(total / GIB, 2), f"<= {round(free / GIB, 2)}", "GiB")]
        data = {"breakdown": est["breakdown"], "gpu_memory": free, "gpu_memory_source": source,
                "worst_stage": est["worst_stage"], "peak": est["peak"]}
        summary = (f"worst stage needs {total / GIB:.1f} GiB of {free / GIB:.1f} GiB ({source}) at its"
                   f" {est['peak']['phase']} peak")
        if est["verdict"] == "fits":
            yield self.ok(ctx, "fit", summary, evidence=ev, data=data)
            return
        tips = search.suggest(model, plan, free, params=params, limit=3)
        data["suggestions"] = tips
        fix = ("; or ".join(f"{t['change']} ({t['total'] / GIB:.1f} GiB)" for t in tips)
               if tips else "more GPUs, a smaller model or sequence; no nearby plan fits")
        if est["verdict"] == "tight":
            yield self.warn(ctx, "fit", summary + ": tight, fragmentation may push it over",
                            evidence=ev, remediation=fix, runbook="plan-does-not-fit", data=data)
        else:
            yield self.fail(ctx, "fit", f"{summary}: out of memory at {est['oom_when']}",
                            evidence=ev, remediation=fix, runbook="plan-does-not-fit", data=data)
