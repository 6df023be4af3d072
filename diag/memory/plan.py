"""The training plan: parallel sizes, batch, precision, optimizer, recompute, attention kind.

Sources are merged by :mod:`llmdiag.memory.job` (later wins): built-in defaults < project config
``[job]`` < torchtitan TOML < DeepSpeed config JSON < Megatron-style YAML < command-line flags. ``dp="auto"`` is derived
from the world size as world / (tp × pp × cp); the plan checks report what does not divide.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from llmdiag.errors import UsageError

PRECISIONS = ("bf16", "fp16", "fp32")
OPTIMIZERS = ("adam", "adamw", "sgd", "adam8bit", "paged-adam8bit", "paged-adamw")
RECOMPUTE = ("none", "selective", "sac", "full")  # selective: Megatron's (attention core); sac: per-op
ATTENTION = ("flash", "eager")
FRAMEWORKS = ("megatron", "deepspeed", "torch")
LOSSES = ("auto", "vocab-parallel", "upcast", "chunked", "fused")
FP8 = ("none", "te", "torchao")
QUANT = ("none", "nf4", "int8")
OPTIMIZER_IMPLS = ("auto", "fused", "foreach")
MODULE_LOADING = ("lazy", "eager")


MAX_WORLD = 2**20  # GPUs: ten times the largest clusters built; bounds the search's run time


@dataclasses.dataclass(frozen=True)
class Plan:
    tp: int = 1
    pp: int = 1
    dp: int | str = "auto"
    cp: int = 1
    ep: int = 1
    etp: int | None = None  # expert tensor parallel (None: the framework's default, see groups.expert_tp)
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
    framework: str = "torch"  # megatron (TE kernels, grad buffers) | deepspeed | torch (FSDP/DDP, torchtitan, HF)
    loss: str = "auto"  # cross-entropy: vocab-parallel (Megatron), upcast (PyTorch fp32), chunked, fused
    loss_chunks: int = 8  # chunks of a chunked loss (torchtune CEWithChunkedOutputLoss: 8)
    compile_loss: bool = False  # the loss runs under torch.compile (torchtune compile=True): no fp32 copies
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
    deepspeed_engine: bool = False  # Megatron-DeepSpeed: Megatron's model under DeepSpeed's engine and optimizer
    gpu_kind: str | None = None  # GPU generation (v100, a100, h100 ...): sets the CUDA context size
    tp_comm_overlap: bool = False  # Megatron --tp-comm-overlap: TE userbuffers per overlapped GEMM
    module_loading: str = "lazy"  # CUDA module loading: lazy (CUDA >= 11.7) or eager (every kernel at init)

    def __post_init__(self) -> None:
        for f in ("tp", "pp", "cp", "ep", "vpp", "micro_batch", "seq_len", "gpus_per_node"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise UsageError(f"plan: {f} must be a positive integer, got {v!r}")
        if self.etp is not None and (isinstance(self.etp, bool) or not isinstance(self.etp, int) or self.etp < 1):
            raise UsageError(f"plan: etp must be a positive integer, got {self.etp!r}")
        if self.dp != "auto" and (isinstance(self.dp, bool) or not isinstance(self.dp, int) or self.dp < 1):
            raise UsageError(f"plan: dp must be a positive integer or 'auto', got {self.dp!r}")
        if self.dp == "auto" and self.world_size is None:
            raise UsageError("plan: dp is 'auto' but no world size is known (give --world-size or --dp N)")
        if self.world_size is not None and self.world_size < 1:
            raise UsageError(f"plan: world size must be >= 1, got {self.world_size}")
        if self.world > MAX_WORLD:
            raise UsageError(f"plan: world size {self.world} is above the {MAX_WORLD} GPUs the estimate plans for")
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
                           ("base_quant", QUANT), ("optimizer_impl", OPTIMIZER_IMPLS),
                           ("module_loading", MODULE_LOADING)):
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
        # auto: fused (apex/TE in Megatron and DeepSpeed, torch fused AdamW in torchtitan and
        # recent HF Trainer, bitsandbytes kernels); foreach only when asked for
        return self.optimizer_impl != "foreach"

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


# Decimal units (GB = 1e9) and binary ones (GiB = 2**30); a lone letter (80G) is binary, as
# nvidia-smi, free -g and PyTorch's memory summaries count.
_UNITS = {"b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
          "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_size(text: str | int | float) -> int:
    """``"80GiB"``, ``"80G"`` (GiB), ``"80 GB"`` (1e9), ``"81920MiB"``, ``"1TB"`` → bytes.

    A bare number is refused: ``--gpu-memory 80`` would be 80 bytes, never what was meant.
    """
    import re

    mt = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][0-9]+)?)\s*([a-zA-Z]*)\s*", str(text))
    if not mt:
        raise ValueError(f"not a size: {text!r} (use e.g. 80GiB, 80G, 40GB, 81920MiB)")
    if not mt.group(2):
        raise ValueError(f"size {text!r} has no unit: write {mt.group(1)}GiB (or {mt.group(1)}GB for 1e9 bytes)")
    if mt.group(2).lower() not in _UNITS:
        raise ValueError(f"unknown unit {mt.group(2)!r} in {text!r} (use B, KB, MB, GB, TB, KiB, MiB, GiB, TiB or K, M, G, T)")
    value = float(mt.group(1)) * _UNITS[mt.group(2).lower()]
    if not value < 2**60:  # also inf and nan: no device has an exabyte
        raise ValueError(f"size {text!r} is out of range (at most 1 EiB)")
    n = int(value)
    if n <= 0:
        raise ValueError(f"size must be positive: {text!r}")
    return n


def size_error(text: str) -> str | None:
    try:
        parse_size(text)
    except ValueError as exc:
        return str(exc)
    return None
