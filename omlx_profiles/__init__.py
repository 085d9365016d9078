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


def resolve(model_id: str) -> Resolution:
    return default_registry().resolve(model_id)


__all__ = [
    "Estimator", "InputError", "KVQuant", "OmlxProfilesError", "Profile", "ProfileError", "Registry",
    "Resolution", "UnknownModelError", "UnsupportedError", "default_registry", "kv_bytes", "kv_report",
    "load_registry", "resolve",
]
