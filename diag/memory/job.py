"""Resolve a planned job (model, plan, GPU memory) from its sources, and build the document.

Every input of ``llmdiag estimate-memory`` and of the preflight ``memory`` probe is merged here,
in :func:`resolve` and :func:`gpu_memory`, so both read the same inputs the same way. Later wins:

- plan: :class:`~llmdiag.memory.plan.Plan`'s defaults < ``[job]`` < torchtitan TOML < DeepSpeed
  JSON < Megatron YAML < flags (``--fsdp`` and ``--qlora`` are shorthands expanded into flags);
- model: ``--hf-config`` > ``--model`` > ``[job] model`` > the torchtitan TOML's model; explicit
  dimensions (``--layers`` ...) replace the chosen model's; ``--params`` > ``[job] params`` count
  only without a model;
- GPU memory: ``--gpu-memory`` > ``[job] gpu_memory`` > the smallest GPU's total via NVML (the
  probe measures free memory first: it judges this node now).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmdiag.errors import UsageError
from llmdiag.memory import checks, estimate, models, plan, search


#: estimate-memory's model dimension flags (they override the preset's or config.json's)
DIMENSIONS = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "gated", "vocab", "tied", "bias", "positions",
              "experts", "top_k", "shared_experts", "shared_ffn", "dense_layers", "dense_ffn", "kv_lora_rank",
              "q_lora_rank", "qk_nope_dim", "qk_rope_dim", "v_head_dim")
#: plan flags without a [job] key: two shorthands and two plan fields only the command line sets
SHORTHAND_FLAGS = ("fsdp", "qlora", "master_weights", "grad_fp32")


@dataclasses.dataclass
class JobInputs:
    """The merged inputs: the model (None with a parameter count only), the plan, and what the
    sources said that was not used."""

    model: models.ModelSpec | None
    plan: plan.Plan
    params: float | None
    warnings: list[str]


def resolve(section: Mapping[str, Any], flags: Mapping[str, Any], *, dims: Mapping[str, Any] | None = None,
            extra_flags: Mapping[str, Any] | None = None, hf_config: str | None = None,
            deepspeed: str | None = None, megatron: str | None = None,
            torchtitan: str | None = None) -> JobInputs:
    """Merge every source of the job, in the module's documented order. ``section`` is the
    validated ``[job]`` section, ``flags`` the ``[job]`` keys given on the command line (None: not
    given), ``extra_flags`` the :data:`SHORTHAND_FLAGS`."""
    warnings: list[str] = []
    flags = dict(flags)
    model_flag, params_flag = flags.pop("model", None), flags.pop("params", None)
    flags.pop("gpu_memory", None)  # gpu_memory() merges it
    extra = dict(extra_flags or {})
    if extra.pop("fsdp", None):
        flags.update(zero=3, framework=flags.get("framework") or "torch")
    if extra.pop("qlora", None):
        flags.update(base_quant="nf4", lora_rank=flags.get("lora_rank") or 8)
    flags.update(extra)
    from llmdiag.memory import readers

    files: list[Mapping[str, Any]] = []  # the plan files, in precedence order
    file_warnings: list[str] = []
    titan_model = None
    if torchtitan:
        fields, titan_model, w = readers.from_torchtitan_toml(torchtitan)
        files.append(fields)
        file_warnings += w
    for path, read in ((deepspeed, readers.from_deepspeed), (megatron, readers.from_megatron_yaml)):
        if path:
            fields, w = read(path)
            files.append(fields)
            file_warnings += w
    model_name = model_flag or (None if hf_config else section.get("model")) or (titan_model if not hf_config else None)
    params = params_flag or (section.get("params") if not (model_name or hf_config) else None)
    m = resolve_model(model_name, hf_config, dims or {}, warnings)
    warnings += file_warnings
    p = resolve_plan(section, files, flags)
    return JobInputs(m, p, None if m else params, warnings)


def gpu_memory(flag: int | None, section: Mapping[str, Any], nvml_factory: Any = None) -> tuple[int | None, str]:
    """The GPU memory to plan against and where it came from: ``--gpu-memory`` (bytes) >
    ``[job] gpu_memory`` > the smallest local GPU's total via NVML."""
    if flag is not None:
        return flag, "--gpu-memory"
    if section.get("gpu_memory"):
        return plan.parse_size(section["gpu_memory"]), "config job.gpu_memory"
    return gpu_memory_from_nvml(nvml_factory)


def resolve_model(model: str | None, hf_config: str | None, dims: Mapping[str, Any],
                  warnings: list[str] | None = None) -> models.ModelSpec | None:
    given = {k: v for k, v in dims.items() if v is not None}
    if "head_dim" in given:
        given["head_dim_"] = given.pop("head_dim")
    path = hf_config or (model if model and (model.endswith(".json") or Path(model).is_file()) else None)
    if path:
        base, unused = models.read_hf_config(path)
        if warnings is not None:
            warnings.extend(unused)
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


def resolve_plan(job: Mapping[str, Any], files: list[Mapping[str, Any]], flags: Mapping[str, Any]) -> plan.Plan:
    """The plan from its layers, later winning: defaults < [job] < ``files`` (as read, in their
    order) < flags. A None value is "not given" in every layer."""
    from llmdiag.memory.config import PLAN_KEYS

    layers: list[Mapping[str, Any]] = [{k: job.get(k) for k in PLAN_KEYS}, *files, flags]
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update({k: v for k, v in layer.items() if v is not None})
    if merged.get("dp") is None:
        merged["dp"] = "auto" if merged.get("world_size") else 1
    if isinstance(merged.get("offload"), (list, tuple, str)):
        merged.update(offload_fields(merged.pop("offload")))
    else:
        merged.pop("offload", None)
    if isinstance(merged.get("pp_layers"), str):
        merged["pp_layers"] = parse_int_list(merged["pp_layers"], "pp_layers")
    return plan.build(merged)


OFFLOAD_PARTS = ("params", "grads", "optimizer", "activations")


def offload_fields(value: str | list[str] | tuple[str, ...]) -> dict[str, bool]:
    """``"optimizer,params"`` / ``["all"]`` → the plan's offload_* fields."""
    parts = [x.strip() for x in (value.split(",") if isinstance(value, str) else value) if str(x).strip()]
    if "all" in parts:
        parts = list(OFFLOAD_PARTS)
    bad = [x for x in parts if x not in OFFLOAD_PARTS and x != "none"]
    if bad:
        raise UsageError(f"offload: unknown part {bad[0]!r} (use {', '.join(OFFLOAD_PARTS)}, all or none)")
    out = {f"offload_{p}": p in parts for p in OFFLOAD_PARTS}
    if out["offload_optimizer"]:
        out["offload_grads"] = True  # the optimizer steps on the CPU, so the gradients go there too
    return out


def parse_int_list(text: str, what: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(x) for x in text.replace(" ", "").split(",") if x)
    except ValueError:
        raise UsageError(f"{what}: expected comma-separated integers, got {text!r}") from None
    if not vals or any(v < 0 for v in vals):
        raise UsageError(f"{what}: expected comma-separated non-negative integers, got {text!r}")
    return vals


def build_doc(m: models.ModelSpec | None, p: plan.Plan, *, params: float | None, gpu_memory: int | None,
              gpu_memory_source: str | None, command: str = "estimate-memory", warnings: list[str] | None = None,
              largest_layer: float | None = None, search_gpus: bool = False, always_search: bool = False) -> dict[str, Any]:
    if m is None and params is None:
        raise UsageError("no model: give --model, --hf-config, explicit dimensions (--layers ...) or --params")
    issues = checks.check_plan(m, p)
    est = estimate.estimate(m, p, params=params, gpu_memory=gpu_memory, largest_layer=largest_layer)
    suggestions: list[dict[str, Any]] = []
    if gpu_memory and m is not None and (always_search or est["verdict"] in ("out-of-memory", "tight")
                                         or checks.failing(issues)):
        suggestions = search.suggest(m, p, gpu_memory)
    smallest = search.smallest_gpu_count(m, p, gpu_memory) if (search_gpus and gpu_memory and m is not None) else None
    if any(i.check in checks.INVALID for i in checks.failing(issues)):
        # the framework refuses the plan at launch: no memory verdict stands beside that
        est.update(verdict="invalid-plan", oom_when=None)
    bad = checks.failing(issues) or est["verdict"] == "out-of-memory"
    status = "fail" if bad else ("warn" if issues or est["verdict"] in ("tight", "unknown") else "pass")
    from llmdiag.result import SCHEMA_VERSION

    doc = {
        "schema_version": SCHEMA_VERSION, "command": command, "kind": "memory-estimate", "status": status,
        "model": m.to_dict() if m is not None else {"name": "params-only", "params": int(params or 0)},
        "plan": p.to_dict(),
        "gpu_memory": gpu_memory, "gpu_memory_source": gpu_memory_source,
        **{k: v for k, v in est.items() if k != "gpu_memory"},
        "plan_checks": [i.to_dict() for i in issues],
        "suggestions": suggestions,
        "warnings": list(warnings or []),
    }
    if est["verdict"] == "unknown":
        doc["warnings"].append(f"cannot judge the fit without a GPU memory ({gpu_memory_source}); "
                               "give --gpu-memory 80GiB or [job] gpu_memory")
    if smallest is not None:
        doc["smallest_gpu_count"] = smallest
    return doc


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
