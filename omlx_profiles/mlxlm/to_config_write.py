"""``to_config``'s writer: a resolved profile -> the config keys of its mlx-lm module, as the module
file's ``to_config:`` block spells them (``schema.module_to_config``).

Why one writer: the registry families' builders differed only in key names, constants and which layout
spelling the module honours; those are data now, so this module names no model type. The generic base
(layers, hidden, intermediate, vocab, heads, KV heads, eps, rope theta, tie, max positions) is written
for every module; ``shrink`` cuts every width the cache never sees (see ``to_config``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..registry.profile import Profile
from ..schema.module_to_config import ToConfig
from .to_config_profile import SynthError, _attn, _window, layer_roles, solve_state


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


# --------------------------------------------------------------------------------------------------
# the writer
# --------------------------------------------------------------------------------------------------


def write_config(tc: ToConfig, s: _Sizes, model_type: str, recipe_arrays, text_of) -> dict:
    """The config of ``model_type`` for ``s.profile``; ``recipe_arrays``: the state arrays of the module's
    recipe (``state: recipe``); ``text_of(module)``: another module's ``to_config`` (a wrapper's text)."""
    w = tc.wrapper
    if w is None:
        return _text_config(tc, s, model_type, recipe_arrays)
    roles = layer_roles(s.profile)
    for role, why in w.refuse.items():
        if role in roles:
            raise SynthError(f"{s.profile.name}: {why}")
    if w.text_module is not None:
        inner_tc, inner_arrays = text_of(w.text_module)
        inner = _text_config(inner_tc, s, w.text_module, inner_arrays)
    else:
        inner = _text_config(tc, s, w.text_model_type, recipe_arrays)
    return {"model_type": model_type, **{k: inner[k] for k in w.top}, w.key: inner}


def _text_config(tc: ToConfig, s: _Sizes, model_type: str, recipe_arrays) -> dict:
    p = s.profile
    lay = tc.layout
    roles = layer_roles(p)
    _only(p, roles, set(lay.roles))
    if lay.period is not None and lay.special not in roles:
        raise SynthError(f"{p.name}: mlx-lm's {p.mlx_model_type} makes layer i {lay.special} iff i % {lay.period} == "
                         f"{lay.period} - 1; the profile declares no {lay.special} layer")
    mla = tc.mla
    if mla is not None and mla.indexer is not None:
        if p.mla is None or p.mla.index_head_dim is None:
            raise SynthError(f"{p.name}: {model_type} needs mla.index_head_dim")
        if p.mla.q_lora_rank is None:
            raise SynthError(f"{p.name}: {model_type}'s indexer reads the q_lora projection; mla.q_lora_rank is required")
    a = None if mla is not None else _attn(p, same_kv_width=tc.same_kv_width)
    if tc.heads_from_hidden and a is None:
        raise SynthError(f"{p.name}: {model_type} needs at least one attention layer (its query heads are "
                         "hidden_size / head width)")
    period = _period(p, roles, lay.special) if lay.period is not None else None
    state: dict[str, Any] = {}
    if tc.state is not None and "state" in roles:
        state = solve_state(p, recipe_arrays if tc.state == "recipe" else tc.arrays, tc.divisible)
    elif tc.state is not None:
        state = dict(tc.state_default)

    # heads and hidden size
    hidden = None
    if mla is not None:
        heads = s.need("num_heads") if mla.query_heads == "cached" or not s.shrink else 2
        if p.mla is None:
            raise SynthError(f"{p.name}: mlx-lm's {model_type} needs the 'mla' ranks")
        n_kv = heads
    elif tc.heads_from_hidden:
        if "hidden_size" in state:
            hidden = state["hidden_size"]
        else:
            hidden = s.q_heads(a.n_kv) * a.k if s.shrink else s.need("hidden_size")
        if hidden % a.k:
            raise SynthError(f"{p.name}: {model_type} attention heads are hidden_size / num_attention_heads; "
                             f"{hidden} is not a multiple of {a.k}")
        heads, n_kv = hidden // a.k, a.n_kv
        if heads % n_kv:
            raise SynthError(f"{p.name}: {heads} query heads (hidden {hidden} / head_dim {a.k}) not a multiple of "
                             f"{n_kv} KV heads")
    else:
        heads = s.q_heads(a.n_kv) if a else 1
        n_kv = a.n_kv if a else 1
        if tc.derived_head_dim:
            if s.shrink:
                hidden = heads * a.k
            else:
                hidden = s.need("hidden_size")
                if hidden % heads or hidden // heads != a.k:
                    raise SynthError(
                        f"{p.name}: mlx-lm's {model_type} caches heads of hidden_size / num_attention_heads = "
                        f"{hidden}/{heads}, but the profile says head_dim {a.k}"
                    )
    moe = _moe_keys(tc, s) if tc.moe is not None else {}

    cfg = _base(s, model_type, hidden=hidden, heads=heads, n_kv=n_kv)
    if a is not None and tc.head_dim is not None:
        cfg[tc.head_dim] = a.k
    for k in tc.floats:
        cfg[k] = float(a.k)
    if lay.layer_types is not None and (lay.layer_types_always or "sliding" in roles):
        cfg["layer_types"] = [lay.layer_types[r] for r in roles]
    if lay.window is not None and ("sliding" in roles or lay.window_default is not None):
        cfg[lay.window] = _window(p) or lay.window_default
    if period is not None:
        cfg[lay.period] = period
    if lay.chars is not None:
        cfg[lay.chars_key] = "".join(lay.chars[r] for r in roles)
    cfg.update(state)
    cfg.update(moe)
    if mla is not None:
        cfg.update(_mla_keys(mla, s))
    cfg.update(tc.set)
    for k, src in tc.copies.items():
        cfg[k] = cfg[src]
    return cfg


def _moe_keys(tc: ToConfig, s: _Sizes) -> dict:
    m, p = tc.moe, s.profile
    if m.dense == "zero" and (s.dense or (m.optional and p.moe is None)):
        return {m.experts: 0, m.top_k: 0}
    e, k, w, sh = s.moe()
    out: dict[str, Any] = {m.experts: e, m.top_k: k}
    if m.width is not None:
        out[m.width] = w
    if m.shared_width is not None:
        out[m.shared_width] = w if sh else 0
    if m.shared_count is not None:
        out[m.shared_count] = sh or None
    out.update(m.set)
    if m.dense == "layer_list":
        out[m.dense_key] = list(range(p.num_layers)) if s.dense else []
    elif m.dense == "layer_count":
        out[m.dense_key] = p.num_layers if s.dense else 0
    return out


def _mla_keys(mla, s: _Sizes) -> dict:
    r = s.profile.mla
    q_lora = r.q_lora_rank
    if q_lora is not None and s.shrink:
        q_lora = min(q_lora, s.hidden_small)
    out = {"kv_lora_rank": r.kv_lora_rank, "qk_rope_head_dim": r.qk_rope_head_dim,
           "qk_nope_head_dim": r.qk_nope_head_dim, "v_head_dim": r.v_head_dim, "q_lora_rank": q_lora}
    if mla.indexer is not None:
        heads = r.index_n_heads or mla.indexer["heads_default"]
        out.update(index_head_dim=r.index_head_dim,
                   index_n_heads=min(heads, mla.indexer["heads_small"]) if s.shrink else heads,
                   index_topk=r.index_topk or mla.indexer["topk_default"])
    return out
