"""The training plan: parallel sizes, batch, precision, optimizer, recompute, attention kind.

Sources, merged in this order (later wins): built-in defaults < project config ``[job]`` <
DeepSpeed config JSON < Megatron-style YAML < command-line flags. ``dp="auto"`` is derived
from the world size as world / (tp × pp × cp); the plan checks report what does not divide.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmdiag.errors import UsageError

PRECISIONS = ("bf16", "fp16", "fp32")
OPTIMIZERS = ("adam", "adamw", "sgd", "adam8bit", "paged-adam8bit")
RECOMPUTE = ("none", "selective", "sac", "full")  # selective: Megatron's (attention core); sac: per-op
ATTENTION = ("flash", "eager")
FRAMEWORKS = ("megatron", "deepspeed", "torch")
LOSSES = ("auto", "vocab-parallel", "upcast", "chunked", "fused")
FP8 = ("none", "te", "torchao")
QUANT = ("none", "nf4", "int8")
OPTIMIZER_IMPLS = ("auto", "fused", "foreach")


@dataclasses.dataclass(frozen=True)
class Plan:
    tp: int = 1
    pp: int = 1
    dp: int | str = "auto"
    cp: int = 1
    ep: int = 1
    world_size: int | None = None
    gpus_per_node: int = 8
    sequence_parallel: bool = False
    vpp: int = 1  # virtual pipeline stages per rank (interleaved 1F1B)
    zero: int = 0  # 0-3; FSDP full-shard is zero=3
    distributed_optimizer: bool = False  # Megatron: optimizer + master weights sharded over dp
    micro_batch: int = 1
    global_batch: int | None = None
    seq_len: int = 2048
    precision: str = "bf16"
    master_weights: bool = True  # fp32 master copy when training in 16-bit
    grad_fp32: bool = False  # Megatron accumulates gradients in fp32 (main_grad)
    optimizer: str = "adamw"
    recompute: str = "none"
    attention: str = "flash"
    fused_norm: bool = True  # False: PyTorch's composite nn.RMSNorm (keeps fp32 copies of its input)
    bucket_mb: float | None = None  # reduce bucket, MB (None: DDP 25; DeepSpeed reduce_bucket_size 5e8 → 1000)
    framework: str = "megatron"  # megatron (TE kernels, grad buffers) | deepspeed | torch (FSDP/DDP, torchtitan, HF)
    loss: str = "auto"  # cross-entropy: vocab-parallel (Megatron), upcast (PyTorch fp32), chunked, fused
    loss_chunks: int = 8  # chunks of a chunked loss (torchtune CEWithChunkedOutputLoss: 8)
    recompute_interval: int = 1  # recompute one layer in N (torchtitan selective_ac_option = N)
    recompute_layers: int | None = None  # Megatron --recompute-num-layers (block): layers recomputed per stage
    optimizer_impl: str = "auto"  # fused (apex/TE/torch fused) or foreach (PyTorch's default on CUDA)
    optimizer_in_backward: bool = False  # step each parameter in backward (torchtune): no full gradient set
    offload_params: bool = False  # ZeRO-3 offload_param / FSDP cpu_offload
    offload_grads: bool = False  # gradients on CPU (offload_optimizer / FSDP cpu_offload)
    offload_optimizer: bool = False  # master weights and optimizer state on CPU
    offload_activations: bool = False  # saved activations on CPU (torchtune enable_activation_offloading)
    lora_rank: int = 0  # 0: full training; else LoRA adapters of this rank, frozen base
    lora_targets: str = "attn"  # attn (q,k,v,o) | all (attention + MLP) | qv
    base_quant: str = "none"  # frozen base weights: nf4 (QLoRA) or int8
    fp8: str = "none"  # FP8 linears: te (Transformer Engine) or torchao float8
    fp8_allgather: bool = False  # FSDP all-gathers weights in FP8
    ds_overlap_comm: bool = False  # DeepSpeed overlap_comm: 4.5x the bucket buffers
    ds_allgather_bucket: float = 0.0  # DeepSpeed allgather_bucket_size (elements, ZeRO 1/2)
    ds_prefetch_bucket: float = 0.0  # DeepSpeed stage3_prefetch_bucket_size (elements)
    pp_layers: tuple[int, ...] | None = None  # explicit layers per pipeline stage (uneven split)

    def __post_init__(self) -> None:
        for f in ("tp", "pp", "cp", "ep", "vpp", "micro_batch", "seq_len", "gpus_per_node"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise UsageError(f"plan: {f} must be a positive integer, got {v!r}")
        if self.dp != "auto" and (isinstance(self.dp, bool) or not isinstance(self.dp, int) or self.dp < 1):
            raise UsageError(f"plan: dp must be a positive integer or 'auto', got {self.dp!r}")
        if self.dp == "auto" and self.world_size is None:
            raise UsageError("plan: dp is 'auto' but no world size is known (give --world-size or --dp N)")
        if self.world_size is not None and self.world_size < 1:
            raise UsageError(f"plan: world size must be >= 1, got {self.world_size}")
        if self.global_batch is not None and self.global_batch < 1:
            raise UsageError(f"plan: global batch must be >= 1, got {self.global_batch}")
        if self.zero not in (0, 1, 2, 3):
            raise UsageError(f"plan: ZeRO stage must be 0, 1, 2 or 3, got {self.zero!r}")
        if isinstance(self.pp_layers, list):
            object.__setattr__(self, "pp_layers", tuple(self.pp_layers))
        if self.pp_layers is not None and (len(self.pp_layers) != self.pp or any(int(x) < 0 for x in self.pp_layers)):
            raise UsageError(f"plan: pp_layers gives {len(self.pp_layers)} stages, pp is {self.pp}")
        for f in ("loss_chunks", "recompute_interval"):
            if not isinstance(getattr(self, f), int) or getattr(self, f) < 1:
                raise UsageError(f"plan: {f} must be a positive integer, got {getattr(self, f)!r}")
        for f, allowed in (("precision", PRECISIONS), ("optimizer", OPTIMIZERS), ("recompute", RECOMPUTE),
                           ("attention", ATTENTION), ("framework", FRAMEWORKS), ("loss", LOSSES), ("fp8", FP8),
                           ("base_quant", QUANT), ("optimizer_impl", OPTIMIZER_IMPLS)):
            if getattr(self, f) not in allowed:
                raise UsageError(f"plan: {f} must be one of {', '.join(allowed)}, got {getattr(self, f)!r}")

    @property
    def dp_size(self) -> int:
        """Data-parallel size; 'auto' rounds down (the plan check reports a remainder)."""
        if self.dp != "auto":
            return int(self.dp)
        return max(1, int(self.world_size) // (self.tp * self.pp * self.cp))

    @property
    def world(self) -> int:
        return self.world_size if self.world_size is not None else self.tp * self.pp * self.dp_size * self.cp

    @property
    def num_microbatches(self) -> int:
        if self.global_batch is None:
            return self.pp  # unknown: assume enough to fill the pipeline (the worst case for memory)
        return max(1, self.global_batch // (self.micro_batch * self.dp_size))

    @property
    def ds_optimizer(self) -> bool:
        """DeepSpeed's ZeRO optimizer (DeepSpeed, or Megatron-DeepSpeed with a ZeRO stage)."""
        return self.framework == "deepspeed" or (self.framework == "megatron" and self.zero >= 1)

    @property
    def grad_bytes(self) -> int:
        """Gradient bytes per parameter: Megatron accumulates bf16 training in fp32 main_grad."""
        if self.precision == "fp32" or self.grad_fp32 or (self.framework == "megatron" and self.precision == "bf16"):
            return 4
        return 2

    @property
    def reduce_bucket_mb(self) -> float:
        if self.bucket_mb is not None:
            return self.bucket_mb
        return {"torch": 25.0, "deepspeed": 1000.0}.get(self.framework, 0.0)

    @property
    def loss_kind(self) -> str:
        if self.loss != "auto":
            return self.loss
        return "vocab-parallel" if self.framework == "megatron" else "upcast"

    @property
    def fused_optimizer(self) -> bool:
        if self.optimizer_impl != "auto":
            return self.optimizer_impl == "fused"
        return self.framework != "torch" or self.optimizer in ("adam8bit", "paged-adam8bit")

    def replace(self, **kw: Any) -> Plan:
        return dataclasses.replace(self, **kw)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["dp_size"] = self.dp_size
        d["world"] = self.world
        d["num_microbatches"] = self.num_microbatches
        return d


FIELDS = {f.name for f in dataclasses.fields(Plan)}


def build(*layers: Mapping[str, Any]) -> Plan:
    """A plan from dicts of field values, later dicts overriding earlier; ``None`` = not given."""
    merged: dict[str, Any] = {}
    for layer in layers:
        for k, v in layer.items():
            if v is None:
                continue
            if k not in FIELDS:
                raise UsageError(f"plan: unknown setting {k!r}")
            merged[k] = v
    return Plan(**merged)


def _load(path: str | Path, what: str) -> Any:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{what}: file {str(p)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{what}: cannot read {str(p)!r}: {exc}") from None
    try:
        if what == "--megatron-yaml":
            import yaml  # lazy

            return yaml.safe_load(text)
        return json.loads(text)
    except Exception as exc:  # noqa: BLE001 - yaml and json raise different types; both mean "bad file"
        raise UsageError(f"{what}: {str(p)!r} is not valid: {exc}") from None


def from_deepspeed(path: str | Path) -> dict[str, Any]:
    """Plan fields from a DeepSpeed config JSON ("auto" values are left to other sources)."""
    cfg = _load(path, "--deepspeed-config")
    if not isinstance(cfg, dict):
        raise UsageError("--deepspeed-config: the file does not hold a JSON object")

    def num(v: Any) -> Any:
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    out: dict[str, Any] = {}
    zo = cfg.get("zero_optimization") or {}
    if isinstance(zo, dict) and num(zo.get("stage")) is not None:
        out["zero"] = int(zo["stage"])
    if isinstance(zo, dict) and num(zo.get("reduce_bucket_size")) is not None:
        out["bucket_mb"] = float(zo["reduce_bucket_size"]) * 2 / 1e6  # elements of 16-bit grads
    out["micro_batch"] = num(cfg.get("train_micro_batch_size_per_gpu"))
    out["global_batch"] = num(cfg.get("train_batch_size"))
    if (cfg.get("bf16") or {}).get("enabled") is True:
        out["precision"] = "bf16"
    elif (cfg.get("fp16") or {}).get("enabled") is True:
        out["precision"] = "fp16"
    opt = str((cfg.get("optimizer") or {}).get("type", "")).lower()
    if opt in ("adam", "adamw", "sgd"):
        out["optimizer"] = opt
    elif "8bit" in opt:
        out["optimizer"] = "adam8bit"
    act = cfg.get("activation_checkpointing") or {}
    if isinstance(act, dict) and act.get("partition_activations") is not None:
        out["recompute"] = "full"
    return {k: v for k, v in out.items() if v is not None}


_MEGATRON_KEYS = {
    "tensor_model_parallel_size": "tp", "pipeline_model_parallel_size": "pp", "data_parallel_size": "dp",
    "context_parallel_size": "cp", "expert_model_parallel_size": "ep", "sequence_parallel": "sequence_parallel",
    "virtual_pipeline_model_parallel_size": "vpp", "num_layers_per_virtual_pipeline_stage": None,
    "micro_batch_size": "micro_batch", "global_batch_size": "global_batch", "seq_length": "seq_len",
    "use_distributed_optimizer": "distributed_optimizer", "recompute_granularity": "recompute",
    "world_size": "world_size",
}


def from_megatron_yaml(path: str | Path) -> dict[str, Any]:
    """Plan fields from a Megatron-style YAML; keys may sit at the top or under ``parallel_policy``."""
    cfg = _load(path, "--megatron-yaml")
    if not isinstance(cfg, dict):
        raise UsageError("--megatron-yaml: the file does not hold a mapping")
    flat: dict[str, Any] = {}
    for scope in (cfg, cfg.get("parallel_policy") or {}, cfg.get("training") or {}, cfg.get("model") or {}):
        if isinstance(scope, dict):
            flat.update(scope)
    out: dict[str, Any] = {}
    for key, field in _MEGATRON_KEYS.items():
        if field and key in flat and flat[key] is not None:
            out[field] = flat[key]
    if flat.get("bf16"):
        out["precision"] = "bf16"
    elif flat.get("fp16"):
        out["precision"] = "fp16"
    if out.get("recompute") not in (None, "selective", "full"):
        raise UsageError(f"--megatron-yaml: recompute_granularity must be selective or full, got {out['recompute']!r}")
    if out.get("dp") not in (None, "auto") and not isinstance(out.get("dp"), int):
        raise UsageError(f"--megatron-yaml: data_parallel_size must be an integer or auto, got {out['dp']!r}")
    if out.get("distributed_optimizer"):
        out["grad_fp32"] = True  # Megatron's distributed optimizer keeps fp32 main_grad buffers
    return out


_UNITS = {"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_size(text: str | int | float) -> int:
    """``"80GiB"``, ``"80 GB"``, ``"81920MiB"`` or a byte count → bytes; ValueError if bad."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value, unit = float(text), ""
    else:
        import re

        mt = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-zA-Z]*)\s*", str(text))
        if not mt or mt.group(2).lower() not in _UNITS:
            raise ValueError(f"not a size: {text!r} (use e.g. 80GiB, 40GB, 81920MiB)")
        value, unit = float(mt.group(1)), mt.group(2).lower()
    n = int(value * _UNITS[unit])
    if n <= 0:
        raise ValueError(f"size must be positive: {text!r}")
    return n


def size_error(text: str) -> str | None:
    try:
        parse_size(text)
    except ValueError as exc:
        return str(exc)
    return None
