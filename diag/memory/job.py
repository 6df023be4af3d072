"""Resolve a planned job (model, plan, GPU memory) from its sources, and build the document.

Shared by ``llmdiag estimate-memory`` and the preflight ``memory`` probe so both read the same
inputs the same way: defaults < ``[job]`` config < DeepSpeed JSON < Megatron YAML < flags.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmdiag.errors import UsageError
from llmdiag.memory import checks, estimate, models, plan, search


def resolve_model(model: str | None, hf_config: str | None, dims: Mapping[str, Any]) -> models.ModelSpec | None:
    given = {k: v for k, v in dims.items() if v is not None}
    if hf_config:
        base = models.from_hf_config(hf_config)
    elif model and (model.endswith(".json") or Path(model).is_file()):
        base = models.from_hf_config(model)
    elif model:
        base = models.preset(model)
    elif given:
        missing = [k for k in ("layers", "hidden", "heads", "vocab") if k not in given]
        if missing:
            raise UsageError(f"explicit model dimensions need --{', --'.join(missing)} as well")
        given.setdefault("ffn", 4 * given["hidden"])
        return models.ModelSpec(name="custom", **given)
    else:
        return None
    if given:
        import dataclasses

        return dataclasses.replace(base, **given)
    return base


def resolve_plan(job: Mapping[str, Any], deepspeed: str | None, megatron: str | None,
                 flags: Mapping[str, Any]) -> plan.Plan:
    from llmdiag.memory.config import PLAN_KEYS

    layers: list[Mapping[str, Any]] = [{k: job.get(k) for k in PLAN_KEYS}]
    if deepspeed:
        layers.append(plan.from_deepspeed(deepspeed))
    if megatron:
        layers.append(plan.from_megatron_yaml(megatron))
    layers.append(flags)
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update({k: v for k, v in layer.items() if v is not None})
    if merged.get("dp") is None:
        merged["dp"] = "auto" if merged.get("world_size") else 1
    return plan.build(merged)


def build_doc(m: models.ModelSpec | None, p: plan.Plan, *, params: float | None, gpu_memory: int | None,
              gpu_memory_source: str | None, command: str = "estimate-memory") -> dict[str, Any]:
    if m is None and params is None:
        raise UsageError("no model: give --model, --hf-config, explicit dimensions (--layers ...) or --params")
    issues = checks.check_plan(m, p)
    est = estimate.estimate(m, p, params=params, gpu_memory=gpu_memory)
    suggestions: list[dict[str, Any]] = []
    if gpu_memory and est["verdict"] in ("out-of-memory", "tight"):
        suggestions = search.suggest(m, p, gpu_memory, params=params)
    bad = checks.failing(issues) or est["verdict"] == "out-of-memory"
    status = "fail" if bad else ("warn" if issues or est["verdict"] == "tight" else "pass")
    from llmdiag.result import SCHEMA_VERSION

    return {
        "schema_version": SCHEMA_VERSION, "command": command, "kind": "memory-estimate", "status": status,
        "model": m.to_dict() if m is not None else {"name": "params-only", "params": int(params or 0)},
        "plan": p.to_dict(),
        "gpu_memory": gpu_memory, "gpu_memory_source": gpu_memory_source,
        **{k: v for k, v in est.items() if k != "gpu_memory"},
        "plan_checks": [i.to_dict() for i in issues],
        "suggestions": suggestions,
    }


def gpu_memory_from_nvml(nvml_factory: Any = None, field: str = "memory_total_bytes") -> tuple[int | None, str]:
    """Smallest ``field`` (total or free bytes) over the local GPUs via llmdiag.nvml, or (None, reason)."""
    try:
        if nvml_factory is None:
            from llmdiag import nvml as nvml_mod  # owned by probes-a; may not be merged yet

            nvml_factory = nvml_mod.load
        api = nvml_factory()
    except Exception as exc:  # noqa: BLE001 - no driver, no library, module missing: "no GPU"
        return None, f"NVML not available ({type(exc).__name__})"
    try:
        values = [getattr(api.snapshot(i), field) for i in range(api.device_count())]
    finally:
        try:
            api.close()
        except Exception:  # noqa: BLE001 - closing a broken NVML handle must not hide the reading
            pass
    values = [v for v in values if v]
    if not values:
        return None, "NVML shows no GPU memory"
    return min(values), "NVML " + ("free memory" if "free" in field else "total memory")
