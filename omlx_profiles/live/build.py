"""Tiny live mlx-lm models that keep a real checkpoint's cache layout.

Why: the estimator's resident-KV numbers must be byte-equal to what mlx-lm really allocates,
and the only ground truth is a live mlx-lm model. Real checkpoints are far too big for CI, but
the cache never depends on the MLP width, the vocabulary, the expert count or (mostly) the
residual width. So ``shrink_config`` cuts exactly those and keeps every number the cache is
made of; ``build_model`` then builds the model through mlx-lm's own classes with random
weights (nothing is downloaded).

What ``shrink_config`` PRESERVES (written back explicitly with mlx-lm's effective value, so a
key that was absent and defaulted inside mlx-lm is now explicit and cannot drift). Which rule a text
family follows is read from its module file (``profiles/mlx_lm/<module>.yaml``, ``live.shrink`` marks
the families it may shrink): ``args.head_dim`` (derived or not), ``mla`` (the ranks to keep), a state
array over ``hidden_size``, ``attention.num_kv_heads`` over the query heads; the families below are
today's, as examples:

* every family: ``num_key_value_heads``, the attention head dim (as mlx-lm computes it, see
  below), the layer pattern (``layer_types``, ``sliding_window``, ``sliding_window_pattern``,
  ``full_attention_interval``, ``attention_chunk_size``, ``hybrid_override_pattern``,
  ``full_attn_idxs``, ``no_rope_layers``), rope settings, ``max_position_embeddings``, and
  ``num_attention_heads`` unless ``q_heads`` is given;
* llama / mistral / smollm3 / ministral3 / qwen3_5 / nemotron_h: ``head_dim`` set to
  ``head_dim or hidden_size // num_attention_heads`` (mlx-lm's rule; nemotron_h ignores HF's
  ``attention_head_dim``), then ``hidden_size`` is free;
* qwen3, qwen3_moe, qwen3_next, gemma2, gemma3(_text), gpt_oss, llama4: ``head_dim`` is an
  explicit mlx-lm field, ``hidden_size`` is free;
* qwen2, phi3, mixtral: mlx-lm derives head_dim = hidden/heads and has no head_dim field, so
  ``hidden_size = q_heads * head_dim`` (the only way to shrink is fewer query heads);
* lfm2 (and the lfm2_vl wrapper): ``hidden_size`` *is* a cache dim (conv state is
  ``(conv_L_cache-1) x hidden``), so hidden and heads are kept; ``conv_L_cache`` kept;
* qwen3_next / qwen3_5: ``linear_num_key_heads``, ``linear_num_value_heads``,
  ``linear_key_head_dim``, ``linear_value_head_dim``, ``linear_conv_kernel_dim``;
* nemotron_h: ``mamba_num_heads``, ``mamba_head_dim``, ``ssm_state_size``, ``n_groups``,
  ``conv_kernel``;
* deepseek_v2/v3/v32: ``kv_lora_rank``, ``qk_rope_head_dim``, ``qk_nope_head_dim``,
  ``v_head_dim``; v32 also ``index_head_dim``, ``index_n_heads``, ``index_topk``. deepseek_v2
  caches the *expanded* per-head K/V, so its ``num_attention_heads`` is a cache dim and
  ``q_heads`` is refused.

What it SHRINKS: ``vocab_size`` (wrapper top level too: gemma3 overrides the text vocab from
there), every intermediate width (``intermediate_size``, ``moe_intermediate_size``,
``shared_expert_intermediate_size``, ``moe_shared_expert_intermediate_size``,
``intermediate_size_mlp``, lfm2 ``block_ff_dim`` with auto-adjust off), the expert count
(``num_experts`` / ``num_local_experts`` / ``n_routed_experts``), top-k (``num_experts_per_tok``,
``experts_per_token``), ``n_shared_experts`` (≤ 1), deepseek ``n_group``/``topk_group`` (→ 1,
only when the experts were cut), MLA ``q_lora_rank``; and, on request, the depth.
``quantization_config``/``quantization`` are dropped: ``build_model`` makes unquantized weights.
"""

from __future__ import annotations

import copy
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten, tree_map_with_path

from ..mlxlm.recipe_files import module_files
from ..schema import formula
from ._resolve import get_classes, layer_kinds, min_layers, text_args, text_dict, text_family

# --- how each text family keeps its cache dims, read from its module file (profiles/mlx_lm/) ----


@dataclass(frozen=True)
class _Rule:
    """What ``shrink_config`` must keep for one text family, from its module file: ``head``: ``head_dim``
    (an explicit or optional field: set it, hidden is free), ``derived`` (head_dim = hidden // heads: hidden
    = heads * head_dim), ``hidden`` (a state array is hidden_size wide: keep hidden and heads), ``mla``
    (keep the ranks ``mla`` names); ``q_heads_in_cache``: the query-head count is a cache dim."""

    head: str
    q_heads_in_cache: bool
    mla: tuple[str, ...]
    widths: tuple[str, ...]
    sets: dict
    lengths: tuple[str, ...]  # per-layer lists mlx-lm checks against the depth (args.lengths)
    pattern_default: bool  # mlx-lm fills layer_types with a pattern when the config has none


def _rule(family: str) -> _Rule | None:
    f = module_files().get(family)
    if f is None or f.live.shrink is None:
        return None
    arrays = [a for spec in (f.kinds or {}).values() for k in (spec if isinstance(spec, list) else [spec])
              for a in (k.arrays or [])]
    if f.mla:
        head = "mla"
    elif any("hidden_size" in formula.keys(x) for a in arrays for x in a.shape):
        head = "hidden"
    elif f.args is not None and f.args.head_dim == "derived":
        head = "derived"
    else:
        head = "head_dim"
    att = f.attention.num_kv_heads if f.attention is not None else None
    lt = getattr(f.layout, "layer_types", None)
    return _Rule(
        head=head,
        q_heads_in_cache=head == "hidden" or (att is not None and "num_attention_heads" in formula.keys(att)),
        mla=tuple(f.mla or ()),
        widths=tuple(f.live.shrink.widths),
        sets=dict(f.live.shrink.sets),
        lengths=tuple(f.args.lengths) if f.args is not None else (),
        pattern_default=lt is not None and lt.default is not None and not isinstance(lt.default, str),
    )


def supported_families() -> list[str]:
    """Text families ``shrink_config`` has a rule for (``live.shrink`` in their module file)."""
    return sorted(m for m, f in module_files().items() if f.live.shrink is not None)


_INTERMEDIATE_KEYS = (
    "intermediate_size",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
    "moe_shared_expert_intermediate_size",
    "intermediate_size_mlp",
)
_EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")
_TOPK_KEYS = ("num_experts_per_tok", "experts_per_token")
#: per-layer lists that must be cut to the new depth.
_PER_LAYER_LISTS = ("layer_types", "no_rope_layers", "hybrid_override_pattern", "layers_block_type")
#: per-layer index lists that must be filtered to the new depth.
_PER_LAYER_INDEXES = ("mlp_only_layers", "full_attn_idxs")


def shrink_config(
    config: dict,
    *,
    hidden: int = 64,
    intermediate: int = 64,
    vocab: int = 512,
    experts: int = 4,
    top_k: int = 2,
    q_heads: int | None = None,
    layers: int | str | None = None,
) -> dict:
    """Return a tiny config whose mlx-lm cache layout equals ``config``'s (see module doc).

    ``hidden`` is used only where the head dim does not depend on it. ``q_heads`` (default:
    keep) sets the query-head count; it must be a multiple of the KV-head count and it changes
    the SDPA transient, not the cache. ``layers``: ``None`` keeps the depth; an int N keeps the
    first N layers of the stack, N >= ``min_layers(config)`` (pattern lists cut, index lists
    filtered); ``"period"`` keeps the shortest prefix holding every layer kind (see
    ``_resolve.min_layers``); ``"period+1"`` adds one layer, which is what *peak* measurements need: ``generate_step`` evaluates only
    the cache states of a prefill chunk, so a layer whose output feeds no later cache (the
    last layer) is never computed, and its attention transient never happens. With
    ``"period"`` the last kind of the period (gemma3's global layer, qwen3-next's full
    layer) would be that dead layer; a 1-layer model shows no attention transient at all.

    Raises ``ValueError`` for a text family this function has no rule for, or for a
    ``q_heads`` that would change the cache.
    """
    family = text_family(config)
    rule = _rule(family)
    if rule is None:
        raise ValueError(f"shrink_config: no rule for text family {family!r}")
    eff = text_args(config)  # mlx-lm's own view, defaults filled in
    out = copy.deepcopy(config)
    t = text_dict(out)

    for cfg in {id(out): out, id(t): t}.values():
        cfg.pop("quantization_config", None)
        cfg.pop("quantization", None)

    # --- heads and hidden -------------------------------------------------------------
    n_q = eff.num_attention_heads
    n_kv = getattr(eff, "num_key_value_heads", None) or n_q
    mla = rule.head == "mla"
    if q_heads is not None and q_heads != n_q:
        if rule.q_heads_in_cache:
            raise ValueError(f"{family}: num_attention_heads is a cache dim; q_heads refused")
        if not mla and q_heads % n_kv:
            raise ValueError(f"q_heads={q_heads} is not a multiple of num_key_value_heads={n_kv}")
        n_q = q_heads
    t["num_attention_heads"] = n_q
    if mla and q_heads is not None:
        n_kv = n_q  # deepseek ignores num_key_value_heads; keep it consistent
    t["num_key_value_heads"] = n_kv

    if rule.head == "head_dim":  # mlx-lm's rule where the field may be null: head_dim or hidden // heads
        t["head_dim"] = eff.head_dim or eff.hidden_size // eff.num_attention_heads
        t["hidden_size"] = hidden
    elif rule.head == "derived":
        t["hidden_size"] = n_q * (eff.hidden_size // eff.num_attention_heads)
    elif rule.head == "hidden":
        t["hidden_size"] = eff.hidden_size
    else:
        t["hidden_size"] = hidden
        for k in rule.mla:
            if k == "q_lora_rank":
                if getattr(eff, k, None):
                    t[k] = min(eff.q_lora_rank, hidden)
            else:
                t[k] = getattr(eff, k)

    # materialize pattern defaults that mlx-lm filled in
    for k in ("sliding_window", "sliding_window_pattern", "full_attention_interval",
              "attention_chunk_size", "linear_conv_kernel_dim", "conv_L_cache"):
        if k not in t and getattr(eff, k, None) is not None:
            t[k] = getattr(eff, k)

    # --- widths that never reach the cache --------------------------------------------
    for k in _INTERMEDIATE_KEYS:
        v = t.get(k, getattr(eff, k, None))
        if isinstance(v, int) and v > 0:
            t[k] = min(v, intermediate)
    for k in rule.widths:
        t[k] = intermediate
    t.update(rule.sets)

    t["vocab_size"] = vocab
    top = module_files().get(out.get("model_type"))
    if t is not out and ("vocab_size" in out or (top is not None and top.text is not None
                                                 and "vocab_size" in top.text.from_top)):
        out["vocab_size"] = vocab  # gemma3's wrapper overwrites text_config.vocab_size

    cut_experts = False
    for k in _EXPERT_KEYS:
        v = t.get(k)
        if isinstance(v, int) and v > experts:
            t[k] = experts
            cut_experts = True
    n_exp = next((t[k] for k in _EXPERT_KEYS if isinstance(t.get(k), int) and t[k] > 0), None)
    for k in _TOPK_KEYS:
        v = t.get(k)
        if isinstance(v, int) and v > 0:
            t[k] = min(v, top_k, n_exp or v)
    if isinstance(t.get("n_shared_experts"), int):
        t["n_shared_experts"] = min(t["n_shared_experts"], 1)
    if cut_experts:
        for k in ("n_group", "topk_group"):
            if k in t and t[k] is not None:
                t[k] = 1

    # --- depth ------------------------------------------------------------------------
    if layers is not None:
        n_old = len(layer_kinds(config))
        if layers == "period":
            n_new = min_layers(config)
        elif layers == "period+1":
            n_new = min(min_layers(config) + 1, n_old)
        else:
            n_new = int(layers)
        if not min_layers(config) <= n_new <= n_old:
            raise ValueError(
                f"layers={layers!r}: need {min_layers(config)}..{n_old} so that the prefix keeps "
                "every layer kind (mlx-lm's gpt_oss, llama, lfm2, qwen3_5 and nemotron_h index "
                "the first layer of each kind and fail without it)"
            )
        _cut_depth(t, eff, rule, n_new)
    return out


def _cut_depth(t: dict, eff: Any, rule: _Rule, n: int) -> None:
    """Keep the first ``n`` layers; cut per-layer lists so mlx-lm's length checks pass (a list mlx-lm
    filled itself - a layer_types pattern default, a list checked against the depth - is written out cut)."""
    t["num_hidden_layers"] = n
    for k in _PER_LAYER_LISTS:
        v = t.get(k, None)
        if v is None and k == "layer_types" and rule.pattern_default and eff.layer_types:
            v = eff.layer_types
        if isinstance(v, (list, str)):
            t[k] = v[:n]
    for k in rule.lengths:
        if k not in t:
            t[k] = list(getattr(eff, k))[:n]
    for k in _PER_LAYER_INDEXES:
        v = t.get(k)
        if isinstance(v, list):
            t[k] = [i for i in v if i < n]
    # Keep at least one MoE layer when the prefix would otherwise be dense-only (the
    # dense/MoE split never touches the cache, but the MoE code path should still run).
    fk = t.get("first_k_dense_replace")
    if isinstance(fk, int) and fk >= n and n >= 2:
        t["first_k_dense_replace"] = n - 1


# --- building ---------------------------------------------------------------------------

_DTYPES = {
    "bf16": mx.bfloat16, "bfloat16": mx.bfloat16,
    "fp16": mx.float16, "float16": mx.float16,
    "fp32": mx.float32, "float32": mx.float32,
}


@dataclass(frozen=True)
class BuildInfo:
    """What ``build_model`` actually did (kept on ``model.omlx_build_info``)."""

    module: str  #: mlx_lm.models module that built the model
    requested_dtype: str
    dtype: str  #: the dtype the parameters really have
    promoted_for_gather_mm: bool  #: True when CPU GatherMM forced float32
    seed: int
    n_params: int
    weights_nbytes: int


def _dtype(d: Any) -> mx.Dtype:
    if isinstance(d, mx.Dtype):
        return d
    try:
        return _DTYPES[str(d).lower()]
    except KeyError:
        raise ValueError(f"unknown dtype {d!r}; use one of {sorted(_DTYPES)}") from None


def uses_gather_mm(model: nn.Module) -> bool:
    """True when the model routes experts through ``mx.gather_mm`` (SwitchLinear).

    MLX 0.32.4's CPU ``GatherMM::eval`` raises "Currently only supports float32." for
    bf16/fp16 (checked), so such models cannot run in half precision on the CPU backend.
    """
    from mlx_lm.models.switch_layers import QuantizedSwitchLinear, SwitchLinear

    return any(
        isinstance(m, (SwitchLinear, QuantizedSwitchLinear)) for _, m in model.named_modules()
    )


def cpu_only() -> bool:
    """True when MLX runs on its CPU backend (no Metal, no CUDA device as default)."""
    return mx.default_device() == mx.cpu or not (
        mx.metal.is_available() or (hasattr(mx, "cuda") and mx.cuda.is_available())
    )


def build_model(
    config: dict,
    dtype: Any = "bf16",
    seed: int = 0,
    *,
    allow_fp32_promotion: bool = True,
    lazy: bool = False,
) -> nn.Module:
    """Build the mlx-lm model for ``config`` with random weights, cast and evaluated.

    The path is mlx-lm's own (``_get_classes`` with its model_type remapping, then
    ``ModelArgs.from_dict`` and ``Model(args)``), so the model, its ``make_cache`` and its
    attention code are exactly what ``mlx_lm.load`` would build; only the weights are random
    (seeded by ``seed``) and unquantized. The cast follows ``mlx_lm.convert``: floating
    parameters only, and the model's ``cast_predicate`` is honoured (deepseek_v3 keeps
    ``e_score_correction_bias`` in fp32).

    On the CPU backend a model that uses ``gather_mm`` (every SwitchGLU MoE) is promoted to
    float32, with a warning, because CPU GatherMM supports only float32; its caches are then
    fp32 too. Pass ``allow_fp32_promotion=False`` to get an error instead.
    ``model.omlx_build_info`` (a ``BuildInfo``) records what happened.

    ``lazy=True`` skips the evaluation: nothing is allocated, which is enough to read cache
    classes and (with ``probe_layout(..., evaluate=False)``) cache shapes of a full-size config.
    """
    model_cls, args_cls, module = get_classes(config)
    target = _dtype(dtype)
    mx.random.seed(seed)
    model = model_cls(args_cls.from_dict(copy.deepcopy(config)))
    promoted = False
    if target != mx.float32 and cpu_only() and uses_gather_mm(model):
        if not allow_fp32_promotion:
            raise RuntimeError(f"{module}: MoE gather_mm needs float32 on the CPU backend")
        warnings.warn(
            f"{module}: CPU GatherMM supports only float32; building in float32, "
            "so activations and KV caches are float32 too",
            stacklevel=2,
        )
        target, promoted = mx.float32, True
    keep = getattr(model, "cast_predicate", lambda _k: True)

    def cast(path: str, v: mx.array) -> mx.array:
        if keep(path) and mx.issubdtype(v.dtype, mx.floating):
            return v.astype(target)
        return v

    model.update(tree_map_with_path(cast, model.parameters()))
    model.eval()
    params = tree_flatten(model.parameters())
    if not lazy:
        mx.eval([p for _, p in params])
    model.omlx_build_info = BuildInfo(
        module=module,
        requested_dtype=str(dtype),
        dtype=str(target).removeprefix("mlx.core."),
        promoted_for_gather_mm=promoted,
        seed=seed,
        n_params=sum(p.size for _, p in params),
        weights_nbytes=sum(p.nbytes for _, p in params),
    )
    return model


def load_local(path: str | Path, *, lazy: bool = False) -> tuple[nn.Module, dict]:
    """Load a local mlx-lm model directory (config.json + model*.safetensors), no network.

    ``mlx_lm.load`` would try the Hugging Face hub for a path that does not exist; this
    refuses instead and goes straight to ``mlx_lm.utils.load_model`` (which applies the
    config's quantization, ``sanitize``, and strict weight matching). Returns (model, config).
    """
    from mlx_lm.utils import load_model

    p = Path(path)
    if not (p / "config.json").is_file():
        raise FileNotFoundError(f"{p}: no config.json (load_local never downloads)")
    model, config = load_model(
        p, lazy=lazy, get_model_classes=lambda config: get_classes(config)[:2]
    )
    return model, config


def save_local(model: nn.Module, config: dict, path: str | Path) -> Path:
    """Write ``config.json`` + ``model.safetensors`` so ``load_local`` can read the model back.

    For tests of the local-loading path: weights are saved as the model holds them (already
    sanitized), and every model in scope here loads them back unchanged.
    """
    p = Path(path)
    p.mkdir(parents=True, exist_ok=True)
    (p / "config.json").write_text(json.dumps(config, indent=1))
    mx.save_safetensors(str(p / "model.safetensors"), dict(tree_flatten(model.parameters())))
    return p


__all__ = [
    "BuildInfo",
    "supported_families",
    "build_model",
    "cpu_only",
    "layer_kinds",
    "load_local",
    "min_layers",
    "save_local",
    "shrink_config",
    "uses_gather_mm",
]
