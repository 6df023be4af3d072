"""The ``[job]`` config section: the planned model and parallel plan (read by estimate-memory
and the preflight ``memory`` probe)."""

from __future__ import annotations

from llmdiag.config import Field, register_section
from llmdiag.memory import plan

register_section(
    "job",
    [
        Field("model", "str", None, "model preset (e.g. llama2-7b) or path to a Hugging Face config.json"),
        Field("params", "float", None, "parameter count when only that is known (model states only)", min=1),
        Field("tp", "int", None, "tensor-parallel size", min=1),
        Field("pp", "int", None, "pipeline-parallel size", min=1),
        Field("dp", "int_or_auto", None, 'data-parallel size or "auto" (world / (tp×pp×cp))', min=1),
        Field("cp", "int", None, "context-parallel size", min=1),
        Field("ep", "int", None, "expert-parallel size", min=1),
        Field("world_size", "int", None, "total GPUs of the job", min=1),
        Field("gpus_per_node", "int", None, "GPUs per node", min=1, max=64),
        Field("sequence_parallel", "bool", None, "Megatron sequence parallelism"),
        Field("vpp", "int", None, "virtual pipeline stages per rank", min=1),
        Field("zero", "int", None, "ZeRO stage (3 = FSDP full shard)", min=0, max=3),
        Field("distributed_optimizer", "bool", None, "Megatron distributed optimizer"),
        Field("micro_batch", "int", None, "micro batch per GPU", min=1),
        Field("global_batch", "int", None, "global batch (sequences per step)", min=1),
        Field("seq_len", "int", None, "sequence length", min=1),
        Field("precision", "str", None, "training precision", choices=plan.PRECISIONS),
        Field("optimizer", "str", None, "optimizer", choices=plan.OPTIMIZERS),
        Field("recompute", "str", None, "activation recomputation", choices=plan.RECOMPUTE),
        Field("attention", "str", None, "flash (fused) or eager attention", choices=plan.ATTENTION),
        Field("fused_norm", "bool", None, "fused norm kernels (false: PyTorch's composite nn.RMSNorm)"),
        Field("gpu_memory", "str", None, 'GPU memory to plan against when no GPU can be read ("80GiB")',
              validator=plan.size_error),
    ],
    "The planned training job: model and parallel plan (estimate-memory, preflight memory probe).",
)

#: [job] keys that are plan fields (the rest select the model or the GPU size).
PLAN_KEYS = ("tp", "pp", "dp", "cp", "ep", "world_size", "gpus_per_node", "sequence_parallel", "vpp", "zero",
             "distributed_optimizer", "micro_batch", "global_batch", "seq_len", "precision", "optimizer",
             "recompute", "attention", "fused_norm")
