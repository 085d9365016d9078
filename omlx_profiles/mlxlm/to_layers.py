"""The readers an extraction rule is made of (mlx-lm 0.32.2): the ``Draft`` it fills, the ``Ctx`` it reads,
and the shared pieces every module recipe uses (query / KV heads, head width, layer count, MLA ranks, the
widths the peak and weights terms read).

Each piece reads the config *the way mlx-lm's args class does* (``Reader`` applies mlx-lm's defaults and
required fields). Which cache each layer gets is the module recipe's (``profiles/mlx_lm/<module>.yaml``,
interpreted by ``recipes.recipe_rule``): no module has a hand-written rule any more. Where mlx-lm ignores a
key a reader would expect to matter, the recipe says so (``ignores``) and extraction writes a note: e.g.
``sliding_window`` without ``layer_types`` (Mistral 7B v0.3), gemma2 / phi3 / qwen2 sliding windows, a
config ``head_dim`` that qwen2 / phi3 / mixtral derive instead, nemotron_h's ``attention_head_dim``.

The output is a variant payload (what a profile YAML variant holds), its provenance and notes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError, UnsupportedError
from .config import MAX_DIM, MAX_LAYERS, Reader, shown
from .model_types import ROPE_TYPES


@dataclass
class Draft:
    """What a rule produced: variant fields, where each came from, and what a reader should know."""

    fields: dict[str, Any] = field(default_factory=dict)
    prov: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    per_layer: list[tuple[str, Any]] = field(default_factory=list)
    layers_as_string: bool = False
    text_model_type: str | None = None

    def put(self, key: str, value: Any, where: str) -> None:
        if value is None:
            return
        self.fields[key] = value
        self.prov[key] = where


@dataclass
class Ctx:
    top: dict  # the whole config
    r: Reader  # the language model's (sub-)config, as mlx-lm's args class reads it
    d: Draft
    module: str  # mlx-lm module building the model
    model_type: str  # config model_type
    label: str


# --------------------------------------------------------------------------------------------------
# shared pieces
# --------------------------------------------------------------------------------------------------


def heads(c: Ctx) -> tuple[int, int]:
    r = c.r
    n_q = r.int("num_attention_heads")
    n_kv = r.int("num_key_value_heads", allow_none=True, required=not r.spec.kv_from_heads)
    where = r.where("num_key_value_heads")
    if n_kv is None:
        if not r.spec.kv_from_heads:
            raise InputError(f"{c.label}: {r.prefix}num_key_value_heads is null and mlx-lm's {r.spec.cls} "
                             "does not replace it")
        n_kv = n_q
        where = f"= num_attention_heads ({r.spec.cls}.__post_init__ fills a missing num_key_value_heads)"
    if n_q % n_kv:
        raise UnsupportedError(f"unsupported: model_type {shown(c.model_type)}: num_attention_heads {n_q} is not a "
                               f"multiple of num_key_value_heads {n_kv} (mx.fast.scaled_dot_product_attention "
                               "needs whole query groups)")
    c.d.put("num_heads", n_q, r.where("num_attention_heads"))
    c.d.put("num_kv_heads", n_kv, where)
    return n_q, n_kv


def head_dim(c: Ctx, n_q: int, rule: str | None = None) -> int:
    r = c.r
    rule = rule or r.spec.head_dim
    if rule == "explicit":
        hd = r.int("head_dim")
        c.d.put("head_dim", hd, r.where("head_dim"))
        return hd
    hidden = r.int("hidden_size")
    derived = hidden // n_q
    if rule == "optional":
        hd = r.int("head_dim", allow_none=True, required=False)
        if hd is not None:
            c.d.put("head_dim", hd, r.where("head_dim"))
            return hd
        c.d.put("head_dim", derived, f"= hidden_size // num_attention_heads = {hidden} // {n_q} "
                                     f"({r.spec.cls} has no head_dim in this config)")
        return derived
    # derived: a config head_dim is ignored
    c.d.put("head_dim", derived, f"= hidden_size // num_attention_heads = {hidden} // {n_q} "
                                 f"(mlx-lm's {c.r.spec.cls.split('.')[0]}.py derives it)")
    given = r.data.get("head_dim")
    if isinstance(given, int) and not isinstance(given, bool) and given != derived:
        c.d.notes.append(f"{c.label}: {r.prefix}head_dim = {given} is ignored: mlx-lm's "
                         f"{r.spec.cls.split('.')[0]}.py uses hidden_size // num_attention_heads = {derived}")
    return derived


def _num_layers(c: Ctx) -> int:
    n = c.r.int("num_hidden_layers", maximum=MAX_LAYERS)
    c.d.put("num_layers", n, c.r.where("num_hidden_layers"))
    return n


def info_fields(c: Ctx) -> None:
    """Fields that do not shape the cache but that other estimates use (weights, SDPA, limits)."""
    r, d = c.r, c.d
    for key, fld in (("hidden_size", "hidden_size"), ("vocab_size", "vocab_size"),
                     ("max_position_embeddings", "max_context"), ("intermediate_size", "intermediate_size")):
        if fld == "max_context" and key not in r.data:
            continue  # mlx-lm's default (gemma3_text: 32768) says nothing about the checkpoint's context
        v = _soft_int(c, key) if fld not in d.fields else None
        if v is not None:
            d.put(fld, v, r.where(key))
    _rope_context(c)
    tie = r.raw("tie_word_embeddings", None)
    if isinstance(tie, bool):
        d.put("tie_word_embeddings", tie, r.where("tie_word_embeddings"))
    _moe(c)


MAX_ROPE_FACTOR = 4096  # real ones are 4-64; a factor of 10**400 reached float formatting (OverflowError)


def _rope_context(c: Ctx) -> None:
    """The context a YaRN ``rope_scaling`` gives: ``factor x original_max_position_embeddings`` when that
    is more than ``max_position_embeddings`` (Qwen3's model card: add ``{"rope_type": "yarn", "factor":
    4.0, "original_max_position_embeddings": 32768}`` for 131,072 tokens, leaving 40,960 as it was; vLLM
    derives its limit the same way). Dropping it reported every prompt past 40,960 as past the context.
    ``rope_scaling`` (``rope_parameters`` in newer transformers) is checked the way mlx-lm reads it:
    an object or null, a RoPE type mlx-lm builds, a finite ``factor`` >= 1 where the type uses one."""
    r, d = c.r, c.d
    key = "rope_scaling" if r.raw("rope_scaling", None) is not None else "rope_parameters"
    rs = r.raw(key, None)
    if rs is None:
        return
    where = f"{r.label}: {r.prefix}{key}"
    if not isinstance(rs, dict):
        raise InputError(f"{where} must be an object (or null), got {shown(rs)}")
    kind = rs.get("type") or rs.get("rope_type", "default")
    rope = ROPE_TYPES.get(kind) if isinstance(kind, str) else None
    if key == "rope_parameters" and kind == "default" and "factor" not in rs:
        return  # transformers 5 keeps rope_theta here too: no scaling
    if rope is None:
        # a model module may read its own types (phi3's "su"): said, and no context is derived from it
        d.notes.append(f"{where}: RoPE type {shown(kind)} is not one mlx-lm's initialize_rope builds "
                       f"({', '.join(ROPE_TYPES)}); max_context is max_position_embeddings alone")
        return
    factor = rs.get("factor")
    if rope.factor == "required" or factor is not None:
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 1 <= factor <= MAX_ROPE_FACTOR:
            raise InputError(f"{where}.factor must be a number from 1 to {MAX_ROPE_FACTOR:,} for RoPE type "
                             f"{kind!r}, got {shown(factor)}")
    orig = rs.get("original_max_position_embeddings")
    if orig is not None and (isinstance(orig, bool) or not isinstance(orig, int) or not 0 < orig <= MAX_DIM):
        raise InputError(f"{where}.original_max_position_embeddings must be a positive integer, got {shown(orig)}")
    if not rope.extends_context or orig is None:
        return
    extended = min(int(factor * orig), MAX_DIM)
    have = d.fields.get("max_context")
    if have is None or extended > have:
        d.put("max_context", extended, f"{where} (YaRN: factor {factor:g} x "
                                                     f"original_max_position_embeddings {orig:,})")
        d.notes.append(f"{r.label}: max_context {extended:,} from {r.prefix}{key} (YaRN factor "
                       f"{factor:g} x {orig:,}){'' if have is None else f', above max_position_embeddings {have:,}'}")


def _soft_int(c: Ctx, key: str, *, zero_ok: bool = False) -> int | None:
    """An integer the cache does not depend on but the peak and weights do: absent or null is ``None``
    (unknown, said downstream); anything else must be a positive integer within MLX's 32-bit shapes
    (``zero_ok``: 0 also reads as "none", e.g. ``num_experts: 0`` in a dense config). A wrong value is
    an error naming the key, never dropped: a dropped ``intermediate_size`` left a hole the peak model
    multiplied by."""
    v = c.r.raw(key, None)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0 or (v == 0 and not zero_ok):
        raise InputError(f"{c.r.label}: {c.r.prefix}{key} must be a positive integer, got {shown(v)}")
    if v > MAX_DIM:
        raise InputError(f"{c.r.label}: {c.r.prefix}{key} = {shown(v)} is out of range (at most {MAX_DIM})")
    return v or None


def _moe(c: Ctx) -> None:
    n = k = None
    wn = wk = ""
    for key in ("num_experts", "num_local_experts", "n_routed_experts"):
        v = _soft_int(c, key, zero_ok=True)
        if v is not None:
            n, wn = v, key
            break
    for key in ("num_experts_per_tok", "experts_per_token"):
        v = _soft_int(c, key, zero_ok=True)
        if v is not None:
            k, wk = v, key
            break
    if n and k and k > n:  # mlx-lm's top-k cannot pick more experts than there are
        raise InputError(f"{c.r.where(wk)} = {k} is more than the {n} experts ({wn}): mlx-lm's top-k cannot pick them")
    if not n or not k:
        return
    # a wrong value is an error naming the key, never dropped (a 400-digit n_shared_experts was read as
    # "no shared experts": a smaller peak; a 400-digit first_k_dense_replace made every layer dense)
    mi = _soft_int(c, "moe_intermediate_size")
    sh = _soft_int(c, "n_shared_experts", zero_ok=True)
    fk = _soft_int(c, "first_k_dense_replace", zero_ok=True)
    moe: dict[str, Any] = {"num_experts": n, "experts_per_token": k}
    if mi:
        moe["moe_intermediate_size"] = mi
    if sh is not None or c.r.raw("n_shared_experts", None) == 0:
        moe["shared_experts"] = sh or 0
    if fk:
        moe["first_dense_layers"] = fk
    c.d.put("moe", moe, f"{c.r.where(wn)}, {wk}")


def mla(c: Ctx, *, index: bool = False) -> dict:
    r = c.r
    mla: dict[str, Any] = {}
    for k in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
        mla[k] = r.int(k)
    q = r.int("q_lora_rank", allow_none=True, required=False)
    if q is not None:
        mla["q_lora_rank"] = q
    if index:
        for k in ("index_head_dim", "index_n_heads", "index_topk"):
            mla[k] = r.int(k)
    c.d.put("mla", mla, ", ".join(r.where(k) for k in mla))
    return mla


def mla_heads(c: Ctx, mla: dict) -> None:
    """Top-level attention dims of an MLA model, as mlx-lm's prefill path uses them.

    The cache holds the latent (see ``mla``); during prefill mlx-lm expands it to ``num_attention_heads``
    key heads of ``qk_nope_head_dim + qk_rope_head_dim`` and value heads of ``v_head_dim``.
    ``num_key_value_heads`` of the config is not read by mlx-lm's MLA attention.
    """
    r = c.r
    n_q = r.int("num_attention_heads")
    c.d.put("num_heads", n_q, r.where("num_attention_heads"))
    c.d.put("num_kv_heads", n_q, "= num_attention_heads (MLA expands the latent per query head; "
                                 "num_key_value_heads is not read)")
    c.d.put("head_dim", mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"],
            "= qk_nope_head_dim + qk_rope_head_dim")
    c.d.put("v_head_dim", mla["v_head_dim"], r.where("v_head_dim"))
