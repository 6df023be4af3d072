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
    ffn: int
    kv_heads: int | None = None  # None: same as heads (multi-head attention)
    gated: bool = True  # SwiGLU: three FFN matrices instead of two
    tied: bool = False  # output projection shares the embedding matrix
    bias: bool = False  # biases on linears and norms (GPT family)
    norm: str = "rms"  # "rms" (weight only) or "layer" (weight and bias)
    positions: int = 0  # learned position-embedding rows (0: rotary / none)
    experts: int = 1  # MoE experts per layer (1: dense)
    top_k: int = 1  # experts each token is routed to
    dropout: bool = False  # dropout after attention probs, projection and MLP (GPT family)
    published_params: int | None = None  # a published exact count, checked by the tests

    def __post_init__(self) -> None:
        for f in ("layers", "hidden", "heads", "vocab", "ffn", "experts", "top_k"):
            if getattr(self, f) < 1:
                raise UsageError(f"model {self.name}: {f} must be >= 1, got {getattr(self, f)}")
        if self.hidden % self.heads:
            raise UsageError(f"model {self.name}: hidden ({self.hidden}) is not divisible by heads ({self.heads})")
        if self.heads % self.kv:
            raise UsageError(f"model {self.name}: heads ({self.heads}) not divisible by KV groups ({self.kv})")
        if self.top_k > self.experts:
            raise UsageError(f"model {self.name}: top_k ({self.top_k}) exceeds experts ({self.experts})")
        if self.norm not in ("rms", "layer"):
            raise UsageError(f"model {self.name}: norm must be 'rms' or 'layer', got {self.norm!r}")

    @property
    def kv(self) -> int:
        return self.kv_heads or self.heads

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_dim(self) -> int:
        return self.kv * self.head_dim

    # --- parameter counts, split the way tensor / expert parallelism shards them -------------
    def attention_params(self) -> int:
        h, kvd = self.hidden, self.kv_dim
        n = 2 * h * h + 2 * h * kvd
        if self.bias:
            n += h + 2 * kvd + h
        return n

    def expert_params(self) -> int:
        """One expert's MLP."""
        h, f = self.hidden, self.ffn
        n = (3 if self.gated else 2) * h * f
        if self.bias:
            n += (2 * f if self.gated else f) + h
        return n

    def norm_params(self) -> int:
        return self.hidden * (2 if self.norm == "layer" else 1)

    def router_params(self) -> int:
        return self.hidden * self.experts if self.experts > 1 else 0

    def layer_params(self) -> int:
        return self.attention_params() + self.experts * self.expert_params() + self.router_params() + 2 * self.norm_params()

    def embedding_params(self) -> int:
        return self.vocab * self.hidden + self.positions * self.hidden

    def head_params(self) -> int:
        """Final norm plus the output projection (0 extra when tied)."""
        return self.norm_params() + (0 if self.tied else self.vocab * self.hidden)

    def total_params(self) -> int:
        return self.layers * self.layer_params() + self.embedding_params() + self.head_params()

    def active_params(self) -> int:
        """Parameters a token passes through (MoE: top_k experts)."""
        dense = self.total_params() - self.layers * self.experts * self.expert_params()
        return dense + self.layers * self.top_k * self.expert_params()

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
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


def from_hf_config(path: str | Path) -> ModelSpec:
    """Read a Hugging Face ``config.json`` (Llama / Mistral / Mixtral / Qwen2 / GPT-2 keys)."""
    p = Path(path)
    try:
        cfg = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"--hf-config: file {str(p)!r} does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"--hf-config: {str(p)!r} is not a readable JSON file: {exc}") from None
    if not isinstance(cfg, dict):
        raise UsageError(f"--hf-config: {str(p)!r} does not hold a JSON object")

    def need(*keys: str) -> Any:
        for k in keys:
            if k in cfg:
                return cfg[k]
        raise UsageError(f"--hf-config: {str(p)!r} lacks {' / '.join(keys)}")

    try:
        mtype = str(cfg.get("model_type", "llama"))
        if mtype in ("gpt2",):
            h = int(need("n_embd", "hidden_size"))
            return ModelSpec(p.stem if p.stem != "config" else mtype, int(need("n_layer", "num_hidden_layers")), h,
                             int(need("n_head", "num_attention_heads")), int(need("vocab_size")),
                             int(cfg.get("n_inner") or 4 * h), gated=False, tied=bool(cfg.get("tie_word_embeddings", True)),
                             bias=True, norm="layer", positions=int(cfg.get("n_positions", 1024)), dropout=True)
        heads = int(need("num_attention_heads"))
        experts = int(cfg.get("num_local_experts") or cfg.get("num_experts") or 1)
        return ModelSpec(
            name=str(cfg.get("_name_or_path") or mtype),
            layers=int(need("num_hidden_layers")), hidden=int(need("hidden_size")), heads=heads,
            vocab=int(need("vocab_size")),
            ffn=int(cfg.get("moe_intermediate_size") if experts > 1 and cfg.get("moe_intermediate_size") else need("intermediate_size")),
            kv_heads=int(cfg.get("num_key_value_heads") or heads),
            tied=bool(cfg.get("tie_word_embeddings", False)),
            experts=experts, top_k=int(cfg.get("num_experts_per_tok") or 1),
            bias=bool(cfg.get("attention_bias", False)),
        )
    except (TypeError, ValueError) as exc:
        raise UsageError(f"--hf-config: {str(p)!r} has a non-numeric dimension: {exc}") from None
