"""``to_config``'s builders of the hybrid (attention + state), MLA and state families: profile -> the
mlx-lm config keys of that module, the state dims solved back from the declared shapes."""
from __future__ import annotations

from ..registry.profile import Profile
from .to_config_attention import _Sizes, _base, _only, _period
from .to_config_profile import SynthError, _attn, _conv_dims, _deltanet_dims, _mamba2_dims, layer_roles


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
