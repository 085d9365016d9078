"""omlx-profiles: declarative model memory profiles and an exact estimator for MLX inference engines.

Importing this package, loading the registry, resolving and estimating never import mlx, mlx_lm or
transformers: an engine can call it on every request.
"""
from __future__ import annotations

__version__ = "0.1.0"

from .errors import InputError, OmlxProfilesError, ProfileError, UnknownModelError, UnsupportedError  # noqa: E402
from .estimate.estimator import Estimator  # noqa: E402
from .kv.bytes import KVQuant, kv_bytes, kv_report  # noqa: E402
from .registry.profile import Profile  # noqa: E402
from .registry.index import Registry, Resolution, load_registry  # noqa: E402

_DEFAULT_REGISTRY: Registry | None = None


def default_registry() -> Registry:
    """The built-in registry (+ OMLX_PROFILES_PATH), loaded once per process."""
    global _DEFAULT_REGISTRY
    if _DEFAULT_REGISTRY is None:
        _DEFAULT_REGISTRY = load_registry()
    return _DEFAULT_REGISTRY


def resolve(model_id: str, local_dir=None, revision: str | None = None, *, hub: bool | None = None,
            refresh: bool = False) -> Resolution:
    """The profile an engine should use for ``model_id``, and where each field came from.

    * ``local_dir``: the downloaded checkpoint: its config.json and safetensors headers win over any
      name (``Resolution.profile`` from extraction, exact weights from the headers);
    * ``revision`` (or ``hub=True``): read ``model_id`` from the Hugging Face Hub at that revision
      (config.json + safetensors headers by range request; cached; the ``hub`` extra);
    * otherwise the registry; an id it does not know is read from the Hub when ``hub`` is not ``False``
      (cache first: no network once read).

    ``Resolution.explain()`` maps each field to its source (registry ``file:line``, Hub config key,
    safetensors headers); ``weights.estimate_weights(resolution)`` gives the weights term.
    """
    reg = default_registry()
    if local_dir is not None:
        from .extraction.from_config import resolve_path

        return resolve_path(local_dir, registry=reg)
    if revision is not None or hub:
        from .hub import resolve_hub

        return resolve_hub(model_id, revision, registry=reg, refresh=refresh)
    try:
        res = reg.resolve(model_id)
    except LookupError as e:
        from .errors import NotMLXCheckpointError
        from .hub import fallback, looks_like_repo

        if hub is False or isinstance(e, NotMLXCheckpointError) or not looks_like_repo(model_id):
            raise
        return fallback(model_id, reg, e, refresh=refresh)
    if hub is not False and res.matched_by in ("quantized-repo", "repo-name", "base-architecture"):
        from .hub import prefer_cached

        return prefer_cached(res, reg)
    return res


__all__ = [
    "Estimator", "InputError", "KVQuant", "OmlxProfilesError", "Profile", "ProfileError", "Registry",
    "Resolution", "UnknownModelError", "UnsupportedError", "default_registry", "kv_bytes", "kv_report",
    "load_registry", "resolve",
]
