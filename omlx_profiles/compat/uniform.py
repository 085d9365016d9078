"""oMLX's ``set_model_info`` numbers, checked, and the uniform profile built from them.

oMLX describes a model by a handful of numbers (layers, KV heads, head_dim, the rotating layers' windows);
the estimator needs a ``Profile``. This module is that translation and nothing else: what the numbers cannot
tell (the MLP width) is not invented: a profile without ``intermediate_size`` charges attention only.
"""
from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple, Optional

from .read import pos_int


class UniformModel(NamedTuple):
    """The profile ``set_model_info``'s numbers describe, and the two numbers oMLX keeps beside it."""

    profile: Any  # omlx_profiles.registry.profile.Profile
    layer_scale: float  # more KV caches declared than layers can hold (DSA's CacheList): their ratio
    kv_cache_layers: int  # the KV caches oMLX declared (what it reads back as ``_num_kv_cache_layers``)


#: Bounds on oMLX's numbers, the config reader's own (mlxlm.config): a layer count of 2**31 built a list
#: of 2**31 layers (a hang, then MemoryError), 2**80 an OverflowError; a width above 2**31 - 1 is no MLX
#: shape; no dtype is wider than 8 bytes.
MAX_WIDTH = 2**31 - 1
MAX_ELEMENT_BYTES = 8


def _positive_number(name: str, v: Any, *, allow_none: bool = True, maximum: float = MAX_ELEMENT_BYTES,
                     where: str = "set_model_info") -> None:
    if v is None and allow_none:
        return
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 < v <= maximum):
        raise ValueError(f"{where}: {name} must be a positive number (at most {maximum:,}), got {v!r}")


def check_dims(where: str, maximum: dict | None = None, **dims: Any) -> None:
    """Each given (not None) dimension is a positive integer within its bound; ``ValueError`` naming it."""
    from ..mlxlm.config import MAX_LAYERS

    for name, v in dims.items():
        if v is None:
            continue
        top = (maximum or {}).get(name, MAX_LAYERS if name == "num_layers" else MAX_WIDTH)
        if not pos_int(v) or v > top:
            raise ValueError(f"{where}: {name} must be a positive integer (at most {top:,}), got {v!r}")


def _dtype_name(size: float | None) -> str:
    return "fp32" if size and size >= 4 else "bf16"


def check_model_info(num_layers: Any, num_kv_heads: Any, head_dim: Any, *, dtype_size: Any,
                     num_attention_heads: Any, num_kv_cache_layers: Any, compute_dtype_size: Any,
                     kv_bytes_per_token: Any, rotating_layer_specs: Any, ane_prefill_transient_bytes: Any,
                     hidden_size: Any, intermediate_size: Any) -> list[tuple[int, int]]:
    """``ValueError`` naming the first bad argument (oMLX took anything; a bad number here is an error, never a
    silent 0); else the ``(count, window)`` rotating groups that are usable (non-positive ones are dropped,
    as oMLX ignored them)."""
    for name, v in (("num_layers", num_layers), ("num_kv_heads", num_kv_heads), ("head_dim", head_dim)):
        if v is None:
            raise ValueError(f"set_model_info: {name} must be a positive integer, got None")
    check_dims("set_model_info", num_layers=num_layers, num_kv_heads=num_kv_heads, head_dim=head_dim,
               num_attention_heads=num_attention_heads, hidden_size=hidden_size, intermediate_size=intermediate_size)
    if num_kv_cache_layers is not None and (isinstance(num_kv_cache_layers, bool)
                                            or not isinstance(num_kv_cache_layers, int)
                                            or not 0 <= num_kv_cache_layers <= 4 * num_layers):
        raise ValueError(f"set_model_info: num_kv_cache_layers must be an integer from 0 to 4 x num_layers or None, "
                         f"got {num_kv_cache_layers!r}")
    _positive_number("dtype_size", dtype_size, allow_none=False)
    _positive_number("compute_dtype_size", compute_dtype_size)
    _positive_number("kv_bytes_per_token", kv_bytes_per_token, maximum=float(1 << 40))
    rot: list[tuple[int, int]] = []
    for spec in rotating_layer_specs or ():
        try:
            count, window = spec
        except (TypeError, ValueError):
            raise ValueError(f"set_model_info: rotating_layer_specs entries are (count, window), got {spec!r}")
        if pos_int(count) and pos_int(window):
            rot.append((int(count), int(window)))
    ane = ane_prefill_transient_bytes
    if isinstance(ane, bool) or not isinstance(ane, int) or not 0 <= ane <= 1 << 50:
        raise ValueError(f"set_model_info: ane_prefill_transient_bytes must be an integer from 0 to 2**50, got {ane!r}")
    return rot


def uniform_profile(num_layers: int, num_kv_heads: int, head_dim: int, *, n_q: int, act: float,
                    rot: list[tuple[int, int]], num_kv_cache_layers: Optional[int], hidden_size: Optional[int],
                    intermediate_size: Optional[int]) -> UniformModel:
    """The profile of a model with ``num_kv_cache_layers`` KVCache layers (default: every layer not
    rotating), the ``rot`` groups' RotatingKVCache layers, the rest without a cache: a plain decoder stack
    (the index's ``plain_decoder`` module: attention + MLP, no compute traits) with these heads and widths,
    in the compute dtype ``act`` (bytes). oMLX's numbers name no model type, so none is guessed."""
    from ..mlxlm.model_types import PLAIN_DECODER
    from ..registry.profile import Profile
    from ..schema.family import CompleteVariant

    n_rot = min(sum(c for c, _ in rot), num_layers)
    wanted_full = num_layers - n_rot if num_kv_cache_layers is None else num_kv_cache_layers
    room = num_layers - n_rot
    n_full = min(wanted_full, room)
    layer_scale = wanted_full / n_full if n_full and wanted_full > n_full else 1.0
    if wanted_full and not n_full:  # KV caches declared but every layer is rotating: the first ones
        n_full = min(wanted_full, num_layers)
        n_rot = num_layers - n_full
    kinds: dict[str, dict] = {"full": {"kind": "full"}, "none": {"kind": "none"}}
    types = ["full"] * n_full
    left = n_rot
    for i, (count, window) in enumerate(rot):
        take = min(count, left)
        if take <= 0:
            break
        kinds[f"sliding{i}"] = {"kind": "sliding", "window": window}
        types += [f"sliding{i}"] * take
        left -= take
    types += ["none"] * (num_layers - len(types))
    v = CompleteVariant.model_validate({
        "mlx_model_type": PLAIN_DECODER, "num_layers": num_layers, "dtype": _dtype_name(act),
        "num_heads": n_q, "num_kv_heads": num_kv_heads, "head_dim": head_dim,
        "hidden_size": hidden_size or n_q * head_dim,
        **({"intermediate_size": intermediate_size} if intermediate_size else {}),
        "layers": {"kinds": {k: v for k, v in kinds.items() if k in types}, "types": types},
    })
    prof = Profile.from_variant(v, name="set_model_info", family="seed", source="set_model_info()")
    if not intermediate_size:
        # no MLP width known: charge attention only (say so instead of inventing a width)
        prof = dataclasses.replace(prof, intermediate_size=1)
    return UniformModel(prof, layer_scale, wanted_full)


def omlx_numbers(p) -> tuple[int, tuple[tuple[int, int], ...]]:
    """The other way round: a profile's ``(num_kv_cache_layers, rotating_layer_specs)`` as oMLX keeps them
    (layers whose first cache is full, latent or chunked; ``(count, window)`` per sliding window)."""
    kinds = [p.layer_types[n].entries[0].kind for n in p.layer_names]
    kv_layers = sum(1 for k in kinds if k in ("full", "latent", "chunked"))
    wins: dict[int, int] = {}
    for n in p.layer_names:
        for e in p.layer_types[n].entries:
            if e.kind == "sliding":
                wins[e.window] = wins.get(e.window, 0) + 1
    return kv_layers, tuple((c, w) for w, c in sorted(wins.items()))
