"""``to_config``'s sizes (what a shrunk config keeps) and the builders of the attention-only families
(full / sliding layers): profile -> the mlx-lm config keys of that module."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..registry.profile import Profile
from .to_config_profile import SynthError, _attn, _window, layer_roles


# --------------------------------------------------------------------------------------------------
# sizes
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Sizes:
    profile: Profile
    shrink: bool
    dense: bool
    hidden_small: int = 64
    inter_small: int = 64
    vocab_small: int = 512
    experts_small: int = 4
    topk_small: int = 2

    def need(self, field: str) -> Any:
        v = getattr(self.profile, field)
        if v is None:
            raise SynthError(f"{self.profile.name}: a full-size config needs '{field}', which the profile does not give")
        return v

    @property
    def hidden(self) -> int:
        return self.hidden_small if self.shrink else self.need("hidden_size")

    @property
    def inter(self) -> int:
        if self.shrink:
            return self.inter_small
        if self.profile.intermediate_size is not None:
            return self.profile.intermediate_size
        moe = self.profile.moe
        if moe is not None and moe.moe_intermediate_size is not None:
            return moe.moe_intermediate_size
        return self.need("intermediate_size")

    @property
    def vocab(self) -> int:
        return self.vocab_small if self.shrink else self.need("vocab_size")

    def q_heads(self, n_kv: int) -> int:
        """Query heads: the KV-head count when shrinking (GQA factor 1; the cache never sees it)."""
        return n_kv if self.shrink else self.need("num_heads")

    def moe(self) -> tuple[int, int, int, int]:
        """(experts, top-k, expert width, shared experts)."""
        moe = self.profile.moe
        if moe is None:
            raise SynthError(f"{self.profile.name}: mlx-lm's {self.profile.mlx_model_type} needs 'moe' (num_experts, experts_per_token)")
        if self.shrink:
            e = min(moe.num_experts, self.experts_small)
            return e, min(moe.experts_per_token, self.topk_small, e), self.inter_small, min(moe.shared_experts, 1)
        width = moe.moe_intermediate_size or self.need("intermediate_size")
        return moe.num_experts, moe.experts_per_token, width, moe.shared_experts


def _base(s: _Sizes, model_type: str, *, hidden: int | None = None, heads: int | None = None, n_kv: int | None = None) -> dict:
    p = s.profile
    cfg: dict[str, Any] = {
        "model_type": model_type,
        "num_hidden_layers": p.num_layers,
        "hidden_size": s.hidden if hidden is None else hidden,
        "intermediate_size": s.inter,
        "vocab_size": s.vocab,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "tie_word_embeddings": bool(p.tie_word_embeddings),
        "max_position_embeddings": p.max_context or 131072,
    }
    if heads is not None:
        cfg["num_attention_heads"] = heads
    if n_kv is not None:
        cfg["num_key_value_heads"] = n_kv
    return cfg


def _only(profile: Profile, roles: list[str], allowed: set[str]) -> None:
    bad = sorted(set(roles) - allowed)
    if bad:
        raise SynthError(f"{profile.name}: mlx-lm's {profile.mlx_model_type} has no layer of kind {bad} (it builds {sorted(allowed)})")


def _sliding_keys(profile: Profile, roles: list[str], cfg: dict) -> None:
    """HF's spelling of a sliding layout. Families that ignore it build full caches - the live check then fails."""
    if "sliding" in roles:
        cfg["layer_types"] = ["sliding_attention" if r == "sliding" else "full_attention" for r in roles]
        cfg["sliding_window"] = _window(profile)


# --------------------------------------------------------------------------------------------------
# per-family builders
# --------------------------------------------------------------------------------------------------


def _llama_like(s: _Sizes, model_type: str) -> dict:
    p = s.profile
    roles = layer_roles(p)
    _only(p, roles, {"full", "sliding"})
    a = _attn(p)
    cfg = _base(s, model_type, heads=s.q_heads(a.n_kv), n_kv=a.n_kv)
    cfg["head_dim"] = a.k
    _sliding_keys(p, roles, cfg)
    if model_type == "ministral3":
        cfg["rope_parameters"] = {
            "rope_type": "default", "rope_theta": 1_000_000.0,
            "llama_4_scaling_beta": 0.1, "original_max_position_embeddings": 8192,
        }
    return cfg


def _llama(s: _Sizes) -> dict:
    return _llama_like(s, "llama")


def _smollm3(s: _Sizes) -> dict:
    return _llama_like(s, "smollm3")


def _ministral3(s: _Sizes) -> dict:
    return _llama_like(s, "ministral3")


def _mistral3(s: _Sizes) -> dict:
    roles = layer_roles(s.profile)
    if "latent" in roles:
        raise SynthError(f"{s.profile.name}: a mistral3 wrapper around mistral4 (latent MLA) is not synthesized yet")
    inner = _llama_like(s, "ministral3")
    return {"model_type": "mistral3", "text_config": inner}


def _derived_hd(s: _Sizes, model_type: str) -> dict:
    """qwen2 / phi3 / mixtral: head_dim = hidden / heads, so the hidden size is fixed by the heads."""
    p = s.profile
    roles = layer_roles(p)
    _only(p, roles, {"full", "sliding"})
    a = _attn(p)
    heads = s.q_heads(a.n_kv)
    if s.shrink:
        hidden = heads * a.k
    else:
        hidden = s.need("hidden_size")
        if hidden % heads or hidden // heads != a.k:
            raise SynthError(
                f"{p.name}: mlx-lm's {model_type} caches heads of hidden_size / num_attention_heads = "
                f"{hidden}/{heads}, but the profile says head_dim {a.k}"
            )
    cfg = _base(s, model_type, hidden=hidden, heads=heads, n_kv=a.n_kv)
    _sliding_keys(p, roles, cfg)
    if model_type == "mixtral":
        e, k, _w, _sh = s.moe()
        cfg.update(num_local_experts=e, num_experts_per_tok=k)
    return cfg


def _qwen2(s):
    return _derived_hd(s, "qwen2")


def _phi3(s):
    return _derived_hd(s, "phi3")


def _mixtral(s):
    return _derived_hd(s, "mixtral")


def _qwen3(s: _Sizes) -> dict:
    p = s.profile
    roles = layer_roles(p)
    _only(p, roles, {"full", "sliding"})
    a = _attn(p)
    cfg = _base(s, "qwen3", heads=s.q_heads(a.n_kv), n_kv=a.n_kv)
    cfg["head_dim"] = a.k
    _sliding_keys(p, roles, cfg)
    return cfg


def _qwen3_moe(s: _Sizes) -> dict:
    cfg = _qwen3(s)
    cfg["model_type"] = "qwen3_moe"
    e, k, w, _sh = s.moe()
    cfg.update(num_experts=e, num_experts_per_tok=k, moe_intermediate_size=w, decoder_sparse_step=1,
               norm_topk_prob=True, mlp_only_layers=list(range(s.profile.num_layers)) if s.dense else [])
    return cfg


def _gemma2(s: _Sizes) -> dict:
    p = s.profile
    roles = layer_roles(p)
    _only(p, roles, {"full", "sliding"})
    a = _attn(p)
    cfg = _base(s, "gemma2", heads=s.q_heads(a.n_kv), n_kv=a.n_kv)
    cfg.update(head_dim=a.k, query_pre_attn_scalar=float(a.k))
    _sliding_keys(p, roles, cfg)  # gemma2.py ignores these: a sliding profile fails the live check
    return cfg


def _period(p: Profile, roles: list[str], special: str) -> int:
    """The k of mlx-lm's rule 'layer i is ``special`` iff i % k == k - 1' (gemma3's sliding_window_pattern,
    qwen3_next's (i + 1) % full_attention_interval == 0): the first ``special`` layer fixes k, every
    other layer must then agree, else the profile describes a layout this family cannot build."""
    first = next(i for i, r in enumerate(roles) if r == special)
    k = first + 1
    for i, r in enumerate(roles):
        if ((i % k) == k - 1) != (r == special):
            raise SynthError(
                f"{p.name}: mlx-lm's {p.mlx_model_type} makes layer i {special} iff i % {k} == {k - 1}; "
                f"the profile's layer {i} is {r} (layout {' '.join(roles)})"
            )
    return k


def _gemma3_text_cfg(s: _Sizes) -> dict:
    p = s.profile
    roles = layer_roles(p)
    _only(p, roles, {"full", "sliding"})
    if "full" not in roles:
        raise SynthError(f"{p.name}: gemma3 has a global layer every sliding_window_pattern layers; none is declared")
    a = _attn(p)
    cfg = _base(s, "gemma3_text", heads=s.q_heads(a.n_kv), n_kv=a.n_kv)
    cfg.update(head_dim=a.k, query_pre_attn_scalar=float(a.k), sliding_window_pattern=_period(p, roles, "full"),
               sliding_window=_window(p) or 4096)
    return cfg


def _gemma3_text(s: _Sizes) -> dict:
    return _gemma3_text_cfg(s)


def _gemma3(s: _Sizes) -> dict:
    inner = _gemma3_text_cfg(s)
    # the wrapper overwrites text_config.vocab_size with its own (default 262208), so give it ours
    return {"model_type": "gemma3", "vocab_size": inner["vocab_size"], "text_config": inner}


def _gpt_oss(s: _Sizes) -> dict:
    p = s.profile
    roles = layer_roles(p)
    _only(p, roles, {"full", "sliding"})
    a = _attn(p)
    e, k, _w, _sh = s.moe()
    cfg = _base(s, "gpt_oss", heads=s.q_heads(a.n_kv), n_kv=a.n_kv)
    cfg.update(
        head_dim=a.k,
        layer_types=["sliding_attention" if r == "sliding" else "full_attention" for r in roles],
        sliding_window=_window(p) or 128,
        num_local_experts=e,
        num_experts_per_tok=k,
    )
    return cfg
