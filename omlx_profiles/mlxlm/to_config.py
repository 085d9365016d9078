"""A profile, turned back into an mlx-lm config: the live model that checks the profile's own numbers.

Why: resident KV must equal ``sum(c.nbytes for c in cache)`` of the live mlx-lm model. If the live
model were built from the checkpoint's config.json, a wrong number in the YAML would go unnoticed
whenever the estimator's arithmetic happened to be right. So ``config_for_profile`` writes the config
from the *resolved profile* alone - its layer pattern, KV heads, head dims, windows, MLA ranks and
state-tensor shapes - in the keys mlx-lm's module for ``profile.mlx_model_type`` reads. mlx-lm then
decides which cache each layer gets; the estimate from the same profile must match it byte for byte.
A declaration mlx-lm would not honour (a sliding layer in a family that ignores windows, a state
shape that no set of config dims produces) therefore shows up as a mismatch or a ``SynthError``,
never as a silently "verified" profile.

What is kept (the cache dims, taken from the profile's cache entries):

* attention layers: ``num_key_value_heads``, key and value head widths, the window of sliding layers,
  the layer pattern (``layer_types``, ``sliding_window_pattern``, ``full_attention_interval``,
  ``hybrid_override_pattern``);
* MLA: ``kv_lora_rank``, ``qk_rope_head_dim``, ``qk_nope_head_dim``, ``v_head_dim`` and the DSA
  indexer's ``index_head_dim`` (from ``profile.mla``); DeepSeek-V2's expanded cache also keeps
  ``num_attention_heads`` (it *is* the cached head count);
* state caches: the config dims are solved back from the declared tensor shapes (see
  ``_deltanet_dims``, ``_mamba2_dims``, ``_conv_dims``), so a shape that does not factor raises.

What is shrunk (``shrink=True``): hidden size (64) wherever the head width does not depend on it,
every MLP / expert width (64), the expert count (<= 4) and top-k (<= 2), the vocabulary (512), the
query-head count (down to the KV-head count; the cache never depends on it) - except where mlx-lm
derives the head width from them: qwen2 / phi3 / mixtral (``head_dim = hidden / heads``, so
``hidden = heads * head_dim``) and lfm2 (the conv state is ``hidden_size`` wide).

``dense=True`` additionally replaces MoE blocks by dense MLPs where the family has a switch for it
(``mlp_only_layers``, ``first_k_dense_replace``, ``num_experts = 0``). The cache does not change, but
MLX's CPU ``gather_mm`` only runs in float32, so this is how a CPU run of an MoE family stays in bf16
(and shows that a DeltaNet state is float32 *while* the conv window is bf16).

``cut_profile`` / ``layers=`` make a shorter model for speed: one period of a pattern, or for explicit
``types`` the first layer of each kind, in order. The estimate must then be computed on the same cut
profile (``cut_profile``), whose every layer keeps its kind.

Only ``omlx_profiles.live`` may import mlx; this module itself needs nothing but the profile.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from ..registry.profile import CacheEntry, Profile

__all__ = ["SynthError", "config_for_profile", "cut_profile", "layer_roles", "SYNTH_FAMILIES", "can_be_dense"]


class SynthError(ValueError):
    """The profile declares a layout that this mlx-lm family cannot be configured to build."""


# --------------------------------------------------------------------------------------------------
# cutting
# --------------------------------------------------------------------------------------------------


def cut_profile(profile: Profile, layers: int | str | None) -> Profile:
    """A shorter copy of ``profile`` whose layers keep their kinds (``None``: unchanged).

    ``"period"``: for a ``pattern`` layout, one period (the first ``len(pattern)`` layers: every kind,
    and mlx-lm's ``i % p`` / ``(i + 1) % k`` rules with the declared period); for explicit ``types``,
    as ``"kinds"``. ``"kinds"``: the first layer of each kind, in stack order (nemotron_h's 118 layers
    become ``M-*``; qwen3-next's period of 4 becomes linear + full, i.e. an interval of 2: the per-layer
    caches are the same, the model is half as deep). An int ``n``: the first ``n`` layers.
    """
    if layers is None:
        return profile
    names = profile.layer_names
    lay = profile.variant.layers if profile.variant is not None else None
    if layers == "period" and lay is not None and lay.pattern is not None:
        idx = list(range(min(len(lay.sequence()), len(names))))
    elif layers in ("period", "kinds"):
        first: dict[str, int] = {}
        for i, n in enumerate(names):
            first.setdefault(n, i)
        idx = sorted(first.values())
    elif isinstance(layers, int) and not isinstance(layers, bool):
        if not 1 <= layers <= len(names):
            raise SynthError(f"{profile.name}: layers={layers} outside 1..{len(names)}")
        idx = list(range(layers))
    else:
        raise SynthError(f"layers must be None, 'period', 'kinds' or an int, got {layers!r}")
    sub = tuple(names[i] for i in idx)
    if len(sub) == len(names):
        return profile
    used = set(sub)
    return dataclasses.replace(
        profile,
        name=f"{profile.name}@{len(sub)}L",
        num_layers=len(sub),
        layer_names=sub,
        layer_types={k: v for k, v in profile.layer_types.items() if k in used},
    )


# --------------------------------------------------------------------------------------------------
# reading the profile
# --------------------------------------------------------------------------------------------------

_ROLE_OF = {
    ("full",): "full",
    ("sliding",): "sliding",
    ("chunked",): "chunked",
    ("latent",): "latent",
    ("latent", "indexer"): "latent+indexer",
    ("state",): "state",
    ("none",): "none",
}


def layer_roles(profile: Profile) -> list[str]:
    """The cache role of every layer: full, sliding, chunked, latent, latent+indexer, state or none."""
    out = []
    for name in profile.layer_names:
        kinds = tuple(e.kind for e in profile.layer_types[name].entries)
        role = _ROLE_OF.get(kinds)
        if role is None:
            raise SynthError(f"{profile.name}: layer kind {name!r} holds caches {kinds}, which no mlx-lm family builds")
        out.append(role)
    return out


def _entries(profile: Profile, kinds: tuple[str, ...]) -> list[CacheEntry]:
    seen = []
    for name in dict.fromkeys(profile.layer_names):
        for e in profile.layer_types[name].entries:
            if e.kind in kinds:
                seen.append(e)
    return seen


@dataclass(frozen=True)
class _Attn:
    n_kv: int
    k: int
    v: int


def _attn(profile: Profile, *, same_kv_width: bool = True) -> _Attn | None:
    """The one (KV heads, key width, value width) every attention layer shares (mlx-lm has one per model)."""
    dims = {(e.n_kv, e.k_width, e.v_width) for e in _entries(profile, ("full", "sliding", "chunked"))}
    if not dims:
        return None
    if len(dims) > 1:
        raise SynthError(
            f"{profile.name}: attention layers declare different (kv heads, key width, value width) {sorted(dims)}; "
            f"mlx-lm's {profile.mlx_model_type} has one set for every layer"
        )
    n_kv, k, v = dims.pop()
    if same_kv_width and k != v:
        raise SynthError(
            f"{profile.name}: key width {k} != value width {v}, but mlx-lm's {profile.mlx_model_type} caches equal widths"
        )
    return _Attn(n_kv, k, v)


def _window(profile: Profile) -> int | None:
    ws = {e.window for e in _entries(profile, ("sliding",))}
    if len(ws) > 1:
        raise SynthError(f"{profile.name}: sliding layers declare different windows {sorted(ws)}; mlx-lm has one sliding_window")
    return ws.pop() if ws else None


def _shapes(profile: Profile) -> list[tuple[int, ...]]:
    """Declared state-tensor shapes (the CacheEntry keeps only element counts; the variant keeps shapes)."""
    v = profile.variant
    if v is None:
        raise SynthError(f"{profile.name}: a state layout needs the profile's variant (tensor shapes)")
    shapes: set[tuple[tuple[int, ...], ...]] = set()
    for name in dict.fromkeys(profile.layer_names):
        spec = v.layers.kinds[name]
        for s in spec if isinstance(spec, list) else [spec]:
            if s.kind == "state":
                shapes.add(tuple(tuple(t.shape) for t in s.tensors))
    if len(shapes) != 1:
        raise SynthError(f"{profile.name}: expected one state layout, found {len(shapes)}")
    return [tuple(x) for x in shapes.pop()]


def _split_state(profile: Profile, n_tensors: int) -> tuple[tuple[int, ...], ...]:
    shapes = _shapes(profile)
    if len(shapes) != n_tensors:
        raise SynthError(
            f"{profile.name}: mlx-lm's {profile.mlx_model_type} state holds {n_tensors} tensor(s), the profile declares {len(shapes)}"
        )
    return tuple(shapes)


def _deltanet_dims(profile: Profile) -> dict:
    """qwen3_next / qwen3_5: conv (K-1, 2*nk*dk + nv*dv), ssm (nv, dv, dk) -> linear_* config dims."""
    conv, ssm = _split_state(profile, 2)
    if len(conv) != 2 or len(ssm) != 3:
        raise SynthError(f"{profile.name}: DeltaNet state must be conv (K-1, C) and ssm (nv, dv, dk), got {conv} and {ssm}")
    nv, dv, dk = ssm
    rest = conv[1] - nv * dv
    if rest <= 0 or rest % (2 * dk):
        raise SynthError(f"{profile.name}: conv width {conv[1]} is not 2*nk*{dk} + {nv}*{dv} for any whole nk")
    nk = rest // (2 * dk)
    if nv % nk:
        raise SynthError(f"{profile.name}: linear value heads {nv} not divisible by key heads {nk} (mlx-lm raises)")
    return {
        "linear_num_key_heads": nk,
        "linear_num_value_heads": nv,
        "linear_key_head_dim": dk,
        "linear_value_head_dim": dv,
        "linear_conv_kernel_dim": conv[0] + 1,
    }


def _mamba2_dims(profile: Profile) -> dict:
    """nemotron_h: conv (K-1, H*hd + 2*G*N), ssm (H, hd, N) -> mamba_* config dims."""
    conv, ssm = _split_state(profile, 2)
    if len(conv) != 2 or len(ssm) != 3:
        raise SynthError(f"{profile.name}: Mamba-2 state must be conv (K-1, C) and ssm (H, hd, N), got {conv} and {ssm}")
    h, hd, n = ssm
    rest = conv[1] - h * hd
    if rest <= 0 or rest % (2 * n):
        raise SynthError(f"{profile.name}: conv width {conv[1]} is not {h}*{hd} + 2*G*{n} for any whole G")
    g = rest // (2 * n)
    if h % g:
        raise SynthError(f"{profile.name}: mamba heads {h} not divisible by n_groups {g}")
    return {"mamba_num_heads": h, "mamba_head_dim": hd, "ssm_state_size": n, "n_groups": g, "conv_kernel": conv[0] + 1}


def _conv_dims(profile: Profile) -> dict:
    """lfm2: one tensor (conv_L_cache - 1, hidden_size)."""
    (conv,) = _split_state(profile, 1)
    if len(conv) != 2:
        raise SynthError(f"{profile.name}: LFM2 conv state must be (conv_L_cache - 1, hidden), got {conv}")
    return {"conv_L_cache": conv[0] + 1, "hidden_size": conv[1]}


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


def _hybrid_interval(p: Profile, roles: list[str]) -> int:
    """qwen3_next / qwen3_5: layer i is full iff (i + 1) % full_attention_interval == 0."""
    _only(p, roles, {"full", "state"})
    if "full" not in roles:
        raise SynthError(f"{p.name}: {p.mlx_model_type} needs at least one full-attention layer")
    return _period(p, roles, "full")


def _qwen3_next(s: _Sizes) -> dict:
    p = s.profile
    roles = layer_roles(p)
    interval = _hybrid_interval(p, roles)
    a = _attn(p)
    e, k, w, sh = s.moe()
    cfg = _base(s, "qwen3_next", heads=s.q_heads(a.n_kv), n_kv=a.n_kv)
    cfg.update(_deltanet_dims(p))
    cfg.update(
        head_dim=a.k,
        full_attention_interval=interval,
        num_experts=e,
        num_experts_per_tok=k,
        moe_intermediate_size=w,
        shared_expert_intermediate_size=w if sh else 0,
        decoder_sparse_step=1,
        mlp_only_layers=list(range(p.num_layers)) if s.dense else [],
        norm_topk_prob=True,
        partial_rotary_factor=0.25,
    )
    return cfg


def _qwen3_5(s: _Sizes, model_type: str) -> dict:
    p = s.profile
    roles = layer_roles(p)
    interval = _hybrid_interval(p, roles)
    a = _attn(p)
    text = _base(s, model_type + "_text", heads=s.q_heads(a.n_kv), n_kv=a.n_kv)
    text.update(_deltanet_dims(p))
    text.update(head_dim=a.k, full_attention_interval=interval)
    if p.moe is not None and not s.dense:
        e, k, w, sh = s.moe()
        text.update(num_experts=e, num_experts_per_tok=k, moe_intermediate_size=w,
                    shared_expert_intermediate_size=w if sh else 0, decoder_sparse_step=1, norm_topk_prob=True)
    else:
        text.update(num_experts=0, num_experts_per_tok=0)
    return {"model_type": model_type, "text_config": text}


def _mla_common(s: _Sizes, model_type: str, heads: int) -> dict:
    p = s.profile
    mla = p.mla
    if mla is None:
        raise SynthError(f"{p.name}: mlx-lm's {model_type} needs the 'mla' ranks")
    e, k, w, sh = s.moe()
    cfg = _base(s, model_type, heads=heads, n_kv=heads)
    q_lora = mla.q_lora_rank
    if q_lora is not None and s.shrink:
        q_lora = min(q_lora, s.hidden_small)
    cfg.update(
        kv_lora_rank=mla.kv_lora_rank,
        qk_rope_head_dim=mla.qk_rope_head_dim,
        qk_nope_head_dim=mla.qk_nope_head_dim,
        v_head_dim=mla.v_head_dim,
        q_lora_rank=q_lora,
        n_routed_experts=e,
        num_experts_per_tok=k,
        moe_intermediate_size=w,
        n_shared_experts=sh or None,
        moe_layer_freq=1,
        first_k_dense_replace=p.num_layers if s.dense else 0,
        n_group=1,
        topk_group=1,
        routed_scaling_factor=1.0,
    )
    return cfg


def _deepseek_v2(s: _Sizes) -> dict:
    """Expanded MLA: the cache holds num_attention_heads heads of (nope + rope) keys and v_head_dim values."""
    p = s.profile
    roles = layer_roles(p)
    _only(p, roles, {"full"})
    cfg = _mla_common(s, "deepseek_v2", s.need("num_heads"))
    # deepseek_v2.py reads rope_scaling unconditionally (YaRN); factor 1 and mscale 0 leave rope plain
    cfg.update(topk_method="greedy", scoring_func="softmax",
               rope_scaling={"type": "yarn", "factor": 1.0, "original_max_position_embeddings": 4096,
                             "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 0})
    return cfg


def _deepseek_v3(s: _Sizes) -> dict:
    p = s.profile
    roles = layer_roles(p)
    _only(p, roles, {"latent"})
    heads = 2 if s.shrink else s.need("num_heads")  # latent cache: one head whatever the query heads
    cfg = _mla_common(s, "deepseek_v3", heads)
    cfg.update(topk_method="noaux_tc", scoring_func="sigmoid", norm_topk_prob=True)
    return cfg


def _deepseek_v32(s: _Sizes) -> dict:
    p = s.profile
    roles = layer_roles(p)
    _only(p, roles, {"latent+indexer"})
    mla = p.mla
    if mla is None or mla.index_head_dim is None:
        raise SynthError(f"{p.name}: deepseek_v32 needs mla.index_head_dim")
    if mla.q_lora_rank is None:
        raise SynthError(f"{p.name}: deepseek_v32's indexer reads the q_lora projection; mla.q_lora_rank is required")
    heads = 2 if s.shrink else s.need("num_heads")
    cfg = _mla_common(s, "deepseek_v32", heads)
    cfg.update(
        topk_method="noaux_tc", scoring_func="sigmoid", norm_topk_prob=True,
        index_head_dim=mla.index_head_dim,
        index_n_heads=min(mla.index_n_heads or 64, 4) if s.shrink else (mla.index_n_heads or 64),
        index_topk=mla.index_topk or 2048,
    )
    return cfg


_NEMOTRON_CHAR = {"state": "M", "full": "*", "none": "-"}


def _nemotron_h(s: _Sizes) -> dict:
    p = s.profile
    roles = layer_roles(p)
    _only(p, roles, {"state", "full", "none"})
    a = _attn(p)
    cfg = _base(s, "nemotron_h", heads=s.q_heads(a.n_kv) if a else 1, n_kv=a.n_kv if a else 1)
    if a:
        cfg["head_dim"] = a.k
    if "state" in roles:
        cfg.update(_mamba2_dims(p))
    else:
        cfg.update(mamba_num_heads=2, mamba_head_dim=8, ssm_state_size=8, n_groups=1, conv_kernel=4)
    cfg.update(
        hybrid_override_pattern="".join(_NEMOTRON_CHAR[r] for r in roles),
        attention_bias=False, mamba_proj_bias=False, mlp_bias=False, use_bias=False, use_conv_bias=True,
        layer_norm_epsilon=1e-5,
    )
    return cfg


def _lfm2(s: _Sizes) -> dict:
    """lfm2: the conv state is (conv_L_cache - 1, hidden_size) and attention heads are hidden / num_heads wide,
    so hidden_size comes from the state shape and the query-head count from hidden / head_dim."""
    p = s.profile
    roles = layer_roles(p)
    _only(p, roles, {"state", "full"})
    a = _attn(p)
    if a is None:
        raise SynthError(f"{p.name}: lfm2 needs at least one attention layer (its model indexes the first one)")
    if "state" in roles:
        conv = _conv_dims(p)
        l_cache, hidden = conv["conv_L_cache"], conv["hidden_size"]
    else:
        l_cache = 3
        hidden = s.q_heads(a.n_kv) * a.k if s.shrink else s.need("hidden_size")
    if hidden % a.k:
        raise SynthError(f"{p.name}: lfm2 attention heads are hidden_size / num_attention_heads; {hidden} is not a multiple of {a.k}")
    heads = hidden // a.k
    if heads % a.n_kv:
        raise SynthError(f"{p.name}: {heads} query heads (hidden {hidden} / head_dim {a.k}) not a multiple of {a.n_kv} KV heads")
    cfg = _base(s, "lfm2", hidden=hidden, heads=heads, n_kv=a.n_kv)
    cfg.update(
        conv_L_cache=l_cache,
        layer_types=["conv" if r == "state" else "full_attention" for r in roles],
        norm_eps=1e-5, conv_bias=False, block_dim=hidden, block_ff_dim=s.inter, block_multiple_of=256,
        block_ffn_dim_multiplier=1.0, block_auto_adjust_ff_dim=False,
    )
    return cfg


SYNTH_FAMILIES: dict[str, Callable[[_Sizes], dict]] = {
    "llama": _llama,
    "smollm3": _smollm3,
    "ministral3": _ministral3,
    "mistral3": _mistral3,
    "qwen2": _qwen2,
    "phi3": _phi3,
    "mixtral": _mixtral,
    "qwen3": _qwen3,
    "qwen3_moe": _qwen3_moe,
    "gemma2": _gemma2,
    "gemma3_text": _gemma3_text,
    "gemma3": _gemma3,
    "gpt_oss": _gpt_oss,
    "qwen3_next": _qwen3_next,
    "qwen3_5": lambda s: _qwen3_5(s, "qwen3_5"),
    "qwen3_5_moe": lambda s: _qwen3_5(s, "qwen3_5_moe"),
    "deepseek_v2": _deepseek_v2,
    "deepseek_v3": _deepseek_v3,
    "deepseek_v32": _deepseek_v32,
    "nemotron_h": _nemotron_h,
    "lfm2": _lfm2,
}

#: families whose MoE blocks can be switched off by a config key (``dense=True``).
_DENSE_SWITCH = {"qwen3_moe", "qwen3_next", "qwen3_5_moe", "deepseek_v2", "deepseek_v3", "deepseek_v32"}


def can_be_dense(profile: Profile) -> bool:
    """True when the model is dense already or ``dense=True`` can make it so (no gather_mm on the CPU)."""
    return profile.moe is None or profile.mlx_model_type in _DENSE_SWITCH


def config_for_profile(profile: Profile, *, shrink: bool = True, layers: int | str | None = None,
                       dense: bool = False) -> dict:
    """An mlx-lm config dict (``model_type = profile.mlx_model_type``) with the profile's cache layout.

    ``shrink``: cut every width that does not reach the cache (see the module doc); ``False`` keeps the
    profile's real sizes (for a lazy full-size build) and raises ``SynthError`` when one is missing.
    ``layers``: as ``cut_profile`` (compute the estimate on ``cut_profile(profile, layers)``).
    ``dense``: MoE blocks replaced by dense MLPs where the family has a switch (cache-neutral).
    """
    p = cut_profile(profile, layers)
    builder = SYNTH_FAMILIES.get(p.mlx_model_type)
    if builder is None:
        raise SynthError(
            f"{p.name}: no synth rule for mlx-lm model_type {p.mlx_model_type!r} (known: {sorted(SYNTH_FAMILIES)})"
        )
    return builder(_Sizes(p, shrink, dense))
