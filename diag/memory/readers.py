"""Plan fields from the training configs people already have: DeepSpeed JSON, Megatron / NeMo
YAML and torchtitan TOML. Each reader returns the plan fields it found and one warning per key
it read but does not use (so a setting that changes memory is never dropped silently).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llmdiag.errors import UsageError
from llmdiag.util import toml as tomllib

Fields = dict[str, Any]


def _load(path: str | Path, what: str, kind: str) -> Any:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{what}: file {str(p)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{what}: cannot read {str(p)!r}: {exc}") from None
    try:
        if kind == "yaml":
            import yaml  # lazy

            data = yaml.safe_load(text)
        elif kind == "toml":
            data = tomllib.loads(text)
        else:
            data = json.loads(text)
    except Exception as exc:  # noqa: BLE001 - yaml, toml and json raise different types; all mean "bad file"
        raise UsageError(f"{what}: {str(p)!r} is not valid: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{what}: {str(p)!r} does not hold a mapping")
    return data


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _num(v: Any) -> float | None:
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


class _Tracked:
    """A config file flattened to dotted keys, remembering which keys the reader looked at."""

    def __init__(self, path: str | Path, what: str, kind: str):
        self.what = what
        self.flat = _flatten(_load(path, what, kind))
        self.used: set[str] = set()

    def get(self, key: str) -> Any:
        if key in self.flat:
            self.used.add(key)
        return self.flat.get(key)

    def unused(self, inert: tuple[str, ...]) -> list[str]:
        return _warn_unused(self.what, self.flat, self.used, inert)


def _warn_unused(what: str, flat: dict[str, Any], used: set[str], inert: tuple[str, ...]) -> list[str]:
    return [f"{what}: key {k!r} read but not used by the estimate" for k in flat
            if k not in used and not any(k == p or k.startswith(p + ".") for p in inert)]


# ---- DeepSpeed -------------------------------------------------------------------------------
_DS_INERT = ("gradient_clipping", "steps_per_print", "wall_clock_breakdown", "scheduler", "optimizer.params",
             "fp16.loss_scale", "fp16.initial_scale_power", "fp16.loss_scale_window", "fp16.hysteresis",
             "fp16.min_loss_scale", "fp16.auto_cast", "tensorboard", "wandb", "csv_monitor", "flops_profiler",
             "comms_logger", "zero_optimization.contiguous_gradients", "zero_optimization.round_robin_gradients",
             "zero_optimization.reduce_scatter", "zero_optimization.allgather_partitions",
             "zero_optimization.stage3_gather_16bit_weights_on_model_save", "zero_optimization.sub_group_size",
             "zero_optimization.stage3_param_persistence_threshold", "zero_allow_untested_optimizer",
             "zero_optimization.offload_optimizer.pin_memory", "zero_optimization.offload_param.pin_memory",
             "zero_optimization.offload_optimizer.buffer_count", "zero_optimization.offload_param.buffer_count",
             "zero_optimization.offload_param.buffer_size", "zero_optimization.offload_optimizer.fast_init",
             "zero_optimization.offload_param.max_in_cpu", "zero_optimization.offload_optimizer.nvme_path",
             "zero_optimization.offload_param.nvme_path", "prescale_gradients", "communication_data_type",
             "zero_optimization.load_from_fp32_weights", "activation_checkpointing.profile",
             "activation_checkpointing.synchronize_checkpoint_boundary", "activation_checkpointing.number_checkpoints",
             "activation_checkpointing.contiguous_memory_optimization", "data_types", "gradient_predivide_factor")


def from_deepspeed(path: str | Path) -> tuple[Fields, list[str]]:
    """Plan fields from a DeepSpeed config JSON ("auto" values are left to other sources)."""
    cfg = _Tracked(path, "--deepspeed-config", "json")
    flat, used, get = cfg.flat, cfg.used, cfg.get

    out: Fields = {"framework": "deepspeed", "deepspeed_engine": True}  # with a Megatron YAML: Megatron-DeepSpeed
    if _num(get("zero_optimization.stage")) is not None:
        out["zero"] = int(flat["zero_optimization.stage"])
    if _num(get("zero_optimization.reduce_bucket_size")) is not None:
        out["bucket_mb"] = float(flat["zero_optimization.reduce_bucket_size"]) * 2 / 1e6  # 16-bit elements
    if _num(get("zero_optimization.allgather_bucket_size")) is not None:
        out["ds_allgather_bucket"] = float(flat["zero_optimization.allgather_bucket_size"])
    if _num(get("zero_optimization.stage3_prefetch_bucket_size")) is not None:
        out["ds_prefetch_bucket"] = float(flat["zero_optimization.stage3_prefetch_bucket_size"])
    if get("zero_optimization.overlap_comm") is True:
        out["ds_overlap_comm"] = True
    get("zero_optimization.overlap_comm")
    for part, field in (("offload_param", "offload_params"), ("offload_optimizer", "offload_optimizer")):
        dev = get(f"zero_optimization.{part}.device")
        if dev in ("cpu", "nvme"):
            out[field] = True
            if part == "offload_optimizer":
                out["offload_grads"] = True  # the fp32 gradient partition goes with the optimizer
    for key in ("zero_optimization.stage3_max_live_parameters", "zero_optimization.stage3_max_reuse_distance"):
        get(key)  # bounds on the gathered parameters: the estimate assumes the largest layer
        used.discard(key)
    out["micro_batch"] = _num(get("train_micro_batch_size_per_gpu"))
    out["global_batch"] = _num(get("train_batch_size"))
    get("gradient_accumulation_steps")
    if get("bf16.enabled") is True:
        out["precision"] = "bf16"
    elif get("fp16.enabled") is True:
        out["precision"] = "fp16"
    get("bf16.enabled"), get("fp16.enabled")
    opt = str(get("optimizer.type") or "").lower()
    if opt in ("adam", "adamw", "sgd"):
        out["optimizer"] = opt
    elif "8bit" in opt:
        out["optimizer"] = "adam8bit"
    elif opt in ("onebitadam", "zerooneadam", "onebitlamb", "lamb"):
        out["optimizer"] = "adam"  # same state: two fp32 moments
    # activation_checkpointing configures DeepSpeed's checkpointing API; whether layers are
    # recomputed is the model's choice, so it does not set --recompute.
    if get("activation_checkpointing.cpu_checkpointing") is True:
        out["offload_activations"] = True
    get("activation_checkpointing.partition_activations")
    used.discard("activation_checkpointing.partition_activations")
    out = {k: int(v) if isinstance(v, float) and k in ("micro_batch", "global_batch") else v
           for k, v in out.items() if v is not None}
    return out, cfg.unused(_DS_INERT)


# ---- Megatron / NeMo -------------------------------------------------------------------------
_MEGATRON_KEYS = {
    "tensor_model_parallel_size": "tp", "pipeline_model_parallel_size": "pp", "data_parallel_size": "dp",
    "context_parallel_size": "cp", "expert_model_parallel_size": "ep", "expert_tensor_parallel_size": "etp", "sequence_parallel": "sequence_parallel",
    "virtual_pipeline_model_parallel_size": "vpp", "micro_batch_size": "micro_batch",
    "global_batch_size": "global_batch", "seq_length": "seq_len", "encoder_seq_length": "seq_len",
    "use_distributed_optimizer": "distributed_optimizer", "world_size": "world_size",
    "recompute_num_layers": "recompute_layers", "activations_checkpoint_num_layers": "recompute_layers",
    "tp_comm_overlap": "tp_comm_overlap", "ub_tp_comm_overlap": "tp_comm_overlap",  # Megatron, NeMo
}
_MEGATRON_INERT = ("name", "restore_from_path", "exp_manager", "trainer.max_steps", "trainer.max_epochs",
                   "trainer.log_every_n_steps", "trainer.val_check_interval", "trainer.limit_val_batches",
                   "trainer.logger", "trainer.enable_checkpointing", "trainer.accelerator", "trainer.strategy",
                   "trainer.gradient_clip_val", "trainer.use_distributed_sampler", "trainer.accumulate_grad_batches",
                   "model.data", "model.tokenizer", "model.optim.lr", "model.optim.weight_decay", "model.optim.betas",
                   "model.optim.sched", "lr", "min_lr", "weight_decay", "clip_grad", "train_iters", "seed",
                   "model.seed", "model.init_method_std", "init_method_std", "model.hidden_dropout",
                   "model.attention_dropout", "hidden_dropout", "attention_dropout", "model.layernorm_epsilon",
                   "model.rotary_base", "rotary_base", "model.max_position_embeddings", "max_position_embeddings",
                   "model.make_vocab_size_divisible_by", "make_vocab_size_divisible_by", "model.nsys_profile",
                   "tokenizer", "data_path", "save", "load", "log_interval", "eval_interval", "eval_iters",
                   "model.mcore_gpt", "model.bias_activation_fusion", "model.bias_dropout_add_fusion",
                   "model.masked_softmax_fusion", "model.apply_query_key_layer_scaling", "model.gradient_as_bucket_view",
                   "model.optim.bucket_cap_mb", "model.optim.overlap_grad_sync", "model.optim.overlap_param_sync",
                   "model.optim.contiguous_grad_buffer", "model.optim.contiguous_param_buffer")


def from_megatron_yaml(path: str | Path) -> tuple[Fields, list[str]]:
    """Plan fields from a Megatron-style or NeMo YAML: keys at the top, under ``parallel_policy``,
    ``training`` or ``model`` (NeMo), plus NeMo's ``trainer.devices × trainer.num_nodes``."""
    what = "--megatron-yaml"
    cfg = _load(path, what, "yaml")
    flat = _flatten(cfg)
    used: set[str] = set()
    scoped: dict[str, tuple[str, Any]] = {}
    for full, v in flat.items():
        leaf = full.split(".", 1)[1] if full.split(".", 1)[0] in ("parallel_policy", "training", "model") and "." in full else full
        scoped.setdefault(leaf, (full, v))

    def get(key: str) -> Any:
        if key in scoped:
            used.add(scoped[key][0])
            return scoped[key][1]
        return None

    out: Fields = {"framework": "megatron"}
    for key, field in _MEGATRON_KEYS.items():
        v = get(key)
        if v is not None and field not in out:
            out[field] = v
    dev, nodes = get("trainer.devices"), get("trainer.num_nodes")
    if isinstance(dev, int) and "world_size" not in out:
        out["world_size"] = dev * (nodes if isinstance(nodes, int) else 1)
    prec = str(get("precision") or get("trainer.precision") or "").lower()
    if get("bf16") or "bf16" in prec:
        out["precision"] = "bf16"
    elif get("fp16") or prec.startswith("16"):
        out["precision"] = "fp16"
    elif prec.startswith("32"):
        out["precision"] = "fp32"
    gran = get("recompute_granularity") or get("activations_checkpoint_granularity")
    method = get("recompute_method") or get("activations_checkpoint_method")
    if gran not in (None, "selective", "full"):
        raise UsageError(f"{what}: recompute granularity must be selective or full, got {gran!r}")
    if gran:
        out["recompute"] = gran
    if method not in (None, "uniform", "block"):
        raise UsageError(f"{what}: recompute method must be uniform or block, got {method!r}")
    if gran == "full" and method == "uniform" and out.get("recompute_layers"):
        # uniform: checkpoint groups of N layers, keeping only each group's input
        out.pop("recompute_layers")
    if gran != "full":
        out.pop("recompute_layers", None)
    optim = str(get("optim.name") or get("optimizer") or "").lower()
    if optim.startswith("distributed_fused"):
        out["distributed_optimizer"] = True
    if get("fp8") or get("transformer_engine") and get("fp8"):
        out["fp8"] = "te"
    if get("fp8_param") or get("fp8_param_gather"):
        out["fp8_allgather"] = True
    if get("cpu_offloading") is True:
        out["offload_activations"] = True
    if out.get("dp") not in (None, "auto") and not isinstance(out.get("dp"), int):
        raise UsageError(f"{what}: data_parallel_size must be an integer or auto, got {out['dp']!r}")
    for k in ("tp", "pp", "cp", "ep", "etp", "vpp", "micro_batch", "global_batch", "seq_len", "world_size", "recompute_layers"):
        if k in out and not isinstance(out[k], int):
            raise UsageError(f"{what}: {k} must be an integer, got {out[k]!r}")
    if out.get("distributed_optimizer"):
        out["grad_fp32"] = True  # the distributed optimizer keeps fp32 main_grad buffers
    return out, _warn_unused(what, flat, used, _MEGATRON_INERT)


# ---- torchtitan --------------------------------------------------------------------------------
_TITAN_INERT = ("job", "metrics", "profiling", "checkpoint", "lr_scheduler", "optimizer.lr", "optimizer.eps",
                "optimizer.weight_decay", "optimizer.beta1", "optimizer.beta2", "training.steps", "training.max_norm",
                "training.dataset", "training.dataset_path", "training.warmup_steps", "training.seed",
                "training.deterministic", "model.tokenizer_path", "model.hf_assets_path", "comm", "experimental",
                "validation", "fault_tolerance", "memory_estimation", "float8.recipe_name",
                "float8.filter_fqns", "float8.precompute_float8_dynamic_scale_for_fsdp", "parallelism.pipeline_parallel_schedule",
                "parallelism.pipeline_parallel_split_points", "parallelism.enable_async_tensor_parallel",
                "parallelism.enable_compiled_autograd", "parallelism.disable_loss_parallel",
                "parallelism.context_parallel_rotate_method", "parallelism.fsdp_reshard_after_forward",
                "training.gc_freq", "training.compile", "compile", "training.tokenizer_path")


def from_torchtitan_toml(path: str | Path) -> tuple[Fields, str | None, list[str]]:
    """Plan fields, the model preset it names (``[model] name`` + ``flavor``) and warnings."""
    what = "--torchtitan-toml"
    cfg = _Tracked(path, what, "toml")
    flat, get = cfg.flat, cfg.get

    def par(name: str) -> Any:
        # [parallelism] today; [training] and [experimental] in torchtitan's 2024 configs
        for section in ("parallelism", "training", "experimental"):
            if f"{section}.{name}" in flat:
                return get(f"{section}.{name}")
        return None

    out: Fields = {"framework": "torch", "loss": "upcast"}
    shard = par("data_parallel_shard_degree")
    rep = par("data_parallel_replicate_degree")
    tp = par("tensor_parallel_degree")
    pp = par("pipeline_parallel_degree")
    cp = par("context_parallel_degree")
    ep = par("expert_parallel_degree")
    etp = par("expert_tensor_parallel_degree")
    norm = get("model.norm_type")
    if isinstance(norm, str):
        out["fused_norm"] = norm.startswith("fused") or bool(get("training.compile"))
    for field, v in (("tp", tp), ("pp", pp), ("cp", cp), ("ep", ep), ("etp", etp)):
        if isinstance(v, int) and v >= 1:
            out[field] = v
    if isinstance(shard, int) and shard > 1:
        out["zero"] = 3
        out["dp"] = shard * (rep if isinstance(rep, int) and rep > 1 else 1)
        if isinstance(rep, int) and rep > 1:
            out["zero"] = 3  # HSDP: shards over `shard`, the estimate shards over all dp (optimistic)
    elif isinstance(rep, int) and rep > 1:
        out["dp"] = rep
    elif shard == -1:
        out["zero"] = 3
        out["dp"] = "auto"
    mb = get("training.local_batch_size") or get("training.batch_size")
    if isinstance(mb, int):
        out["micro_batch"] = mb
    if isinstance(get("training.global_batch_size"), int) and flat["training.global_batch_size"] > 0:
        out["global_batch"] = flat["training.global_batch_size"]
    if isinstance(get("training.seq_len"), int):
        out["seq_len"] = flat["training.seq_len"]
    mp = str(get("training.mixed_precision_param") or "bfloat16")
    out["precision"] = "fp32" if mp == "float32" else ("fp16" if mp == "float16" else "bf16")
    if get("training.mixed_precision_reduce") == "float32":
        out["grad_fp32"] = True
    if get("training.enable_cpu_offload") is True:
        out.update(offload_params=True, offload_grads=True, offload_optimizer=True)
    mode = get("activation_checkpoint.mode")
    opt = str(get("activation_checkpoint.selective_ac_option") or "op")
    if mode == "full":
        out["recompute"] = "full"
    elif mode == "selective":
        if opt == "op":
            out["recompute"] = "sac"
        elif opt.isdigit():
            out.update(recompute="full", recompute_interval=int(opt))
        else:
            raise UsageError(f"{what}: selective_ac_option must be 'op' or an integer, got {opt!r}")
    elif mode not in (None, "none"):
        raise UsageError(f"{what}: activation_checkpoint.mode must be none, selective or full, got {mode!r}")
    converters = get("model.converters") or []
    if get("float8.enable_float8_linear") is True or "float8" in converters:
        out["fp8"] = "torchao"
    if get("float8.enable_fsdp_float8_all_gather") is True:
        out["fp8_allgather"] = True
    name = str(get("optimizer.name") or "AdamW").lower()
    out["optimizer"] = "adam" if name == "adam" else "adamw"
    impl = get("optimizer.implementation")
    if impl in ("fused", "foreach"):
        out["optimizer_impl"] = impl
    elif get("optimizer.fused") is False:
        out["optimizer_impl"] = "foreach"  # torchtitan 2024: fused = false meant PyTorch's foreach AdamW
    model = None
    mname, flavor = get("model.name"), get("model.flavor")
    if mname and flavor:
        model = f"{str(mname).replace('_', '')}-{str(flavor).lower()}"
    return out, model, cfg.unused(_TITAN_INERT)
