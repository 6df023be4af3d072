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
        Field("etp", "int", None, "expert tensor-parallel size (default: Megatron tp, torchtitan/DeepSpeed 1)", min=1),
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
        Field("framework", "str", None, "what runs the job: megatron, deepspeed or torch (FSDP/DDP, torchtitan, HF)",
              choices=plan.FRAMEWORKS),
        Field("loss", "str", None, "cross-entropy kind (auto: vocab-parallel for megatron, upcast otherwise)",
              choices=plan.LOSSES),
        Field("loss_chunks", "int", None, "chunks of a chunked loss", min=1),
        Field("compile_loss", "bool", None, "the loss runs under torch.compile (no fp32 copies of the logits)"),
        Field("recompute_interval", "int", None, "recompute one layer in N (torchtitan selective_ac_option)", min=1),
        Field("recompute_layers", "int", None, "layers per stage recomputed (Megatron --recompute-num-layers, block)", min=0),
        Field("optimizer_impl", "str", None, "fused or foreach optimizer step", choices=plan.OPTIMIZER_IMPLS),
        Field("optimizer_in_backward", "bool", None, "optimizer step inside backward (no full gradient set)"),
        Field("offload", "str_list", None, "CPU offload: params, grads, optimizer, activations, all"),
        Field("lora_rank", "int", None, "LoRA rank (0: full training)", min=0),
        Field("lora_targets", "str", None, "LoRA targets: attn (q,k,v,o), qv, all (attention + MLP)",
              choices=("attn", "qv", "all")),
        Field("base_quant", "str", None, "frozen base quantisation for LoRA (nf4 = QLoRA)", choices=plan.QUANT),
        Field("fp8", "str", None, "FP8 linears: te or torchao", choices=plan.FP8),
        Field("fp8_allgather", "bool", None, "FSDP all-gathers weights in FP8"),
        Field("pp_layers", "str", None, 'layers per pipeline stage, e.g. "15,16,16,16,16,16,16,15"'),
        Field("deepspeed_engine", "bool", None, "Megatron-DeepSpeed: Megatron under DeepSpeed's engine"),
        Field("gpu_kind", "str", None, "GPU generation (sets the CUDA context size)",
              choices=("v100", "a100", "h100", "h200", "b200", "other")),
        Field("gpu_memory", "str", None, 'GPU memory to plan against when no GPU can be read ("80GiB")',
              validator=plan.size_error),
    ],
    "The planned training job: model and parallel plan (estimate-memory, preflight memory probe).",
)

#: [job] keys that are plan fields (the rest select the model or the GPU size).
PLAN_KEYS = ("tp", "pp", "dp", "cp", "ep", "etp", "world_size", "gpus_per_node", "sequence_parallel", "vpp", "zero",
             "distributed_optimizer", "micro_batch", "global_batch", "seq_len", "precision", "optimizer",
             "recompute", "attention", "fused_norm", "framework", "loss", "loss_chunks", "compile_loss", "recompute_interval",
             "recompute_layers", "optimizer_impl", "optimizer_in_backward", "offload", "lora_rank", "lora_targets",
             "base_quant", "fp8", "fp8_allgather", "pp_layers", "deepspeed_engine", "gpu_kind")
