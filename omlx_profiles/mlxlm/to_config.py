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
* state caches: the config dims are solved back from the declared tensor shapes by the module's own
  state formulas (``to_config_profile.solve_state``), so a shape that does not factor raises.

Which keys a module reads, its constants and how it spells the layout are data: the ``to_config:`` block
of ``profiles/mlx_lm/<module>.yaml`` (``schema.module_to_config``), read by ``to_config_write``.

What is shrunk (``shrink=True``): hidden size (64) wherever the head width does not depend on it,
every MLP / expert width (64), the expert count (<= 4) and top-k (<= 2), the vocabulary (512), the
query-head count (down to the KV-head count; the cache never depends on it) - except where mlx-lm
derives the head width from them (``derived_head_dim``: ``hidden = heads * head_dim``) or the conv
state is ``hidden_size`` wide (``heads_from_hidden``).

``dense=True`` additionally replaces MoE blocks by dense MLPs where the module has a switch for it
(``to_config.moe.dense``: ``mlp_only_layers``, ``first_k_dense_replace``, ``num_experts = 0``). The cache does not change, but
MLX's CPU ``gather_mm`` only runs in float32, so this is how a CPU run of an MoE family stays in bf16
(and shows that a DeltaNet state is float32 *while* the conv window is bf16).

``cut_profile`` / ``layers=`` make a shorter model for speed: one period of a pattern, or for explicit
``types`` the first layer of each kind, in order. The estimate must then be computed on the same cut
profile (``cut_profile``), whose every layer keeps its kind.

Only ``omlx_profiles.live`` may import mlx; this module itself needs nothing but the profile.
"""
from __future__ import annotations

from ..registry.profile import Profile
from .recipe_files import module_files
from .to_config_profile import SynthError, cut_profile, layer_roles
from .to_config_write import _Sizes, write_config

__all__ = ["SynthError", "config_for_profile", "cut_profile", "layer_roles", "synth_modules", "can_be_dense"]


def synth_modules() -> list[str]:
    """The modules whose file has a ``to_config:`` block (a profile of theirs can be written back)."""
    return sorted(m for m, f in module_files().items() if f.to_config is not None)


def _to_config(module: str):
    """(the module's ``to_config`` block, the state arrays of its recipe) or (None, None)."""
    f = module_files().get(module)
    if f is None or f.to_config is None:
        return None, None
    arrays = [a for spec in (f.kinds or {}).values() for k in (spec if isinstance(spec, list) else [spec])
              if k.cache == "state" for a in [k.arrays]]
    return f.to_config, (arrays[0] if len(arrays) == 1 else None)


def can_be_dense(profile: Profile) -> bool:
    """True when the model is dense already or ``dense=True`` can make it so (no gather_mm on the CPU)."""
    tc, _ = _to_config(profile.mlx_model_type)
    return profile.moe is None or (tc is not None and tc.moe is not None and tc.moe.dense is not None)


def config_for_profile(profile: Profile, *, shrink: bool = True, layers: int | str | None = None,
                       dense: bool = False) -> dict:
    """An mlx-lm config dict (``model_type = profile.mlx_model_type``) with the profile's cache layout.

    ``shrink``: cut every width that does not reach the cache (see the module doc); ``False`` keeps the
    profile's real sizes (for a lazy full-size build) and raises ``SynthError`` when one is missing.
    ``layers``: as ``cut_profile`` (compute the estimate on ``cut_profile(profile, layers)``).
    ``dense``: MoE blocks replaced by dense MLPs where the module has a switch (cache-neutral).
    """
    p = cut_profile(profile, layers)
    tc, arrays = _to_config(p.mlx_model_type)
    if tc is None:
        raise SynthError(
            f"{p.name}: no synth rule for mlx-lm model_type {p.mlx_model_type!r} (known: {synth_modules()})"
        )
    return write_config(tc, _Sizes(p, shrink, dense), p.mlx_model_type, arrays, _to_config)
