"""The ``[job]`` config section: the planned model and parallel plan (read by estimate-memory
and the preflight ``memory`` probe). Every key is also an ``estimate-memory`` flag; unset keys
are None, so the plan's own defaults (:class:`llmdiag.memory.plan.Plan`) apply."""

from __future__ import annotations

from llmdiag.config import section, setting
from llmdiag.memory import plan


@section("job", "The planned training job: model and parallel plan (estimate-memory, preflight memory probe).")
class JobSettings:
    model: str | None = setting(None, "model preset (llama2-7b, llama3-70b, mixtral-8x7b, gpt3-175b, ...) or path "
                                "to a Hugging Face config.json", flag=("--model",))
    params: float | None = setting(None, "parameter count when only that is known, e.g. 7.5e9 (model states only)",
                                   min=1, flag=("--params",))
    tp: int | None = setting(None, "tensor-parallel size", min=1, flag=("--tp",))
    pp: int | None = setting(None, "pipeline-parallel size", min=1, flag=("--pp",))
    pp_layers: str | None = setting(None, 'layers per pipeline stage for an uneven split, e.g. '
                                    '"15,16,16,16,16,16,16,15"', flag=("--pp-layers",))
    dp: int | str | None = setting(None, 'data-parallel size or "auto" (world / (tp×pp×cp))', min=1, flag=("--dp",),
                                  metavar="N|auto")
    cp: int | None = setting(None, "context-parallel size", min=1, flag=("--cp",))
    ep: int | None = setting(None, "expert-parallel size", min=1, flag=("--ep",))
    etp: int | None = setting(None, "expert tensor-parallel size (default: Megatron tp, torchtitan/DeepSpeed 1)",
                              min=1, flag=("--etp",))
    world_size: int | None = setting(None, "total GPUs of the job", min=1, flag=("--world-size",))
    gpus_per_node: int | None = setting(None, "GPUs per node", min=1, max=64, flag=("--gpus-per-node",))
    sequence_parallel: bool | None = setting(None, "Megatron sequence parallelism",
                                             flag=("--sequence-parallel/--no-sequence-parallel",))
    vpp: int | None = setting(None, "virtual pipeline stages per rank (interleaved schedule)", min=1, flag=("--vpp",))
    zero: int | None = setting(None, "ZeRO stage (3 = FSDP full shard)", min=0, max=3, flag=("--zero",))
    distributed_optimizer: bool | None = setting(None, "Megatron distributed optimizer",
                                                 flag=("--distributed-optimizer/--no-distributed-optimizer",))
    framework: str | None = setting(None, "what runs the job, its kernels, gradient buffers and loss: megatron, "
                                    "deepspeed or torch (FSDP/DDP, torchtitan, HF; the default)",
                                    choices=plan.FRAMEWORKS, flag=("--framework",))
    micro_batch: int | None = setting(None, "micro batch per GPU", min=1, flag=("--micro-batch",))
    global_batch: int | None = setting(None, "global batch (sequences per step)", min=1, flag=("--global-batch",))
    seq_len: int | None = setting(None, "sequence length", min=1, flag=("--seq-len",))
    precision: str | None = setting(None, "training precision", choices=plan.PRECISIONS, flag=("--precision",))
    optimizer: str | None = setting(None, "optimizer", choices=plan.OPTIMIZERS, flag=("--optimizer",))
    optimizer_impl: str | None = setting(None, "fused or foreach optimizer step (foreach keeps an fp32 temporary of "
                                         "the moments during the step)", choices=plan.OPTIMIZER_IMPLS,
                                         flag=("--optimizer-impl",))
    optimizer_in_backward: bool | None = setting(None, "optimizer step inside backward, per parameter (torchtune): "
                                                 "no full gradient set", flag=("--optimizer-in-backward",))
    recompute: str | None = setting(None, "activation recomputation; selective: Megatron's (attention core); sac: "
                                    "per-op selective (torchtitan); full: whole layers", choices=plan.RECOMPUTE,
                                    flag=("--recompute",))
    recompute_interval: int | None = setting(None, "recompute one layer in N (torchtitan selective_ac_option)",
                                             min=1, flag=("--recompute-interval",))
    recompute_layers: int | None = setting(None, "layers per stage recomputed (Megatron --recompute-num-layers, "
                                           "block)", min=0, flag=("--recompute-layers",))
    attention: str | None = setting(None, "fused (flash/SDPA) or eager attention", choices=plan.ATTENTION,
                                    flag=("--attention",))
    fused_norm: bool | None = setting(None, "fused norm kernels (the default; unfused: PyTorch's composite "
                                      "nn.RMSNorm, with fp32 copies)", flag=("--fused-norm/--unfused-norm",))
    loss: str | None = setting(None, "cross-entropy: vocab-parallel (Megatron), upcast (fp32 logits), chunked, "
                               "fused (no logits); auto: vocab-parallel for megatron, upcast otherwise",
                               choices=plan.LOSSES, flag=("--loss",))
    loss_chunks: int | None = setting(None, "chunks of a chunked loss (default 8)", min=1, flag=("--loss-chunks",))
    compile_loss: bool | None = setting(None, "the loss runs under torch.compile (no fp32 copies of the logits)",
                                        flag=("--compile-loss",))
    offload: list[str] | None = setting(None, "CPU offload (comma-separated on the command line): params, grads, "
                                        "optimizer, activations, all", flag=("--offload",))
    lora_rank: int | None = setting(None, "train LoRA adapters of this rank on a frozen base (0: full training)",
                                    min=0, flag=("--lora-rank",))
    lora_targets: str | None = setting(None, "LoRA targets: attn (q,k,v,o), qv, all (attention + MLP)",
                                       choices=("attn", "qv", "all"), flag=("--lora-targets",))
    base_quant: str | None = setting(None, "quantised frozen base for LoRA (nf4 = QLoRA)", choices=plan.QUANT,
                                     flag=("--base-quant",))
    fp8: str | None = setting(None, "FP8 linears: te (Transformer Engine) or torchao", choices=plan.FP8,
                              flag=("--fp8",))
    fp8_allgather: bool | None = setting(None, "FSDP all-gathers weights in FP8", flag=("--fp8-allgather",))
    deepspeed_engine: bool | None = setting(None, "Megatron-DeepSpeed: Megatron's model under DeepSpeed's engine "
                                            "(fp32 gradient copy without ZeRO)", flag=("--deepspeed-engine",))
    gpu_kind: str | None = setting(None, "GPU generation: sets the CUDA context size (V100 ~1.2 GiB)",
                                   choices=("v100", "a100", "h100", "h200", "b200", "other"), flag=("--gpu-kind",))
    gpu_memory: str | None = setting(None, "GPU memory to plan against, e.g. 80GiB, 80G, 96GB (estimate-memory: "
                                     "instead of NVML's smallest GPU; the preflight probe: when no GPU can be read)",
                                     validator=plan.size_error, flag=("--gpu-memory",), metavar="SIZE")


#: [job] keys that select the model or the GPU size; every other key is a plan field.
NOT_PLAN = ("model", "params", "gpu_memory")
PLAN_KEYS = tuple(k for k in JobSettings.__dataclass_fields__ if k not in NOT_PLAN)
