"""``llmdiag estimate-memory``: per-GPU memory of a training plan, plan checks, and what fits."""

from __future__ import annotations

from typing import Any

import click

from llmdiag.cliutil import config_option, emit_doc, FiniteFloatRange, guard_outputs, output_options, pass_env


def _size(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    from llmdiag.memory.plan import parse_size

    try:
        return parse_size(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _dp(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None or value == "auto":
        return value
    try:
        n = int(value)
    except ValueError:
        raise click.BadParameter(f"expected an integer or 'auto', got {value!r}") from None
    if n < 1:
        raise click.BadParameter(f"must be >= 1, got {n}")
    return n


POS = click.IntRange(min=1)


@click.command("estimate-memory")
@click.option("--model", help="Preset (llama2-7b, llama3-70b, mixtral-8x7b, gpt3-175b, ...) or a config.json path.")
@click.option("--hf-config", type=click.Path(dir_okay=False), help="Hugging Face config.json of the model.")
@click.option("--params", type=FiniteFloatRange(min=1), help="Parameter count only (e.g. 7.5e9): model states only.")
@click.option("--largest-layer-params", type=FiniteFloatRange(min=1),
              help="With --params: the largest layer ZeRO-3 gathers (DeepSpeed's estimator input).")
@click.option("--layers", type=POS)
@click.option("--hidden", type=POS)
@click.option("--heads", type=POS)
@click.option("--kv-heads", type=POS, help="KV groups (GQA).")
@click.option("--head-dim", type=POS, help="Head size when not hidden / heads (Gemma-2: 256).")
@click.option("--ffn", type=POS, help="FFN inner size (default 4 × hidden).")
@click.option("--gated/--ungated", default=None, help="Gated (SwiGLU) or plain MLP.")
@click.option("--vocab", type=POS)
@click.option("--tied/--untied", default=None, help="Tied input/output embeddings.")
@click.option("--linear-bias/--no-linear-bias", "bias", default=None, help="Biases on every linear and norm (GPT).")
@click.option("--learned-positions", "positions", type=click.IntRange(min=0),
              help="Rows of a learned position embedding (0: rotary).")
@click.option("--experts", type=POS, help="MoE experts per layer.")
@click.option("--top-k", type=POS, help="MoE experts per token.")
@click.option("--shared-experts", type=click.IntRange(min=0), help="Always-active experts per MoE layer (DeepSeek, Qwen-MoE).")
@click.option("--shared-ffn", type=POS, help="FFN size of one shared expert (default: --ffn).")
@click.option("--dense-layers", type=click.IntRange(min=0), help="Leading dense layers of an MoE model (first_k_dense_replace).")
@click.option("--dense-ffn", type=POS, help="FFN size of those dense layers.")
@click.option("--kv-lora-rank", type=POS, help="MLA: compressed KV rank (DeepSeek-V2/V3: 512).")
@click.option("--q-lora-rank", type=click.IntRange(min=0), help="MLA: compressed query rank (0: none).")
@click.option("--qk-nope-dim", type=POS, help="MLA: per-head q/k size without rotary.")
@click.option("--qk-rope-dim", type=POS, help="MLA: per-head rotary q/k size.")
@click.option("--v-head-dim", type=POS, help="MLA: per-head value size.")
@click.option("--tp", type=POS)
@click.option("--pp", type=POS)
@click.option("--pp-layers", help="Layers per pipeline stage for an uneven split, e.g. 15,16,16,16,16,16,16,15.")
@click.option("--dp", callback=_dp, help="Data-parallel size or 'auto' (world / (tp×pp×cp)).")
@click.option("--cp", type=POS)
@click.option("--ep", type=POS)
@click.option("--etp", type=POS, help="Expert tensor-parallel size (default: Megatron tp; torchtitan, DeepSpeed 1).")
@click.option("--world-size", type=POS)
@click.option("--gpus-per-node", type=POS)
@click.option("--sequence-parallel/--no-sequence-parallel", default=None)
@click.option("--vpp", type=POS, help="Virtual pipeline stages per rank (interleaved schedule).")
@click.option("--zero", type=click.IntRange(0, 3), help="ZeRO stage (3 = FSDP full shard).")
@click.option("--fsdp", is_flag=True, default=None, help="FSDP full shard (same as --zero 3 --framework torch).")
@click.option("--distributed-optimizer/--no-distributed-optimizer", default=None)
@click.option("--framework", type=click.Choice(["megatron", "deepspeed", "torch"]),
              help="What runs the job: its kernels, gradient buffers and loss (default torch).")
@click.option("--micro-batch", type=POS)
@click.option("--global-batch", type=POS)
@click.option("--seq-len", type=POS)
@click.option("--precision", type=click.Choice(["bf16", "fp16", "fp32"]))
@click.option("--master-weights/--no-master-weights", default=None, help="fp32 master copy (16-bit training).")
@click.option("--grad-fp32/--grad-16bit", default=None, help="Accumulate gradients in fp32 (Megatron main_grad).")
@click.option("--optimizer", type=click.Choice(["adam", "adamw", "sgd", "adam8bit", "paged-adam8bit"]))
@click.option("--optimizer-impl", type=click.Choice(["auto", "fused", "foreach"]),
              help="foreach keeps an fp32 temporary of the moments during the step.")
@click.option("--optimizer-in-backward", is_flag=True, default=None, help="Step each parameter in backward (torchtune).")
@click.option("--recompute", type=click.Choice(["none", "selective", "sac", "full"]),
              help="selective: Megatron's (attention core); sac: per-op selective (torchtitan); full: whole layers.")
@click.option("--recompute-interval", type=POS, help="Recompute one layer in N (torchtitan selective_ac_option=N).")
@click.option("--recompute-layers", type=click.IntRange(min=0), help="Layers per stage recomputed (Megatron block).")
@click.option("--attention", type=click.Choice(["flash", "eager"]), help="Fused (flash/SDPA) or eager attention.")
@click.option("--fused-norm/--unfused-norm", default=None,
              help="Fused norm kernels (default) or PyTorch's composite nn.RMSNorm (fp32 copies).")
@click.option("--loss", type=click.Choice(["auto", "vocab-parallel", "upcast", "chunked", "fused"]),
              help="Cross-entropy: vocab-parallel (Megatron), upcast (fp32 logits), chunked, fused (no logits).")
@click.option("--loss-chunks", type=POS, help="Chunks of a chunked loss (default 8).")
@click.option("--compile-loss", is_flag=True, default=None, help="The loss runs under torch.compile (no fp32 copies).")
@click.option("--offload", help="CPU offload, comma-separated: params, grads, optimizer, activations, all.")
@click.option("--lora-rank", type=click.IntRange(min=0), help="Train LoRA adapters of this rank on a frozen base.")
@click.option("--lora-targets", type=click.Choice(["attn", "qv", "all"]), help="attn: q,k,v,o; all: + MLP.")
@click.option("--qlora", is_flag=True, default=None, help="QLoRA: NF4 base (same as --base-quant nf4).")
@click.option("--base-quant", type=click.Choice(["none", "nf4", "int8"]), help="Quantised frozen base (LoRA).")
@click.option("--fp8", type=click.Choice(["none", "te", "torchao"]), help="FP8 linears (Transformer Engine, torchao).")
@click.option("--fp8-allgather", is_flag=True, default=None, help="FSDP all-gathers weights in FP8.")
@click.option("--deepspeed-engine", is_flag=True, default=None,
              help="Megatron-DeepSpeed: Megatron's model under DeepSpeed's engine (fp32 gradient copy without ZeRO).")
@click.option("--gpu-kind", type=click.Choice(["v100", "a100", "h100", "h200", "b200", "other"]),
              help="GPU generation: the CUDA context differs (V100 ~1.2 GiB).")
@click.option("--deepspeed-config", type=click.Path(dir_okay=False), help="DeepSpeed config JSON.")
@click.option("--megatron-yaml", type=click.Path(dir_okay=False), help="Megatron-style or NeMo YAML.")
@click.option("--torchtitan-toml", type=click.Path(dir_okay=False), help="torchtitan train config TOML.")
@click.option("--gpu-memory", callback=_size, help="GPU memory to plan against, e.g. 80GiB, 80G, 96GB (default: NVML).")
@click.option("--search", "always_search", is_flag=True, help="Search the cheapest plans that fit even when this one fits.")
@click.option("--min-gpus", is_flag=True, help="Also find the smallest GPU count on which some plan fits.")
@config_option
@output_options()
@pass_env
def estimate_memory(fmt: str, output: str | None, width: int | None, no_color: bool, config_path: str | None,
                    env: dict[str, str], **kw: Any) -> None:
    """Predict per-GPU memory of a training plan, check the plan, and search plans that fit.

    Exit codes: 0 fits (or tight: within the estimate's error band, a warning); 1 out of memory,
    or the fit cannot be judged because no GPU memory is known; 2 bad input or an invalid plan
    (a divisibility rule the framework enforces at launch: heads, KV groups, layers, world size).
    """
    import sys

    from llmdiag.config import Config
    from llmdiag.exitcodes import ExitCode
    from llmdiag.memory import checks, job
    from llmdiag.memory.plan import parse_size

    guard_outputs([("-o", output)], [("--hf-config", kw["hf_config"]), ("--deepspeed-config", kw["deepspeed_config"]),
                                     ("--megatron-yaml", kw["megatron_yaml"]),
                                     ("--torchtitan-toml", kw["torchtitan_toml"]), ("--model", kw["model"])],
                  config_path=config_path, env=env)
    cfg = Config.load(config_path, env)
    section = cfg.section("job")
    warnings: list[str] = []
    dims = {k: kw.pop(k) for k in ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "gated", "vocab",
                                   "tied", "bias", "positions", "experts", "top_k", "shared_experts", "shared_ffn",
                                   "dense_layers", "dense_ffn", "kv_lora_rank", "q_lora_rank", "qk_nope_dim",
                                   "qk_rope_dim", "v_head_dim")}
    titan = kw.pop("torchtitan_toml")
    titan_model = None
    if titan:
        from llmdiag.memory import readers

        titan_model = readers.from_torchtitan_toml(titan)[1]
    model_name = kw.pop("model") or (None if kw["hf_config"] else section.get("model")) or \
        (titan_model if not kw["hf_config"] else None)
    params = kw.pop("params") or (section.get("params") if not (model_name or kw["hf_config"]) else None)
    largest = kw.pop("largest_layer_params")
    if kw.pop("fsdp"):
        kw["zero"] = 3
        kw["framework"] = kw["framework"] or "torch"
    if kw.pop("qlora"):
        kw["base_quant"] = "nf4"
        kw["lora_rank"] = kw["lora_rank"] or 8
    search_all, min_gpus = kw.pop("always_search"), kw.pop("min_gpus")
    hf = kw.pop("hf_config")
    m = job.resolve_model(model_name, hf, dims, warnings)
    ds, mg, gpu = kw.pop("deepspeed_config"), kw.pop("megatron_yaml"), kw.pop("gpu_memory")
    p = job.resolve_plan(section, ds, mg, kw, torchtitan=titan, warnings=warnings)
    source = "--gpu-memory" if gpu else None
    if gpu is None and section.get("gpu_memory"):
        gpu, source = parse_size(section["gpu_memory"]), "config job.gpu_memory"
    if gpu is None:
        gpu, source = job.gpu_memory_from_nvml()
    doc = job.build_doc(m, p, params=None if m else params, gpu_memory=gpu, gpu_memory_source=source,
                        warnings=warnings, largest_layer=largest, search_gpus=min_gpus, always_search=search_all)
    protect = [x for x in (ds, mg, titan, config_path, hf) if x]
    emit_doc(doc, fmt, output, width, no_color, env=env, protect=protect)
    for w in doc["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    invalid = [i for i in checks.failing(checks.check_plan(m, p)) if i.check in checks.INVALID]
    if invalid:
        for i in invalid:
            print(f"invalid plan: {i.message}; {i.fix}", file=sys.stderr)
        raise SystemExit(ExitCode.USAGE_ERROR)
    if doc["status"] == "fail" or doc["verdict"] == "unknown":
        raise SystemExit(ExitCode.CHECKS_FAILED)
