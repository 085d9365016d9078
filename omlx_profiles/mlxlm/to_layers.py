"""Per mlx-lm module: which cache each layer gets, and with which widths (mlx-lm 0.32.2).

Each rule reads the config *the way mlx-lm's args class does* (``Reader`` applies mlx-lm's defaults and
required fields) and replays the module's ``make_cache`` - or, for a module without one,
``make_prompt_cache``'s default of one ``KVCache`` per entry of ``model.layers``. Where mlx-lm ignores a
key a reader would expect to matter, the rule says so in a note instead of honouring the key:

* ``sliding_window`` without ``layer_types`` (Mistral 7B v0.3), in gemma2, phi3, mixtral, qwen2/qwen3:
  every layer is an unbounded ``KVCache``;
* the ``mistral3``/``llava`` wrapper defines no ``make_cache``: every text layer is a ``KVCache`` even
  where ``text_config.layer_types`` says ``sliding_attention``; smollm3 likewise;
* qwen2, phi3, mixtral, ... derive ``head_dim = hidden_size // num_attention_heads`` and ignore a config
  ``head_dim``; nemotron_h ignores ``attention_head_dim``;
* gemma3 and qwen3_next/qwen3_5 lay layers out from ``sliding_window_pattern`` /
  ``full_attention_interval`` and ignore ``layer_types``.

The output is a variant payload (what a profile YAML variant holds), its provenance and notes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import InputError, UnsupportedError
from .config import MAX_DIM, MAX_LAYERS, Reader, shown


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


def _heads(c: Ctx) -> tuple[int, int]:
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


def _head_dim(c: Ctx, n_q: int, rule: str | None = None) -> int:
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


def _info(c: Ctx) -> None:
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


#: RoPE types mlx-lm's ``initialize_rope`` builds (models/rope_utils.py); any other raises ValueError there
ROPE_TYPES = ("default", "linear", "dynamic", "llama3", "yarn", "deepseek_yarn", "telechat3-yarn", "longrope",
              "proportional", "mrope")
_YARN = ("yarn", "deepseek_yarn", "telechat3-yarn")
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
    if key == "rope_parameters" and kind == "default" and "factor" not in rs:
        return  # transformers 5 keeps rope_theta here too: no scaling
    if not isinstance(kind, str) or kind not in ROPE_TYPES:
        # a model module may read its own types (phi3's "su"): said, and no context is derived from it
        d.notes.append(f"{where}: RoPE type {shown(kind)} is not one mlx-lm's initialize_rope builds "
                       f"({', '.join(ROPE_TYPES)}); max_context is max_position_embeddings alone")
        return
    factor = rs.get("factor")
    if kind in ("linear", "dynamic", "llama3") + _YARN or factor is not None:
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 1 <= factor <= MAX_ROPE_FACTOR:
            raise InputError(f"{where}.factor must be a number from 1 to {MAX_ROPE_FACTOR:,} for RoPE type "
                             f"{kind!r}, got {shown(factor)}")
    orig = rs.get("original_max_position_embeddings")
    if orig is not None and (isinstance(orig, bool) or not isinstance(orig, int) or not 0 < orig <= MAX_DIM):
        raise InputError(f"{where}.original_max_position_embeddings must be a positive integer, got {shown(orig)}")
    if kind not in _YARN or orig is None:
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
    if not n or not k or k > n:
        return
    moe: dict[str, Any] = {"num_experts": n, "experts_per_token": k}
    mi = _soft_int(c, "moe_intermediate_size")
    if mi:
        moe["moe_intermediate_size"] = mi
    sh = c.r.raw("n_shared_experts", None)
    if isinstance(sh, int) and not isinstance(sh, bool) and 0 <= sh <= MAX_DIM:
        moe["shared_experts"] = sh
    fk = c.r.raw("first_k_dense_replace", None)
    if isinstance(fk, int) and not isinstance(fk, bool) and fk > 0:
        moe["first_dense_layers"] = fk
    c.d.put("moe", moe, f"{c.r.where(wn)}, {wk}")


def _full(n_kv: int | None = None, hd: int | None = None, vd: int | None = None) -> dict:
    s: dict[str, Any] = {"kind": "full"}
    if n_kv is not None:
        s["num_kv_heads"] = n_kv
    if hd is not None:
        s["head_dim"] = hd
    if vd is not None:
        s["v_head_dim"] = vd
    return s


def _window(c: Ctx, key: str = "sliding_window") -> int:
    w = c.r.int(key, allow_none=True, required=False)
    if w is None:
        raise UnsupportedError(
            f"unsupported: model_type {shown(c.model_type)}: sliding layers need {c.r.prefix}{key}, and the config "
            "gives none (mlx-lm would build RotatingKVCache(max_size=None) and fail on the first update)")
    return w


# --------------------------------------------------------------------------------------------------
# families
# --------------------------------------------------------------------------------------------------


def rule_llama_like(c: Ctx, *, honour_sliding: bool = True, who: str | None = None) -> None:
    """llama / ministral3 / smollm3 (and the text model of mistral3): ``layer_types`` decides.

    One block per ``layer_types`` entry (default: ``full_attention`` x num_hidden_layers);
    ``sliding_attention`` -> ``RotatingKVCache(sliding_window)`` in llama.py / ministral3.py's
    ``make_cache``. ``layer_types.index("full_attention")`` must succeed (mask of the first full layer).
    """
    r, d = c.r, c.d
    n_hidden = r.int("num_hidden_layers", maximum=MAX_LAYERS)
    n_q, n_kv = _heads(c)
    _head_dim(c, n_q)
    types = r.str_list("layer_types")
    if types is None:
        types = ["full_attention"] * n_hidden
        where = f"{r.where('num_hidden_layers')} (no layer_types: every layer full_attention)"
        if r.data.get("sliding_window") is not None:
            d.notes.append(f"{c.label}: {r.prefix}sliding_window = {r.data['sliding_window']} is ignored: without "
                           "layer_types mlx-lm's llama.py builds only full-attention layers (unbounded KVCache)")
    else:
        where = r.where("layer_types")
        if len(types) != n_hidden:
            d.notes.append(f"{c.label}: {r.prefix}layer_types has {len(types)} entries but num_hidden_layers is "
                           f"{n_hidden}; mlx-lm builds one block per layer_types entry")
    if "full_attention" not in types:
        raise UnsupportedError(
            f"unsupported: model_type {shown(c.model_type)}: layer_types has no 'full_attention' entry; mlx-lm's "
            "llama.py looks up the first full-attention layer and raises ValueError")
    d.put("num_layers", len(types), where)
    sliding = [t == "sliding_attention" for t in types]
    if any(sliding) and honour_sliding:
        w = _window(c)
        d.per_layer = [("sliding", {"kind": "sliding", "window": w}) if s else ("full", _full()) for s in sliding]
        d.prov["layers"] = f"{where}; sliding_attention -> RotatingKVCache({r.where('sliding_window')})"
    else:
        d.per_layer = [("full", _full())] * len(types)
        d.prov["layers"] = f"{where}: KVCache per layer"
        if any(sliding):
            d.notes.append(f"{who or c.module}: layer_types marks {sum(sliding)} layer(s) sliding_attention, but "
                           f"mlx-lm's {who or c.module} defines no make_cache, so make_prompt_cache gives every "
                           "layer an unbounded KVCache (the window only masks attention)")


def _mla(c: Ctx, *, index: bool = False) -> dict:
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


def _mla_heads(c: Ctx, mla: dict) -> None:
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


def rule_nemotron_h(c: Ctx) -> None:
    """Entries only for ``M`` (Mamba-2 ``ArraysCache(2)``) and ``*`` (``KVCache``); ``-``/``E`` have none."""
    r, d = c.r, c.d
    pat = r.raw("hybrid_override_pattern", None)
    where = r.where("hybrid_override_pattern")
    if pat is None:
        blocks = r.str_list("layers_block_type") or r.str_list("layer_types")
        if blocks is None:
            raise UnsupportedError("unsupported: model_type 'nemotron_h': the config has neither "
                                   "hybrid_override_pattern nor layers_block_type (nemotron_h.ModelArgs raises)")
        m = {"full_attention": "*", "linear_attention": "M", "moe": "E", "mlp": "-", "attention": "*",
             "mamba": "M", "conv": "M"}
        bad = sorted(set(blocks) - set(m))
        if bad:
            raise UnsupportedError(f"unsupported: model_type 'nemotron_h': layer block types {bad} "
                                   "(nemotron_h.ModelArgs raises ValueError)")
        pat = "".join(m[b] for b in blocks)
        where = r.where("layers_block_type" if r.has("layers_block_type") else "layer_types")
    if isinstance(pat, list) and all(isinstance(x, str) and len(x) == 1 for x in pat):
        pat = "".join(pat)
    if isinstance(pat, str) and len(pat) > MAX_LAYERS:
        raise InputError(f"{c.label}: {r.prefix}hybrid_override_pattern has {len(pat)} blocks (at most {MAX_LAYERS})")
    if not isinstance(pat, str) or not pat:
        raise InputError(f"{c.label}: {r.prefix}hybrid_override_pattern must be a string such as 'M-M*', got {shown(pat)}")
    bad = sorted(set(pat) - set("M*-E"))
    if bad:
        raise UnsupportedError(f"unsupported: model_type 'nemotron_h': block characters {bad} in "
                               "hybrid_override_pattern (mlx-lm knows M, *, -, E)")
    nh = r.raw("num_hidden_layers", None)
    if isinstance(nh, int) and nh != len(pat):
        d.notes.append(f"{c.label}: num_hidden_layers = {nh} but hybrid_override_pattern has {len(pat)} blocks; "
                       "mlx-lm uses the pattern's length")
    d.put("num_layers", len(pat), f"= len(hybrid_override_pattern) ({where})")
    n_q, n_kv = _heads(c)
    _head_dim(c, n_q)
    ahd = r.data.get("attention_head_dim")
    if ahd is not None and r.data.get("head_dim") is None and ahd != d.fields["head_dim"]:
        d.notes.append(f"{c.label}: attention_head_dim = {r.data['attention_head_dim']} is not read by mlx-lm's "
                       f"nemotron_h.py (head_dim = hidden_size // num_attention_heads = {d.fields['head_dim']})")
    H, hd = r.int("mamba_num_heads"), r.int("mamba_head_dim")
    N, G, K = r.int("ssm_state_size"), r.int("n_groups"), r.int("conv_kernel")
    mamba = {"kind": "state", "tensors": [
        {"name": "conv", "shape": [K - 1, H * hd + 2 * G * N], "dtype": "model"},
        {"name": "ssm", "shape": [H, hd, N], "dtype": "fp32"},
    ]}
    spec_of = {"M": mamba, "*": _full(), "-": {"kind": "none"}, "E": {"kind": "none"}}
    d.per_layer = [(ch, spec_of[ch]) for ch in pat]
    d.layers_as_string = True
    d.prov["layers"] = (f"{where}: M -> Mamba-2 ArraysCache (conv in activation dtype, ssm fp32), * -> KVCache, "
                        "- / E -> no cache entry")


# --------------------------------------------------------------------------------------------------
# dispatch
# --------------------------------------------------------------------------------------------------

RULES: dict[str, Callable[[Ctx], None]] = {
    "nemotron_h": rule_nemotron_h,
}

#: wrapper module -> how to find the text model: (args spec of the inner class, rule, injected defaults)
WRAPPERS = ("mistral3",)
