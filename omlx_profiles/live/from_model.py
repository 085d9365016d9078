"""The profile of a live mlx-lm model: ``model.args`` read as a config, checked by a cache probe.

Lives in ``live/`` because it imports mlx (the probe, the parameters' dtype); the config reading and
the probe-report reading it combines are mlx-free (``extraction.from_config``, ``extraction.from_probe``).
"""
from __future__ import annotations

import dataclasses
from typing import Any

from ..errors import InputError, UnsupportedError
from ..extraction.from_config import DEFAULT_ASSUMED_DTYPE, profile_from_config
from ..units import short_dtype
from ..extraction.from_probe import args_dict, layout_dtype, profile_from_layout
from ..registry.profile import Profile


def profile_from_model(model: Any, *, layout: list[dict] | None = None) -> Profile:
    """The profile of a live mlx-lm model: ``model.args`` read as a config, checked by a cache probe.

    The probe (``make_prompt_cache`` + a two-token forward built lazily: nothing is computed) is the
    truth of what this model allocates. When the args-derived profile agrees with it, that profile is
    returned (it knows more: MLA ranks, head counts, MoE); when it disagrees, or the family is not
    modelled, the probe-derived profile is returned and the disagreements are in its provenance.
    Imports ``omlx_profiles.live`` (mlx, mlx-lm).
    """
    from .verify import compare_layout  # lazy: mlx only when probing

    args = args_dict(model)
    if layout is None:
        from .probe import probe_layout

        layout = probe_layout(model, evaluate=False)
    act = layout_dtype(layout) or _param_dtype(model) or DEFAULT_ASSUMED_DTYPE
    mt = (args or {}).get("model_type") or getattr(model, "model_type", None) or "unknown"
    problems: list[str] = []
    candidates = []
    if args is not None:
        candidates.append(("model.args", args))
        # a wrapper this package has no rule for (an mlx-vlm model, say): its language model's config
        # may still be one it knows; the probe below decides whether it describes these caches.
        for key in ("text_config", "language_config", "llm_config"):
            sub = args.get(key)
            if isinstance(sub, dict) and isinstance(sub.get("model_type"), str):
                candidates.append((f"model.args.{key}", sub))
    for label, cfg in candidates:
        try:
            prof = profile_from_config(cfg, source=label, dtype=act)
        except (UnsupportedError, InputError) as e:
            problems.append(f"{label} not usable ({e})")
        else:
            dis = compare_layout(prof, layout, act_dtype=act)
            if not dis:
                prov = dict(prof.provenance)
                prov["verified"] = "live probe: make_prompt_cache + forward agrees with every cache entry"
                return dataclasses.replace(prof, provenance=prov)
            problems.extend(f"{label} disagrees with the probe: {x}" for x in dis)
    prof = profile_from_layout(layout, dtype=act, name=str(mt), family=str(mt), mlx_model_type=str(mt), args=args)
    if problems:
        prov = dict(prof.provenance)
        prov["notes"] = " | ".join(problems)
        prof = dataclasses.replace(prof, provenance=prov)
    return prof


def _param_dtype(model: Any) -> str | None:
    try:
        from mlx.utils import tree_flatten

        for _, p in tree_flatten(model.parameters()):
            n = short_dtype(str(p.dtype))
            if n in ("bf16", "fp16", "fp32"):
                return n
    except Exception:  # noqa: BLE001 - best effort: the caller falls back to the default
        return None
    return None


__all__ = ["profile_from_model"]
