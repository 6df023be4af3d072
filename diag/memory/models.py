"""Transformer model dimensions and their exact parameter count.

A :class:`ModelSpec` is what the estimator needs to know about a model: layer count, hidden
size, attention heads and KV groups (GQA), FFN size and whether the MLP is gated (SwiGLU),
vocabulary, tied embeddings, learned position embeddings, biases, the norm kind, and MoE
experts / top-k. It comes from a preset, a Hugging Face ``config.json`` or explicit flags.

Two families are modelled because they cover the published models:
- ``llama``: RMSNorm, no biases, rotary positions, gated MLP (Llama 2/3, Mixtral, TinyLlama);
- ``gpt``: LayerNorm with bias, biases on every linear, learned positions, GeLU MLP, dropout
  (GPT-2/GPT-3, Megatron's GPT layer that the activation formula describes).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from llmdiag.errors import UsageError


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    name: str
    layers: int
    hidden: int
    heads: int
    vocab: int
    ffn: int  # FFN inner size of a dense layer, or of one routed expert in an MoE layer
    kv_heads: int | None = None  # None: same as heads (multi-head attention)
    gated: bool = True  # SwiGLU: three FFN matrices instead of two
    tied: bool = False  # output projection shares the embedding matrix
    bias: bool = False  # biases on every linear and norm (GPT family, Megatron --add-bias-linear)
    norm: str = "rms"  # "rms" (weight only) or "layer" (weight and bias)
    positions: int = 0  # learned position-embedding rows (0: rotary / none)
    experts: int = 1  # routed MoE experts per layer (1: dense)
    top_k: int = 1  # experts each token is routed to
    dropout: bool = False  # dropout after attention probs, projection and MLP (GPT family)
    published_params: int | None = None  # a published exact count, checked by the tests
    head_dim_: int | None = None  # None: hidden / heads (Gemma-2: 256 with hidden 2304 and 8 heads)
    qkv_bias: bool = False  # biases on q, k, v only (Qwen2)
    shared_experts: int = 0  # always-active experts of an MoE layer (DeepSeek, Qwen-MoE)
    shared_ffn: int = 0  # FFN inner size of one shared expert (0: same as ffn)
    dense_layers: int = 0  # leading dense layers of an MoE model (DeepSeek first_k_dense_replace)
    dense_ffn: int = 0  # FFN size of those dense layers (0: same as ffn)
    # Multi-head latent attention (DeepSeek-V2/V3): 0 kv_lora_rank means ordinary attention.
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_dim: int = 0
    qk_rope_dim: int = 0
    v_head_dim: int = 0
    extra_norms: int = 0  # norms per layer beyond the two (Gemma-2/3: 4 in all; Phi-2: 1, i.e. -1)
    qk_norm: bool = False  # RMSNorm on q and k per head (Qwen3, Gemma-3)
    router_bias: bool = False  # DeepSeek-V3 router score-correction bias
    shared_gate: bool = False  # Qwen-MoE: a sigmoid gate (h -> 1) on the shared expert
    head_bias: bool = False  # a bias on the output projection (Phi-2)

    def __post_init__(self) -> None:
        for f in ("layers", "hidden", "heads", "vocab", "ffn", "experts", "top_k"):
            if getattr(self, f) < 1:
                raise UsageError(f"model {self.name}: {f} must be >= 1, got {getattr(self, f)}")
        if self.head_dim_ is None and not self.mla and self.hidden % self.heads:
            raise UsageError(f"model {self.name}: hidden ({self.hidden}) is not divisible by heads ({self.heads});"
                             " give the head size (--head-dim, config head_dim)")
        if self.heads % self.kv:
            raise UsageError(f"model {self.name}: heads ({self.heads}) not divisible by KV groups ({self.kv})")
        if self.top_k > self.experts:
            raise UsageError(f"model {self.name}: top_k ({self.top_k}) exceeds experts ({self.experts})")
        if self.dense_layers > self.layers:
            raise UsageError(f"model {self.name}: dense layers ({self.dense_layers}) exceed layers ({self.layers})")
        if self.norm not in ("rms", "layer"):
            raise UsageError(f"model {self.name}: norm must be 'rms' or 'layer', got {self.norm!r}")

    @property
    def kv(self) -> int:
        return self.kv_heads or self.heads

    @property
    def mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def head_dim(self) -> int:
        return self.head_dim_ or self.hidden // self.heads

    @property
    def q_dim(self) -> int:
        """Width of Q per token (all heads)."""
        return self.heads * (self.qk_nope_dim + self.qk_rope_dim if self.mla else self.head_dim)

    @property
    def kv_dim(self) -> int:
        """Width of K (and of V for ordinary attention) per token."""
        return self.heads * (self.qk_nope_dim + self.qk_rope_dim) if self.mla else self.kv * self.head_dim

    @property
    def v_dim(self) -> int:
        return self.heads * self.v_head_dim if self.mla else self.kv * self.head_dim

    @property
    def moe(self) -> bool:
        return self.experts > 1

    def is_moe_layer(self, i: int) -> bool:
        return self.moe and i >= self.dense_layers

    # --- parameter counts, split the way tensor / expert parallelism shards them -------------
    def attention_params(self) -> int:
        h = self.hidden
        if self.mla:
            qk = self.qk_nope_dim + self.qk_rope_dim
            q = (h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * self.heads * qk if self.q_lora_rank
                 else h * self.heads * qk)
            kv = h * (self.kv_lora_rank + self.qk_rope_dim) + self.kv_lora_rank \
                + self.kv_lora_rank * self.heads * (self.qk_nope_dim + self.v_head_dim)
            return q + kv + self.v_dim * h
        n = h * self.q_dim + 2 * h * self.kv_dim + self.q_dim * h
        if self.bias or self.qkv_bias:
            n += self.q_dim + 2 * self.kv_dim
        if self.bias:
            n += h
        return n

    def _mlp_params(self, f: int) -> int:
        h = self.hidden
        n = (3 if self.gated else 2) * h * f
        if self.bias:
            n += (2 * f if self.gated else f) + h
        return n

    def expert_params(self) -> int:
        """One routed expert's MLP (or the MLP of a dense model)."""
        return self._mlp_params(self.ffn)

    def shared_expert_params(self) -> int:
        return self.shared_experts * self._mlp_params(self.shared_ffn or self.ffn)

    def dense_mlp_params(self) -> int:
        return self._mlp_params(self.dense_ffn or self.ffn)

    def norm_params(self) -> int:
        return self.hidden * (2 if self.norm == "layer" else 1)

    def layer_norm_params(self) -> int:
        return (2 + self.extra_norms) * self.norm_params() + (2 * self.head_dim if self.qk_norm else 0)

    def router_params(self) -> int:
        if not self.moe:
            return 0
        return self.hidden * self.experts + (self.experts if self.router_bias else 0) \
            + (self.hidden if self.shared_gate else 0)

    def layer_params(self, i: int | None = None) -> int:
        """Parameters of layer ``i`` (default: an MoE layer of an MoE model)."""
        if i is not None and not self.is_moe_layer(i):
            return self.attention_params() + self.dense_mlp_params() + self.layer_norm_params()
        return (self.attention_params() + self.experts * self.expert_params() + self.shared_expert_params()
                + self.router_params() + self.layer_norm_params())

    def embedding_params(self) -> int:
        return self.vocab * self.hidden + self.positions * self.hidden

    def head_params(self) -> int:
        """Final norm plus the output projection (0 extra when tied)."""
        return self.norm_params() + (0 if self.tied else self.vocab * self.hidden) + (self.vocab if self.head_bias else 0)

    def total_params(self) -> int:
        return sum(self.layer_params(i) for i in range(self.layers)) + self.embedding_params() + self.head_params()

    def active_params(self) -> int:
        """Parameters a token passes through (MoE: top_k experts)."""
        moe_layers = sum(1 for i in range(self.layers) if self.is_moe_layer(i))
        return self.total_params() - moe_layers * (self.experts - self.top_k) * self.expert_params()

    def largest_layer_params(self) -> int:
        return max(self.layer_params(i) for i in range(self.layers))

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["head_dim"] = d.pop("head_dim_") or self.head_dim
        d["kv_heads"] = self.kv
        d["params"] = self.total_params()
        return d


def _llama(name: str, L: int, h: int, a: int, kv: int, f: int, V: int, published: int | None = None, **kw: Any) -> ModelSpec:
    return ModelSpec(name, L, h, a, V, f, kv_heads=kv, published_params=published, **kw)


def _gpt(name: str, L: int, h: int, a: int, V: int, pos: int, published: int | None = None) -> ModelSpec:
    return ModelSpec(name, L, h, a, V, 4 * h, gated=False, tied=True, bias=True, norm="layer",
                     positions=pos, dropout=True, published_params=published)


# Published exact counts: Hugging Face model cards / safetensors metadata of the released
# checkpoints (GPT-2 124,439,808; Llama-2-7b 6,738,415,616; ...). GPT-3's paper gives "175.0B"
# only, so its count is ours (with learned positions and tied output, as the paper describes).
PRESETS: dict[str, ModelSpec] = {m.name: m for m in (
    _llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 6_738_415_616),
    _llama("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 13_015_864_320),
    _llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 68_976_648_192),
    _llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8_030_261_248),
    _llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 70_553_706_496),
    _llama("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 405_853_388_800),
    _llama("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 46_702_792_704, experts=8, top_k=2),
    _llama("tinyllama-1.1b", 22, 2048, 32, 4, 5632, 32000, 1_100_048_384),
    _gpt("gpt3-175b", 96, 12288, 96, 50257, 2048),
    _gpt("gpt2", 12, 768, 12, 50257, 1024, 124_439_808),
    _gpt("gpt2-medium", 24, 1024, 16, 50257, 1024, 354_823_168),
    _gpt("gpt2-xl", 48, 1600, 25, 50257, 1024, 1_557_611_200),
)}
ALIASES = {"llama-2-7b": "llama2-7b", "llama-2-13b": "llama2-13b", "llama-2-70b": "llama2-70b",
           "llama-3-8b": "llama3-8b", "llama-3-70b": "llama3-70b", "llama-3-405b": "llama3-405b",
           "gpt3": "gpt3-175b", "gpt-3": "gpt3-175b", "mixtral": "mixtral-8x7b"}


def preset(name: str) -> ModelSpec:
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key not in PRESETS:
        raise UsageError(f"unknown model preset {name!r} (known: {', '.join(PRESETS)})")
    return PRESETS[key]


# Keys of a Hugging Face config.json that do not change training memory (ids, rope and init
# constants, names). Every other key the reader does not use is reported as "read but not used".
_HF_INERT = {
    "architectures", "model_type", "torch_dtype", "transformers_version", "bos_token_id", "eos_token_id",
    "pad_token_id", "rope_theta", "rope_scaling", "rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon",
    "initializer_range", "use_cache", "hidden_act", "hidden_activation", "activation_function", "_name_or_path",
    "max_position_embeddings", "attention_dropout", "pretraining_tp", "tie_word_embeddings", "n_ctx",
    "resid_pdrop", "embd_pdrop", "attn_pdrop", "summary_type", "summary_use_proj", "summary_activation",
    "summary_proj_to_labels", "summary_first_dropout", "task_specific_params", "scale_attn_weights",
    "reorder_and_upcast_attn", "scale_attn_by_inverse_layer_idx", "id2label", "label2id", "output_router_logits",
    "router_aux_loss_coef", "router_jitter_noise", "aux_loss_alpha", "seq_aux", "norm_topk_prob",
    "routed_scaling_factor", "scoring_func", "topk_group", "n_group", "ep_size", "rope_local_base_freq",
    "query_pre_attn_scalar", "embedding_multiplier", "quantization_config", "auto_map", "resid_dropout",
    "partial_rotary_factor", "qk_layernorm", "original_max_position_embeddings", "sliding_window_pattern",
    "use_sliding_window", "max_window_layers", "cache_implementation", "bos_token", "eos_token",
    "attn_implementation", "rope_type", "head_dim", "num_key_value_heads", "embd_dropout", "use_qk_norm",
}


def _hf_text(cfg: dict[str, Any]) -> dict[str, Any]:
    """Multimodal configs (Gemma-3, Llama-4) nest the language model under ``text_config``."""
    tc = cfg.get("text_config")
    if isinstance(tc, dict) and "hidden_size" in tc:
        merged = {k: v for k, v in cfg.items() if k != "text_config"}
        merged.update(tc)
        return merged
    return cfg


def read_hf_config(path: str | Path) -> tuple[ModelSpec, list[str]]:
    """A :class:`ModelSpec` from a Hugging Face ``config.json`` and a warning per key read but not used.

    Families: Llama, Mistral/Mixtral, Qwen2/Qwen2-MoE/Qwen3(-MoE), DeepSeek-V2/V3 (MLA, shared and
    dense-first experts), Gemma/Gemma-2/Gemma-3 (head_dim, four norms per layer), GPT-2, Phi/Phi-3.
    """
    p = Path(path)
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"--hf-config: file {str(p)!r} does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"--hf-config: {str(p)!r} is not a readable JSON file: {exc}") from None
    if not isinstance(raw, dict):
        raise UsageError(f"--hf-config: {str(p)!r} does not hold a JSON object")
    cfg = _hf_text(raw)
    used: set[str] = set()

    def get(key: str, default: Any = None) -> Any:
        used.add(key)
        v = cfg.get(key)
        return default if v is None else v

    def need(*keys: str) -> Any:
        for k in keys:
            if cfg.get(k) is not None:
                used.add(k)
                return cfg[k]
        raise UsageError(f"--hf-config: {str(p)!r} lacks {' / '.join(keys)}")

    mtype = str(cfg.get("model_type", "llama"))
    name = str(cfg.get("_name_or_path") or (p.parent.name if p.stem == "config" and p.parent.name else p.stem) or mtype)
    try:
        if mtype == "gpt2":
            h = int(need("n_embd", "hidden_size"))
            spec = ModelSpec(name, int(need("n_layer", "num_hidden_layers")), h, int(need("n_head", "num_attention_heads")),
                             int(need("vocab_size")), int(get("n_inner") or 4 * h), gated=False,
                             tied=bool(cfg.get("tie_word_embeddings", True)), bias=True, norm="layer",
                             positions=int(get("n_positions", 1024)), dropout=True)
            return spec, _unused(cfg, used)
        heads = int(need("num_attention_heads"))
        h = int(need("hidden_size"))
        kw: dict[str, Any] = dict(
            name=name, layers=int(need("num_hidden_layers")), hidden=h, heads=heads, vocab=int(need("vocab_size")),
            kv_heads=int(get("num_key_value_heads") or heads), tied=bool(get("tie_word_embeddings", False)),
            head_dim_=int(get("head_dim")) if get("head_dim") else None)
        dense_ffn = int(need("intermediate_size")) if cfg.get("intermediate_size") is not None else 4 * h
        used.add("intermediate_size")
        if get("attention_bias"):
            kw["qkv_bias"] = True  # Llama/Mistral attention_bias: q, k, v and o
        if get("mlp_bias"):
            kw["bias"] = True
        if mtype.startswith("qwen2"):
            kw["qkv_bias"] = True  # Qwen2 always has q, k, v biases
        if mtype.startswith("qwen3") or mtype.startswith("gemma3"):
            kw["qk_norm"] = True
        if mtype.startswith("gemma2") or mtype.startswith("gemma3"):
            kw["extra_norms"] = 2  # pre/post attention and pre/post feed-forward norms
            kw["tied"] = bool(cfg.get("tie_word_embeddings", True))
        if mtype == "gemma":
            kw["tied"] = bool(cfg.get("tie_word_embeddings", True))
        if mtype == "phi":  # Phi-1/2: parallel attention and MLP behind one LayerNorm, GeLU MLP, biases
            kw.update(gated=False, bias=True, norm="layer", extra_norms=-1, head_bias=True)
        experts = int(get("num_local_experts") or get("n_routed_experts") or get("num_experts") or 1)
        if experts > 1:
            moe_ffn = int(get("moe_intermediate_size") or dense_ffn)
            kw.update(experts=experts, top_k=int(get("num_experts_per_tok") or 1), ffn=moe_ffn, dense_ffn=dense_ffn)
            if mtype.startswith("deepseek"):
                kw["shared_experts"] = int(get("n_shared_experts") or 0)
                kw["dense_layers"] = int(get("first_k_dense_replace") or 0)
                get("moe_layer_freq")
                if get("topk_method") == "noaux_tc":
                    kw["router_bias"] = True
            elif cfg.get("shared_expert_intermediate_size"):  # Qwen-MoE: one shared expert with a sigmoid gate
                kw.update(shared_experts=1, shared_ffn=int(get("shared_expert_intermediate_size")), shared_gate=True)
            if get("mlp_only_layers"):
                raise UsageError(f"--hf-config: {str(p)!r}: mlp_only_layers (dense layers between MoE layers) "
                                 "is not supported; only leading dense layers are")
            if int(get("decoder_sparse_step", 1)) != 1:
                raise UsageError(f"--hf-config: {str(p)!r}: decoder_sparse_step != 1 is not supported")
        else:
            kw["ffn"] = dense_ffn
        if get("kv_lora_rank"):
            kw.update(kv_lora_rank=int(get("kv_lora_rank")), q_lora_rank=int(get("q_lora_rank") or 0),
                      qk_nope_dim=int(get("qk_nope_head_dim")), qk_rope_dim=int(get("qk_rope_head_dim")),
                      v_head_dim=int(get("v_head_dim")))
        else:
            for k in ("q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
                used.discard(k)
        return ModelSpec(**kw), _unused(cfg, used)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"--hf-config: {str(p)!r} has a non-numeric dimension: {exc}") from None


def _unused(cfg: dict[str, Any], used: set[str]) -> list[str]:
    return [f"config.json key {k!r} read but not used by the estimate" for k in cfg
            if k not in used and k not in _HF_INERT and not k.endswith("_token_id") and not k.endswith("dropout")]


def from_hf_config(path: str | Path) -> ModelSpec:
    """Read a Hugging Face ``config.json`` (see :func:`read_hf_config`)."""
    return read_hf_config(path)[0]
