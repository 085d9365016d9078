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

from typing import Callable

from ..registry.profile import Profile
from .to_config_attention import (_Sizes, _gemma2, _gemma3, _gemma3_text, _gpt_oss, _llama, _ministral3, _mistral3,
                                  _mixtral, _phi3, _qwen2, _qwen3, _qwen3_moe, _smollm3)
from .to_config_hybrid import _deepseek_v2, _deepseek_v3, _deepseek_v32, _lfm2, _nemotron_h, _qwen3_5, _qwen3_next
from .to_config_profile import SynthError, cut_profile, layer_roles

__all__ = ["SynthError", "config_for_profile", "cut_profile", "layer_roles", "SYNTH_FAMILIES", "can_be_dense"]


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
