"""What the oMLX facade reads from oMLX-side objects: configs, cache lists, the installed mlx-lm.

oMLX hands its memory monitor whatever its engines hold: an mlx-lm model (``model.args``, a dataclass), an
mlx-vlm or DFlash target that only exposes ``model.config`` (an object or a plain dict, with the language
model's dimensions nested under ``text_config`` / ``language_config`` / ``llm_config``), and
``model.make_cache()`` lists whose classes may be mlx-lm's, mlx-vlm's or oMLX's own subclasses. This
module turns those into plain values for ``omlx_profiles.compat`` without importing mlx at import time.
It never guesses a dimension: a value that is missing or not a positive integer comes back as ``None``.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from functools import lru_cache
from typing import Any

SUB_CONFIG_KEYS = ("text_config", "language_config", "llm_config")
# cache classes by name, for caches that are not mlx-lm's own classes (oMLX and mlx-vlm subclasses)
_ROTATING_NAMES = frozenset({"RotatingKVCache", "BatchRotatingKVCache", "PrefillReadyRotatingKVCache",
                             "BufferedRotatingKVCache"})
_STATE_NAMES = frozenset({"ArraysCache", "SizedArraysCache", "MambaCache"})


def cfg_get(obj: Any, key: str, default: Any = None) -> Any:
    """``obj[key]`` for a dict, ``obj.key`` otherwise (configs come as both)."""
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def pos_int(v: Any) -> bool:
    """A real positive integer (not a bool, not a mock that happens to be truthy)."""
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _is_mock(v: Any) -> bool:
    return type(v).__module__.startswith("unittest.mock")


def model_config(model: Any) -> Any:
    """The config object a model exposes: ``model.config`` first (mlx-vlm, DFlash targets), else
    ``model.args`` (mlx-lm). ``None`` when it has neither."""
    for attr in ("config", "args"):
        try:
            v = getattr(model, attr)
        except Exception:  # noqa: BLE001 - a property that raises is "not there"
            continue
        if v is not None and not _is_mock(v):
            return v
    return None


def language_config(config: Any) -> Any:
    """The language model's part of a config: a nested ``text_config`` / ``language_config`` /
    ``llm_config`` that has a layer count wins over the top level (whose dims may be a vision tower's)."""
    for key in SUB_CONFIG_KEYS:
        sub = cfg_get(config, key)
        if sub is not None and not _is_mock(sub) and (pos_int(cfg_get(sub, "num_hidden_layers"))
                                                        or pos_int(cfg_get(sub, "n_layer"))):
            return sub
    return config


def as_dict(config: Any, depth: int = 0) -> dict | None:
    """A config object as a plain dict (dicts, dataclasses, ``SimpleNamespace`` and plain objects;
    nested configs too). ``None`` for anything else (a mock, a number)."""
    if depth > 4 or config is None or _is_mock(config):
        return None
    if isinstance(config, dict):
        out = dict(config)
    elif dataclasses.is_dataclass(config) and not isinstance(config, type):
        out = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    elif hasattr(config, "to_dict") and callable(config.to_dict):
        try:
            out = dict(config.to_dict())
        except Exception:  # noqa: BLE001
            return None
    else:
        out = {}
        for k in dir(config):
            if k.startswith("_"):
                continue
            try:
                v = getattr(config, k)
            except Exception:  # noqa: BLE001
                continue
            if callable(v) and not (dataclasses.is_dataclass(v) or hasattr(v, "__dict__")):
                continue
            if callable(v) and isinstance(v, type):
                continue
            out[k] = v
        if not out:
            return None
    for k, v in list(out.items()):
        if _is_mock(v):
            del out[k]
        elif not isinstance(v, (str, int, float, bool, list, tuple, dict, type(None))):
            sub = as_dict(v, depth + 1)
            if sub is None:
                del out[k]
            else:
                out[k] = sub
    return out


@dataclasses.dataclass(frozen=True)
class Dims:
    """The seed's dimensions of a config (``None`` where the config does not say)."""

    num_layers: int | None
    num_kv_heads: int | None
    num_attention_heads: int | None
    head_dim: int | None
    hidden_size: int | None
    intermediate_size: int | None


def dims(config: Any) -> Dims:
    """Layer count, head counts and widths as oMLX reads them (``n_layer`` / ``n_head`` / ``n_embd``
    aliases; head_dim from hidden_size / heads only when the config has no head_dim)."""
    c = language_config(config)
    layers = cfg_get(c, "num_hidden_layers") or cfg_get(c, "n_layer")
    n_q = cfg_get(c, "num_attention_heads") or cfg_get(c, "n_head")
    n_kv = cfg_get(c, "num_key_value_heads") or n_q
    hidden = cfg_get(c, "hidden_size") or cfg_get(c, "n_embd")
    hd = cfg_get(c, "head_dim")
    if not pos_int(hd) and pos_int(hidden) and pos_int(n_q or n_kv):
        hd = hidden // (n_q or n_kv)
    inter = cfg_get(c, "intermediate_size")

    def ok(v):
        return v if pos_int(v) else None

    return Dims(ok(layers), ok(n_kv), ok(n_q) or ok(n_kv), ok(hd), ok(hidden), ok(inter))


def _walk(c: Any, out: dict) -> None:
    inner = getattr(c, "caches", None)
    if isinstance(inner, (list, tuple)):  # CacheList (mlx-lm / mlx-vlm): every member is a cache of the layer
        for x in inner:
            _walk(x, out)
        return
    name = type(c).__name__
    size = getattr(c, "max_size", None)
    if (pos_int(size) and hasattr(c, "keep")) or name in _ROTATING_NAMES:
        if pos_int(size):
            out["windows"][size] += 1
        return
    if name in _STATE_NAMES or (isinstance(getattr(c, "cache", None), list) and not hasattr(c, "keys")):
        out["state"] += 1
        return
    if name.endswith("KVCache") or (hasattr(c, "keys") and hasattr(c, "offset")):
        out["full"] += 1


def collect_kv_layer_specs(cache_list: Any) -> tuple[int, list[tuple[int, int]], int]:
    """Classify ``model.make_cache()`` into ``(full_kv_caches, [(count, window), ...], state_caches)``.

    Full caches are the ones that grow with the prompt (``KVCache`` and its quantized / batched / oMLX
    variants: any class named ``*KVCache`` that is not rotating); a ``CacheList`` counts every member (a
    DSA layer's indexer cache is a second full cache), so the first number can exceed the layer count.
    Rotating caches are recognised by a positive ``max_size`` and a ``keep`` (or their class name) and
    grouped by window, smallest first. Anything unreadable gives ``(0, [], 0)``: the caller keeps its own
    layer count."""
    if cache_list is None or _is_mock(cache_list):
        return 0, [], 0
    out = {"full": 0, "state": 0, "windows": Counter()}
    try:
        for c in cache_list:
            _walk(c, out)
    except Exception:  # noqa: BLE001 - a cache list we cannot walk: no classification
        return 0, [], 0
    return out["full"], [(n, w) for w, n in sorted(out["windows"].items())], out["state"]


@lru_cache(maxsize=1)
def installed_mlx_lm() -> tuple[int, ...] | None:
    """The installed mlx-lm's version as a tuple (``None`` when it is not installed)."""
    try:
        from importlib.metadata import PackageNotFoundError, version

        v = version("mlx-lm")
    except (ImportError, PackageNotFoundError, ValueError):
        return None
    parts = []
    for x in v.split(".")[:3]:
        digits = "".join(ch for ch in x if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts) or None


def dsa_indexer_row_elements(index_head_dim: int, mlx_lm_version: tuple[int, ...] | None = None) -> int:
    """Elements per token of one DSA indexer cache. mlx-lm 0.31.x stores the indexer keys with
    zero-width values; 0.32.x stores ``values = zeros_like(keys)`` (as wide as the keys). Follows the
    installed mlx-lm; without one, the wider layout (the safe side)."""
    v = installed_mlx_lm() if mlx_lm_version is None else mlx_lm_version
    if v is not None and v < (0, 32):
        return index_head_dim
    return 2 * index_head_dim


def mla_kv_bytes_per_token(config: Any, cache_list: Any, dtype_size: float,
                           mlx_lm_version: tuple[int, ...] | None = None) -> float | None:
    """Resident bytes per token of an MLA model's caches: every layer's latent cache (``kv_lora_rank``
    keys + ``qk_rope_head_dim`` values, one head) and, on DSA layers (a ``CacheList`` of two), the indexer
    cache (``dsa_indexer_row_elements``). Layers are counted from the cache objects. ``None`` when the
    config is not MLA or the caches cannot be read."""
    c = language_config(config)
    rank, rope = cfg_get(c, "kv_lora_rank"), cfg_get(c, "qk_rope_head_dim")
    if not (pos_int(rank) and pos_int(rope)) or cache_list is None or _is_mock(cache_list):
        return None
    main = idx = 0
    try:
        for layer in cache_list:
            inner = getattr(layer, "caches", None)
            if inner is None:
                main += 1  # a bare KVCache holding the latent
                continue
            if len(inner) >= 1:
                main += 1
            if len(inner) >= 2:
                idx += 1
    except Exception:  # noqa: BLE001
        return None
    if main <= 0:
        return None
    ih = cfg_get(c, "index_head_dim", 0)
    ih = ih if pos_int(ih) else 0
    per = main * (rank + rope) + idx * (dsa_indexer_row_elements(ih, mlx_lm_version) if ih else 0)
    return float(per) * float(dtype_size)


def model_dtype_size(model: Any) -> int:
    """Bytes per element of the model's compute dtype (``model.dtype``: fp32 4, else 2)."""
    dt = getattr(model, "dtype", None)
    if dt is None or _is_mock(dt):
        return 2
    return 4 if "float32" in str(dt) else 2


__all__ = ["Dims", "as_dict", "cfg_get", "collect_kv_layer_specs", "dims", "dsa_indexer_row_elements",
           "installed_mlx_lm", "language_config", "mla_kv_bytes_per_token", "model_config", "model_dtype_size",
           "pos_int"]
