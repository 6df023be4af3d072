"""``llmdiag estimate-memory``: per-GPU memory of a training plan, plan checks, and what fits."""

from __future__ import annotations

from typing import Any

import click

from llmdiag.cliutil import config_option, emit_doc, guard_outputs, output_options, pass_env


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
@click.option("--params", type=click.FloatRange(min=1), help="Parameter count only (e.g. 7.5e9): model states only.")
@click.option("--layers", type=POS)
@click.option("--hidden", type=POS)
@click.option("--heads", type=POS)
@click.option("--kv-heads", type=POS, help="KV groups (GQA).")
@click.option("--ffn", type=POS, help="FFN inner size (default 4 × hidden).")
@click.option("--gated/--ungated", default=None, help="Gated (SwiGLU) or plain MLP.")
@click.option("--vocab", type=POS)
@click.option("--tied/--untied", default=None, help="Tied input/output embeddings.")
@click.option("--experts", type=POS, help="MoE experts per layer.")
@click.option("--top-k", type=POS, help="MoE experts per token.")
@click.option("--tp", type=POS)
@click.option("--pp", type=POS)
@click.option("--dp", callback=_dp, help="Data-parallel size or 'auto' (world / (tp×pp×cp)).")
@click.option("--cp", type=POS)
@click.option("--ep", type=POS)
@click.option("--world-size", type=POS)
@click.option("--gpus-per-node", type=POS)
@click.option("--sequence-parallel/--no-sequence-parallel", default=None)
@click.option("--vpp", type=POS, help="Virtual pipeline stages per rank (interleaved schedule).")
@click.option("--zero", type=click.IntRange(0, 3), help="ZeRO stage (3 = FSDP full shard).")
@click.option("--fsdp", is_flag=True, default=None, help="FSDP full shard (same as --zero 3).")
@click.option("--distributed-optimizer/--no-distributed-optimizer", default=None)
@click.option("--micro-batch", type=POS)
@click.option("--global-batch", type=POS)
@click.option("--seq-len", type=POS)
@click.option("--precision", type=click.Choice(["bf16", "fp16", "fp32"]))
@click.option("--master-weights/--no-master-weights", default=None, help="fp32 master copy (16-bit training).")
@click.option("--grad-fp32/--grad-16bit", default=None, help="Accumulate gradients in fp32 (Megatron main_grad).")
@click.option("--optimizer", type=click.Choice(["adam", "adamw", "sgd", "adam8bit"]))
@click.option("--recompute", type=click.Choice(["none", "selective", "full"]))
@click.option("--attention", type=click.Choice(["flash", "eager"]), help="Fused (flash/SDPA) or eager attention.")
@click.option("--fused-norm/--unfused-norm", default=None,
              help="Fused norm kernels (default) or PyTorch's composite nn.RMSNorm (fp32 copies).")
@click.option("--deepspeed-config", type=click.Path(dir_okay=False), help="DeepSpeed config JSON.")
@click.option("--megatron-yaml", type=click.Path(dir_okay=False), help="Megatron-style YAML (parallel_policy: ...).")
@click.option("--gpu-memory", callback=_size, help="GPU memory to plan against, e.g. 80GiB (default: NVML).")
@config_option
@output_options()
@pass_env
def estimate_memory(fmt: str, output: str | None, width: int | None, no_color: bool, config_path: str | None,
                    env: dict[str, str], **kw: Any) -> None:
    """Predict per-GPU memory of a training plan, check the plan, and say what fits.

    Exit codes: 0 fits, 1 out of memory or a plan check fails, 2 bad input.
    """
    from llmdiag.config import Config
    from llmdiag.exitcodes import ExitCode
    from llmdiag.memory import job
    from llmdiag.memory.plan import parse_size

    guard_outputs([("-o", output)], [("--hf-config", kw["hf_config"]), ("--deepspeed-config", kw["deepspeed_config"]),
                                     ("--megatron-yaml", kw["megatron_yaml"]), ("--model", kw["model"])],
                  config_path=config_path, env=env)
    cfg = Config.load(config_path, env)
    section = cfg.section("job")
    dims = {k: kw.pop(k) for k in ("layers", "hidden", "heads", "kv_heads", "ffn", "gated", "vocab", "tied",
                                   "experts", "top_k")}
    model_name = kw.pop("model") or (None if kw["hf_config"] else section.get("model"))
    params = kw.pop("params") or (section.get("params") if not (model_name or kw["hf_config"]) else None)
    if kw.pop("fsdp"):
        kw["zero"] = 3
    hf = kw.pop("hf_config")
    m = job.resolve_model(model_name, hf, dims)
    ds, mg, gpu = kw.pop("deepspeed_config"), kw.pop("megatron_yaml"), kw.pop("gpu_memory")
    p = job.resolve_plan(section, ds, mg, kw)
    source = "--gpu-memory" if gpu else None
    if gpu is None and section.get("gpu_memory"):
        gpu, source = parse_size(section["gpu_memory"]), "config job.gpu_memory"
    if gpu is None:
        gpu, source = job.gpu_memory_from_nvml()
    doc = job.build_doc(m, p, params=None if m else params, gpu_memory=gpu, gpu_memory_source=source)
    protect = [x for x in (ds, mg, config_path, hf) if x]
    emit_doc(doc, fmt, output, width, no_color, env=env, protect=protect)
    if doc["status"] == "fail":
        raise SystemExit(ExitCode.CHECKS_FAILED)
