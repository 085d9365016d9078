"""Model info from what oMLX holds after loading a model: a live mlx-lm model, an mlx-vlm / DFlash object
that only exposes its config, or a bare config (``make_prefill_memory_profile``); and the warm-up oMLX
should run once after loading.

Apart from the monitor because it is the facade's *reading* side: it picks the best source a model allows
(the live cache probe, the config's full profile, oMLX's numbers) and hands the monitor a profile or
numbers. Errors are logged, never raised, as oMLX expects.
"""
from __future__ import annotations

import logging
from typing import Any

from .monitor import MemoryMonitor, ProfilePrefillMemory
from .read import (as_dict, collect_kv_layer_specs, dims, language_config, mla_kv_bytes_per_token, model_config,
                   model_dtype_size)

# the facade's one logger, named as the module oMLX swapped in (its log configuration names it)
logger = logging.getLogger(__package__)


def make_prefill_memory_profile(config: Any, *, compute_dtype_size: float = 2, backend: str | None = None,
                                mlx_version: str | None = None, **_newer_options: Any) -> ProfilePrefillMemory | None:
    """A prefill-memory strategy for the model ``config`` describes (a dict or a config object; a nested
    ``text_config`` is read the way mlx-lm reads it): the config's full profile -- every layer kind,
    head count and width -- through ``omlx_profiles.extraction.from_config.profile_from_config``. ``None`` (logged) when
    the config is not one mlx-lm can build or this package models: the caller keeps its uniform numbers.
    Unlike oMLX's (DeepSeek-V4 and Qwen4 only), it covers every family the registry knows."""
    from ..errors import InputError, UnsupportedError
    from ..extraction.from_config import profile_from_config

    d = as_dict(config)
    if not d:
        return None
    dtype = "fp32" if compute_dtype_size and compute_dtype_size >= 4 else None
    try:
        prof = profile_from_config(d, source="make_prefill_memory_profile()", dtype=dtype)
    except (InputError, UnsupportedError, ValueError) as e:
        logger.info("make_prefill_memory_profile: no profile for this config (%s)", e)
        return None
    return ProfilePrefillMemory(prof, backend=backend, mlx_version=mlx_version)


def _is_live_mlx_model(model: Any) -> bool:
    try:
        import mlx.nn as nn
    except Exception:  # noqa: BLE001
        return False
    return isinstance(model, nn.Module)


def set_model_info_from_model(monitor: MemoryMonitor, model: Any) -> None:
    """Populate ``monitor`` from ``model``, the best way the model allows:

    1. a live mlx-lm model (an ``mlx.nn.Module``): its profile, ``model.args`` checked by a cache probe
       (``omlx_profiles.live.from_model.profile_from_model``): every layer kind is known;
    2. a model that only exposes its config (``model.config`` -- an object or a dict -- else
       ``model.args``; the language model's part under ``text_config`` / ``language_config`` /
       ``llm_config`` when present): the config's profile (``profile_from_config``), or, when the config
       is not a full one, oMLX's numbers (layers, KV heads, head_dim, query heads, dtype from
       ``model.dtype``) with the KV layer kinds from ``model.make_cache()`` when it has one
       (``collect_kv_layer_specs``, MLA bytes per token from ``estimate_mla_kv_bytes_per_token``).

    Errors are logged, not raised, as in oMLX; a model nothing can be read from leaves the monitor without
    model info (its estimates return 0, logged)."""
    if _is_live_mlx_model(model):
        try:
            from ..live.from_model import profile_from_model  # lazy: imports mlx through the live probe

            monitor.set_profile(profile_from_model(model))
            return
        except Exception as e:  # noqa: BLE001 - fall back to the config, as oMLX reads it
            logger.info("set_model_info_from_model: the cache probe failed (%s: %s); reading the config",
                        type(e).__name__, e)
    config = model_config(model)
    if config is None:
        logger.warning("set_model_info_from_model: %s has neither a config nor args; the monitor has no "
                       "model info", type(model).__name__)
        monitor._clear_model()
        return
    dt_size = model_dtype_size(model)
    full = as_dict(language_config(config)) if as_dict(config) else None
    if full and isinstance(full.get("model_type"), str):
        try:
            from ..extraction.from_config import profile_from_config

            top = as_dict(config)
            prof = profile_from_config(top if top and isinstance(top.get("model_type"), str) else full,
                                       source="model.config", dtype="fp32" if dt_size == 4 else None)
            monitor.set_profile(prof)
            return
        except Exception as e:  # noqa: BLE001 - not a complete config: read its numbers, as oMLX did
            logger.debug("set_model_info_from_model: config not readable as a profile (%s: %s)",
                         type(e).__name__, e)
    d = dims(config)
    if not (d.num_layers and d.num_kv_heads and d.head_dim):
        logger.warning("set_model_info_from_model: incomplete model dims (layers=%s, kv_heads=%s, head_dim=%s);"
                       " the monitor has no model info", d.num_layers, d.num_kv_heads, d.head_dim)
        monitor._clear_model()
        return
    cache_list = None
    full_layers, rotating, state_layers = 0, [], 0
    make_cache = getattr(model, "make_cache", None)
    if callable(make_cache) and not type(make_cache).__module__.startswith("unittest.mock"):
        try:
            cache_list = make_cache()
            full_layers, rotating, state_layers = collect_kv_layer_specs(cache_list)
        except Exception as e:  # noqa: BLE001
            logger.debug("set_model_info_from_model: make_cache failed (%s)", e)
    kv_layers = full_layers if (full_layers or rotating or state_layers) else None
    try:
        monitor.set_model_info(
            num_layers=d.num_layers, num_kv_heads=d.num_kv_heads, head_dim=d.head_dim, dtype_size=dt_size,
            num_attention_heads=d.num_attention_heads, num_kv_cache_layers=kv_layers,
            compute_dtype_size=dt_size, kv_bytes_per_token=mla_kv_bytes_per_token(config, cache_list, dt_size),
            rotating_layer_specs=rotating, hidden_size=d.hidden_size, intermediate_size=d.intermediate_size)
    except Exception as e:  # noqa: BLE001 - logged, as oMLX
        logger.warning("set_model_info_from_model: %s: %s; the monitor has no model info", type(e).__name__, e)
        monitor._clear_model()


def warm_up_model(model: Any, tokens: int = 64) -> float:
    """Run one short prefill through a freshly loaded mlx-lm ``model`` and free it (seconds taken).

    Not in oMLX. Call it once after loading a model and before admitting requests: the prefill
    estimates are for a warmed-up process, and on MLX's CUDA backend the first prefill after loading holds
    more in flight than any later one (measured on an H200 up to +46%; one 64-token prefill removed it:
    ``omlx_profiles.live.warmup``). Imports mlx, unlike the estimators."""
    from ..live.warmup import warm_up  # lazy: the facade's estimates must not import mlx

    return warm_up(model, tokens)
