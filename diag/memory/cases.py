"""Published and measured memory cases (``cases-dev.json``) → estimator inputs and the compared number.

A case records a model, a parallel plan and training settings the way its source states them,
what was measured (allocated, reserved, nvidia-smi, model states, the loss, the buckets) and
its unit. :func:`express` maps those fields onto a :class:`ModelSpec` and a :class:`Plan` by
their meaning (framework named in the source, "full" recompute, "QLoRA (NF4 base, LoRA rank
8 on q,k,v,o + MLP)" ...) with no per-case numbers; :func:`evaluate` runs the estimate and
returns the signed error. Used by ``tests/unit/memory/test_cases.py`` and ``bench/memory_accuracy.py``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from llmdiag.memory.estimate import estimate
from llmdiag.memory.models import ModelSpec
from llmdiag.memory.plan import Plan

UNITS = {"bytes": 1, "gb (1e9 bytes)": 1e9, "gib": 2**30, "mib": 2**20}


@dataclasses.dataclass
class Expressed:
    model: ModelSpec | None
    plan: Plan
    params: float | None
    largest_layer: float | None
    measure: str  # model_states | deepspeed_states | comm_buckets | loss | allocated | reserved | device
    gpu_memory: int | None
    #: the pipeline stage the number was read on: None for the worst one, -1 for the last (Megatron logs its
    #: memory from the last rank, which holds the last stage)
    stage: int | None = None


class NotExpressed(Exception):
    """The case measures something the estimator does not model (the reason is the message)."""


def _int(v: Any) -> int | None:
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return int(v)
    mt = re.match(r"\s*(\d+(?:\.\d+)?)\s*([kKmM]?)", str(v))
    if not mt:
        return None
    mult = {"k": 1000, "m": 10**6}.get(mt.group(2).lower(), 1)
    return int(float(mt.group(1)) * mult)


def _vocab(v: Any) -> int | None:
    """"250k (approx.)" → 250000: the stated size (Megatron pads it a little; the cases do not say how)."""
    return _int(v)


def unit_bytes(case: dict[str, Any]) -> float:
    u = str(case["unit"]).lower()
    if u.startswith("gib"):
        return 2**30
    if u.startswith("gb (as printed)"):
        return 1e9 if case["kind"].startswith("analytic") else 2**30
    for k, v in UNITS.items():
        if u.startswith(k):
            return v
    raise NotExpressed(f"unknown unit {case['unit']!r}")


def _framework(case: dict[str, Any]) -> str:
    text = (case["source"] + " " + str(case["training"].get("framework", "")) + " " + str(case.get("notes", ""))).lower()
    if "megatron" in text or "bigscience-workshop" in text:  # BigScience trained with Megatron-DeepSpeed
        return "megatron"
    if "deepspeed" in text and "megatron" not in text:
        return "deepspeed"
    return "torch"


def _gpu_memory(case: dict[str, Any]) -> int | None:
    mt = re.search(r"(\d+)\s*GB", str(case["parallel"].get("gpus", "")))
    return int(mt.group(1)) * 2**30 if mt else None


def _model(case: dict[str, Any]) -> tuple[ModelSpec | None, float | None, float | None]:
    md = case["model"]
    if "hidden" in md and "layers" in md:
        h, heads = int(md["hidden"]), int(md["heads"])
        # a GQA model (kv_heads stated) is of the Llama family unless the case says otherwise
        llama = bool(md.get("swiglu", md.get("kv_heads") is not None))
        norm = str(md.get("norm", "")).lower()
        norm_kind = "layer" if "layernorm" in norm.replace(" ", "") or (not norm and not llama) else "rms"
        pos = str(md.get("position_embedding", "")).lower()
        seq = int(md["seq"])
        spec = ModelSpec(
            md.get("name", case["id"]), int(md["layers"]), h, heads, _vocab(md["vocab"]) or 1,
            int(md.get("ffn") or 4 * h), kv_heads=int(md.get("kv_heads") or md.get("query_groups") or heads),
            gated=llama, tied=bool(md.get("tied_embeddings", not llama)),
            bias=bool(md.get("linear_bias", False)), norm=norm_kind,
            positions=seq if "learned" in pos else 0,
            experts=int(md.get("experts") or 1), top_k=int(md.get("top_k") or 1),
            head_dim_=int(md["kv_channels"]) if md.get("kv_channels") else None,
            qk_norm=bool(re.search(r"qk[\s_-]*(?:layer)?norm", norm)),
            **{f: int(md[f]) for f in _MODEL_INTS if md.get(f)})
        return spec, None, None
    if "params" in md:
        return None, float(md["params"]), md.get("largest_layer_params")
    preset = _preset_by_name(str(md.get("name", "")))
    if preset is not None:
        return preset, None, None
    if "fp32_bytes" in md:
        return None, md["fp32_bytes"] / 4, None
    if "hidden" in md and "vocab" in md:
        return None, None, None  # the loss only
    if not md and "bucket" in case["quantity"]:
        return None, 0.0, None  # the buckets do not depend on the model
    raise NotExpressed("no model dimensions or parameter count")


#: model fields a case may state under the ModelSpec's own names (MoE extras, multi-head latent attention)
_MODEL_INTS = ("shared_experts", "shared_ffn", "dense_layers", "dense_ffn", "q_lora_rank", "kv_lora_rank",
               "qk_nope_dim", "qk_rope_dim", "v_head_dim")


def _dated_before(case: dict[str, Any], when: tuple[int, int]) -> bool:
    """The case's source names a year and month (``2024-12``, ``202412``) before ``when``."""
    mt = re.search(r"(?<!\d)(20[12]\d)[-_]?(0[1-9]|1[0-2])(?!\d)", str(case["source"]))
    return bool(mt) and (int(mt.group(1)), int(mt.group(2))) < when


def _attention_eager(case: dict[str, Any]) -> bool:
    """Attention that keeps its b·a·s² scores: Megatron's unfused backend or ``--transformer-impl local``,
    eager / math attention, or a case that says flash attention was not used."""
    tr, md = case["training"], case["model"]
    att = " ".join(str(x) for x in (tr.get("attention", ""), md.get("attention", ""), tr.get("attention_backend", ""),
                                    tr.get("framework", ""))).lower()
    return bool(re.search(r"unfused|transformer-impl local|\beager\b|\bmath\b|no flash|without flash|"
                          r"flash[\s_-]*attn[\s_-]*(?:=|:)?\s*false", att))


def _hf_modeling(case: dict[str, Any]) -> bool:
    """The model runs as Hugging Face transformers code (its Llama-family RMSNorm upcasts to fp32), not a
    trainer with fused norms (Megatron/TE, torchtitan, torchtune, Liger, Unsloth)."""
    tr, md = case["training"], case["model"]
    text = " ".join(str(x) for x in (tr.get("framework", ""), md.get("name", ""))).lower()
    if re.search(r"megatron|torchtitan|torchtune|liger|unsloth|transformer.engine|\bte\b", text):
        return False
    return bool(re.search(r"\btransformers\b|\bhf\b|hugging\s*face|\bpeft\b|\btrl\b", text))


def _preset_by_name(name: str) -> ModelSpec | None:
    """"Llama 3.1 70B" → llama3-70b, "Llama-2-7b" → llama2-7b, "Mixtral 8x7B", "GPT-2 XL"."""
    from llmdiag.memory.models import PRESETS

    n = name.lower()
    mt = re.search(r"llama[\s-]*(\d)(?:\.\d)?[\s-]*(\d+)b", n)
    key = f"llama{mt.group(1)}-{mt.group(2)}b" if mt else None
    if key is None and "mixtral" in n and "8x7b" in n.replace(" ", ""):
        key = "mixtral-8x7b"
    if key is None:
        mt = re.search(r"gpt-?2(?:[\s-]*(medium|xl))?", n)
        key = ("gpt2-" + mt.group(1) if mt.group(1) else "gpt2") if mt else None
    return PRESETS.get(key) if key else None


def express(case: dict[str, Any]) -> Expressed:
    tr, par, md = case["training"], case["parallel"], case["model"]
    q = case["quantity"].lower()
    fw = _framework(case)
    kw: dict[str, Any] = {"framework": fw}
    # BigScience trained with Megatron-DeepSpeed (bigscience-workshop/Megatron-DeepSpeed)
    text = (case["source"] + " " + str(case.get("notes", ""))).lower()
    if fw == "megatron" and ("megatron-deepspeed" in text or "bigscience-workshop" in text):
        kw["deepspeed_engine"] = True
    if "after deepspeed.initialize" in q:
        raise NotExpressed("memory right after initialize depends on how the model was loaded before "
                           "partitioning (not a training-step peak)")
    prec = str(tr.get("precision") or tr.get("dtype") or tr.get("param_dtype") or "bf16").lower()
    if "not stated" in prec or "unknown" in prec:
        # Megatron(-DeepSpeed) trains in fp16 unless --bf16 is given; the others default to bf16
        prec = "fp16" if fw == "megatron" else "bf16"
    # the first dtype the text names is the training's ("bf16 (... no fp32 master ...)" is bf16)
    first = re.search(r"\b(fp32|float32|fp16|float16|half|bf16|bfloat16)\b", prec)
    kw["precision"] = {"fp32": "fp32", "float32": "fp32", "fp16": "fp16", "float16": "fp16",
                       "half": "fp16"}.get(first.group(1) if first else "", "bf16")
    if kw["precision"] == "fp32" or re.search(r"\bpure[\s-]*(?:bf16|bfloat16|fp16|16)|no (?:fp32 )?master", prec):
        kw["master_weights"] = False
    for k in ("tp", "pp", "cp", "ep"):
        if _int(par.get(k)) is not None:
            kw[k] = _int(par[k])
    if _int(par.get("expert_tp") or par.get("etp")) is not None:
        kw["etp"] = _int(par.get("expert_tp") or par.get("etp"))
    fsdp = par.get("fsdp") or par.get("dp_shard")
    if fsdp:
        kw.update(dp=int(fsdp) * int(_int(par.get("dp_replicate")) or 1), zero=3)
    elif _int(par.get("dp")):
        kw["dp"] = _int(par["dp"])
    if par.get("nodes") and par.get("gpus_per_node") and "dp" not in kw:
        world = int(par["nodes"]) * int(par["gpus_per_node"])
        kw["dp"] = world // (kw.get("tp", 1) * kw.get("pp", 1) * kw.get("cp", 1))
    if "dp" not in kw:
        kw["dp"] = _int(par.get("gpus")) or 1
    if par.get("zero_stage") is not None:
        kw["zero"] = int(par["zero_stage"])
    if par.get("sequence_parallel"):
        kw["sequence_parallel"] = True
    if par.get("tp_comm_overlap") or tr.get("tp_comm_overlap"):
        kw["tp_comm_overlap"] = True
    if par.get("distributed_optimizer") or tr.get("distributed_optimizer"):
        kw["distributed_optimizer"] = True
    mb = tr.get("micro_batch") or tr.get("local_batch") or tr.get("batch")
    if mb:
        kw["micro_batch"] = int(mb)
    if tr.get("global_batch"):
        kw["global_batch"] = int(tr["global_batch"])
    rc = str(tr.get("recompute", tr.get("activation_checkpointing", ""))).lower()
    # "every 2 layers", "interval=2", "option 2"; not the digit of a file name ("llama3_8b.toml")
    every = re.search(r"(?:every|interval|option)[\s=:'\"]{0,4}(\d+)\b", rc)
    block = re.search(r"block\D{0,30}(\d+)|(\d+)\s*layers?\s*(?:per stage|block)", rc)
    if rc.startswith("full") or rc in ("true", "yes"):
        kw["recompute"] = "full"
        if block and "block" in rc:
            kw["recompute_layers"] = int(block.group(1) or block.group(2))
    elif rc.startswith("selective") and fw == "torch":
        # torchtitan/torchtune: "selective" is per-op SAC ("op") or one layer in N fully recomputed
        if every:
            kw.update(recompute="full", recompute_interval=int(every.group(1)))
        else:
            kw["recompute"] = "sac"
    elif rc.startswith("selective"):
        kw["recompute"] = "selective"
    elif not rc and fw == "megatron" and "checkpoint-activations" in str(case.get("notes", "")):
        kw["recompute"] = "full"  # the launch script's --checkpoint-activations
    opt = str(tr.get("optimizer", "adam")).lower()
    eight = "8bit" in opt or "8-bit" in opt
    kw["optimizer"] = ("sgd" if "sgd" in opt else ("paged-adam8bit" if eight else "paged-adamw") if "paged" in opt
                       else "adam8bit" if eight else "adam")
    if tr.get("optimizer_in_bwd") or tr.get("optimizer_in_backward"):
        kw["optimizer_in_backward"] = True
    if tr.get("activation_offloading") or tr.get("enable_activation_offloading"):
        kw["offload_activations"] = True
    if par.get("vpp") or par.get("virtual_pipeline"):
        kw["vpp"] = _int(par.get("vpp") or par.get("virtual_pipeline"))
    if tr.get("float8"):
        kw["fp8"] = "torchao" if "torchao" in str(tr["float8"]).lower() else "te"
    method = str(tr.get("method", "")).lower()
    if "lora" in method:
        rank = re.search(r"rank\s*(\d+)", method)
        kw["lora_rank"] = int(rank.group(1)) if rank else 8
        on = method.split(" on ", 1)[1] if " on " in method else "q,k,v,o"
        kw["lora_targets"] = "all" if "mlp" in on else ("attn" if re.search(r"\bk\b|\bo\b", on) else "qv")
        kw["base_quant"] = "nf4" if ("nf4" in method or "qlora" in method) else ("int8" if "int8" in method else "none")
    if str(tr.get("offload_param", "none")).lower() in ("cpu", "nvme"):
        kw["offload_params"] = True
    if str(tr.get("offload_optimizer", "none")).lower() in ("cpu", "nvme"):
        kw.update(offload_optimizer=True, offload_grads=True)
    if tr.get("fsdp_cpu_offload"):
        kw.update(offload_params=True, offload_grads=True, offload_optimizer=True)
    if tr.get("fused_optimizer") and "torchtune" in case["source"]:
        kw["optimizer_in_backward"] = True  # torchtune's "fused optimizer": the step runs in backward
    if "torchtune" in case["source"] and not _dated_before(case, (2024, 8)):
        kw["loss"] = "chunked"  # torchtune recipes use CEWithChunkedOutputLoss (since mid-2024; before, the full logits)
        kw["compile_loss"] = bool(tr.get("compile"))  # and compile it with the model (compile_loss)
    text_all = " ".join(str(x) for x in (case["source"], tr.get("framework", ""), case.get("notes", ""))).lower()
    if "torchtitan" in text_all:
        if tr.get("compile") and not _dated_before(case, (2025, 1)):
            # torchtitan compiles the loss with the model (compile.components); until early 2025 its
            # train.py left the loss eager ("compiling loss function causes CUDA errors")
            kw["compile_loss"] = True
        if kw.get("tp", 1) > 1:
            kw["sequence_parallel"] = True  # its TP plan shards the residual stream on the sequence
    if _attention_eager(case):
        kw["attention"] = "eager"
    if _hf_modeling(case):
        kw["fused_norm"] = False  # transformers' RMSNorm upcasts to fp32 and keeps the fp32 copies
    if tr.get("overlap_comm"):
        kw["ds_overlap_comm"] = True
        kw["framework"] = "deepspeed"
    if tr.get("reduce_bucket_size"):
        kw["bucket_mb"] = float(tr["reduce_bucket_size"]) * 2 / 1e6
    if tr.get("allgather_bucket_size"):
        kw["ds_allgather_bucket"] = float(tr["allgather_bucket_size"])
    if "standard cross-entropy" in str(tr.get("loss", "")).lower():
        kw["loss"] = "upcast"
    m, params, largest = _model(case)
    seq = md.get("seq") or tr.get("seq_len") or tr.get("seq") or md.get("seq_len")
    if m is not None and seq:
        kw["seq_len"] = int(seq)
    elif tr.get("tokens_in_batch"):
        kw["seq_len"] = int(tr["tokens_in_batch"])
    if "tokens_in_batch" in tr and m is None and "hidden" in md:
        m = ModelSpec(md.get("name", case["id"]), 1, int(md["hidden"]), 1, int(md["vocab"]), int(md["hidden"]))
    if "dp" in kw and kw.get("zero", 0) == 0 and "zero" not in kw and fw == "deepspeed":
        kw["zero"] = 0
    measure = "device"
    if "deepspeed zero-3 estimator" in q:
        measure, kw["framework"] = "deepspeed_states", "deepspeed"
    elif "model-state" in q or "weight+optimizer" in q or "training using adam" in q:
        measure = "model_states"
    elif "communication buckets" in q:
        measure = "comm_buckets"
        kw.setdefault("dp", 2)
    elif "loss computation" in q:
        measure = "loss"
    elif "reserved" in q or "peak memory" in q:
        measure = "reserved"
    elif "allocated" in q or "active" in q:
        measure = "allocated"
    if kw.get("dp", 1) > 1 and kw.get("zero") is None and "distributed_optimizer" not in kw and measure == "comm_buckets":
        kw["zero"] = 2
    if _before_lazy_loading(case):
        kw["module_loading"] = "eager"
    # the GPU the run used: its ``gpus`` field, the notes only where that names none (a note may mention others)
    gpu_rx = r"\b(v100|a100|a800|h100|h800|h200|b200)\b"
    kind = re.search(gpu_rx, str(case["parallel"].get("gpus", "")).lower()) or \
        re.search(gpu_rx, str(case.get("notes", "")).lower())
    if kind:
        kw["gpu_kind"] = {"a800": "a100", "h800": "h100"}.get(kind.group(1), kind.group(1))
    where = " ".join(str(x) for x in (case["quantity"], case.get("notes", ""))).lower()
    last = bool(re.search(r"last (?:pipeline )?(?:rank|stage)", where)) and kw.get("pp", 1) > 1
    return Expressed(m, Plan(**kw), params, largest, measure, _gpu_memory(case), -1 if last else None)


_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


def _before_lazy_loading(case: dict[str, Any]) -> bool:
    """The run used a CUDA without lazy module loading (before 11.7, mid-2022): a CUDA 10 / 11.0-11.6
    or torch < 1.13 named in the case, or a run dated before July 2022 ("Feb 2022")."""
    text = (str(case.get("notes", "")) + " " + json.dumps(case.get("training", {}))).lower()
    cuda = re.search(r"cuda[\s_-]*(\d+)\.(\d+)", text)
    if cuda:
        return (int(cuda.group(1)), int(cuda.group(2))) < (11, 7)
    torch = re.search(r"\btorch[\s_-]*(?:version\s*)?(\d+)\.(\d+)", text)
    if torch:
        return (int(torch.group(1)), int(torch.group(2))) < (1, 13)
    dated = re.search(r"\b(" + "|".join(_MONTHS) + r")[a-z]*\.?\s+(20\d\d)\b", text)
    return bool(dated) and (int(dated.group(2)), _MONTHS.index(dated.group(1))) < (2022, 6)


def evaluate(case: dict[str, Any]) -> dict[str, Any]:
    """The estimate of the case's measured quantity, in the case's unit, and the signed error."""
    from llmdiag.errors import UsageError

    try:
        ex = express(case)
    except (UsageError, KeyError, TypeError, ValueError) as exc:
        raise NotExpressed(f"fields the mapping does not understand: {type(exc).__name__}: {exc}") from None
    est = estimate(ex.model, ex.plan, params=ex.params, gpu_memory=ex.gpu_memory, largest_layer=ex.largest_layer)
    lines = {x["name"]: x["bytes"] for x in est["lines"]}
    states = sum(lines[k] for k in ("weights", "gradients", "master_weights", "optimizer_states"))
    got = {"model_states": states, "deepspeed_states": states + lines["gathered_params"],
           "comm_buckets": lines["comm_buckets"], "loss": lines["logits"], "reserved": est["peak"]["reserved"],
           "allocated": est["peak"]["allocated"],
           "device": est["breakdown"]["total"]}[ex.measure]
    if ex.stage is not None and ex.measure in ("allocated", "reserved", "device"):
        got = est["stages"][ex.stage][ex.measure]
    if ex.measure == "loss":  # the loss line of the stage that computes it, whichever phase peaks
        from llmdiag.memory.estimate import loss_line

        got = loss_line(ex.model, ex.plan, ex.plan.pp - 1).bytes
    unit = unit_bytes(case)
    out = {"id": case["id"], "kind": case["kind"], "measure": ex.measure, "estimate": got / unit,
           "verdict": est["verdict"], "tolerance": tolerance(case)}
    if case["value"] == "OOM":
        out.update(value="OOM", error=None, ok=est["verdict"] == "out-of-memory")
    else:
        err = (got / unit - case["value"]) / case["value"]
        out.update(value=case["value"], error=err, ok=_within(case, got / unit, err))
    return out


def tolerance(case: dict[str, Any]) -> str:
    hint = str(case.get("tolerance_hint", "")).lower()
    if hint.startswith("exact"):
        return "exact"
    if "order-of-magnitude" in hint:
        return "x2"
    mt = re.search(r"±\s*(\d+)\s*%", hint)
    return f"{mt.group(1)}%" if mt else "15%"


def _within(case: dict[str, Any], got: float, err: float) -> bool:
    tol = tolerance(case)
    if tol == "exact":  # print rounding: half a unit of the last printed digit
        text = repr(case["value"])
        decimals = len(text.split(".")[1]) if "." in text and not text.endswith(".0") else 0
        return abs(got - case["value"]) <= 0.5 * 10 ** -decimals + 1e-9
    if tol == "x2":
        return 0.5 <= got / case["value"] <= 2
    return abs(err) <= int(tol[:-1]) / 100


def load(path: str | Path) -> list[dict[str, Any]]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


_VARIANT = re.compile(r"^(?:pp(?P<pp>\d+)_)?(?:dp(?P<dp>\d+)_)?mbs(?P<mbs>\d+)_GB$"
                      r"|^fsdp(?P<fsdp>\d+)_cp(?P<cp>\d+)_(?P<k>\d+)k$")


def related_variants(case: dict[str, Any]) -> list[dict[str, Any]]:
    """The measured neighbours a case lists under ``related`` with a plan in their key
    (``mbs2_GB``, ``pp6_dp8_mbs4_GB``, ``fsdp4_cp2_64k``), as cases of their own."""
    out = []
    for key, value in (case.get("related") or {}).items():
        mt = _VARIANT.match(key)
        if not mt or not isinstance(value, (int, float)):
            continue
        v = json.loads(json.dumps(case))
        v["id"], v["value"] = f"{case['id']}~{key}", value
        v.pop("related", None)
        if mt.group("mbs"):
            v["training"]["micro_batch"] = int(mt.group("mbs"))
            v["training"].pop("local_batch", None)
            if mt.group("pp"):
                v["parallel"]["pp"] = int(mt.group("pp"))
            if mt.group("dp"):
                v["parallel"]["dp"] = int(mt.group("dp"))
        else:
            v["parallel"].update(fsdp=int(mt.group("fsdp")), cp=int(mt.group("cp")))
            v["model"]["seq"] = int(mt.group("k")) * 1024
        out.append(v)
    return out
