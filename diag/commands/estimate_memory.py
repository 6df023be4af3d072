"""``llmdiag estimate-memory``: per-GPU memory of a training plan, plan checks, and what fits."""

from __future__ import annotations

from typing import Any

import click

from llmdiag.cliutil import (config_option, emit_doc, FiniteFloatRange, guard_outputs, output_options, pass_env,
                             setting_flags, setting_option)
from llmdiag.memory.config import JobSettings


def _size(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    from llmdiag.memory.plan import parse_size

    try:
        return parse_size(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


POS = click.IntRange(min=1)


@click.command("estimate-memory")
@setting_option(JobSettings, "model")
@click.option("--hf-config", type=click.Path(dir_okay=False), help="Hugging Face config.json of the model.")
@setting_option(JobSettings, "params")
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
@setting_option(JobSettings, "tp")
@setting_option(JobSettings, "pp")
@setting_option(JobSettings, "pp_layers")
@setting_option(JobSettings, "dp")
@setting_option(JobSettings, "cp")
@setting_option(JobSettings, "ep")
@setting_option(JobSettings, "etp")
@setting_option(JobSettings, "world_size")
@setting_option(JobSettings, "gpus_per_node")
@setting_option(JobSettings, "sequence_parallel")
@setting_option(JobSettings, "vpp")
@setting_option(JobSettings, "zero")
@click.option("--fsdp", is_flag=True, default=None, help="FSDP full shard (same as --zero 3 --framework torch).")
@setting_option(JobSettings, "distributed_optimizer")
@setting_option(JobSettings, "framework")
@setting_option(JobSettings, "micro_batch")
@setting_option(JobSettings, "global_batch")
@setting_option(JobSettings, "seq_len")
@setting_option(JobSettings, "precision")
@click.option("--master-weights/--no-master-weights", default=None, help="fp32 master copy (16-bit training).")
@click.option("--grad-fp32/--grad-16bit", default=None, help="Accumulate gradients in fp32 (Megatron main_grad).")
@setting_option(JobSettings, "optimizer")
@setting_option(JobSettings, "optimizer_impl")
@setting_option(JobSettings, "optimizer_in_backward")
@setting_option(JobSettings, "recompute")
@setting_option(JobSettings, "recompute_interval")
@setting_option(JobSettings, "recompute_layers")
@setting_option(JobSettings, "attention")
@setting_option(JobSettings, "fused_norm")
@setting_option(JobSettings, "loss")
@setting_option(JobSettings, "loss_chunks")
@setting_option(JobSettings, "compile_loss")
@setting_option(JobSettings, "offload")
@setting_option(JobSettings, "lora_rank")
@setting_option(JobSettings, "lora_targets")
@click.option("--qlora", is_flag=True, default=None, help="QLoRA: NF4 base (same as --base-quant nf4).")
@setting_option(JobSettings, "base_quant")
@setting_option(JobSettings, "fp8")
@setting_option(JobSettings, "fp8_allgather")
@setting_option(JobSettings, "deepspeed_engine")
@setting_option(JobSettings, "gpu_kind")
@click.option("--deepspeed-config", type=click.Path(dir_okay=False), help="DeepSpeed config JSON.")
@click.option("--megatron-yaml", type=click.Path(dir_okay=False), help="Megatron-style or NeMo YAML.")
@click.option("--torchtitan-toml", type=click.Path(dir_okay=False), help="torchtitan train config TOML.")
@setting_option(JobSettings, "gpu_memory", callback=_size)
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

    guard_outputs([("-o", output)], [("--hf-config", kw["hf_config"]), ("--deepspeed-config", kw["deepspeed_config"]),
                                     ("--megatron-yaml", kw["megatron_yaml"]),
                                     ("--torchtitan-toml", kw["torchtitan_toml"]), ("--model", kw["model"])],
                  config_path=config_path, env=env)
    section = Config.load(config_path, env).section("job")
    flags = {key: value for (_, key), value in setting_flags().items()}
    inputs = job.resolve(section, flags, dims={k: kw[k] for k in job.DIMENSIONS},
                         extra_flags={k: kw[k] for k in job.SHORTHAND_FLAGS}, hf_config=kw["hf_config"],
                         deepspeed=kw["deepspeed_config"], megatron=kw["megatron_yaml"],
                         torchtitan=kw["torchtitan_toml"])
    gpu, source = job.gpu_memory(flags.get("gpu_memory"), section)
    doc = job.build_doc(inputs.model, inputs.plan, params=inputs.params, gpu_memory=gpu, gpu_memory_source=source,
                        warnings=inputs.warnings, largest_layer=kw["largest_layer_params"],
                        search_gpus=kw["min_gpus"], always_search=kw["always_search"])
    protect = [x for x in (kw["deepspeed_config"], kw["megatron_yaml"], kw["torchtitan_toml"], config_path,
                           kw["hf_config"]) if x]
    emit_doc(doc, fmt, output, width, no_color, env=env, protect=protect)
    for w in doc["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    invalid = [i for i in doc["plan_checks"] if i["severity"] == "fail" and i["check"] in checks.INVALID]
    if invalid:
        for i in invalid:
            print(f"invalid plan: {i['message']}; {i['fix']}", file=sys.stderr)
        raise SystemExit(ExitCode.USAGE_ERROR)
    if doc["status"] == "fail" or doc["verdict"] == "unknown":
        raise SystemExit(ExitCode.CHECKS_FAILED)
