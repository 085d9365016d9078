"""Element sizes of the dtypes that appear in MLX caches.

Cached K/V take the *activation* dtype (the dtype handed to ``update_and_fetch``), which for an mlx-lm
model is the dtype its weights were cast to; recurrent states are often fp32 whatever the model dtype
(gated-DeltaNet, Mamba2 SSM state), which profiles declare per tensor.
"""
from __future__ import annotations

DTYPE_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp32": 4}


def check_dtype(dtype: object, default: str) -> str:
    """The activation dtype an API caller asked for: ``None`` means ``default`` (the profile's), anything
    else must be one of ``DTYPE_BYTES``' names. One check for every entry point: ``dtype or default`` took
    ``""`` as "not given" (silently the profile's), a list raised ``TypeError: unhashable type`` and an
    unknown name a ``KeyError`` from the fast path (hostile pass 6)."""
    dt = default if dtype is None else dtype
    if type(dt) is str and dt in DTYPE_BYTES:
        return dt
    from ..errors import InputError

    raise InputError(f"dtype must be one of {sorted(DTYPE_BYTES)} or None, got {type(dt).__name__} {dt!r:.40}")

# Spellings met in config.json (torch_dtype / dtype) and on the command line.
_ALIASES = {
    "bf16": "bf16", "bfloat16": "bf16", "torch.bfloat16": "bf16",
    "fp16": "fp16", "float16": "fp16", "half": "fp16", "torch.float16": "fp16",
    "fp32": "fp32", "float32": "fp32", "float": "fp32", "torch.float32": "fp32",
}


def normalize_dtype(name: object) -> str | None:
    """Return ``bf16``/``fp16``/``fp32`` for a known spelling (config.json, the CLI, MLX's
    ``str(array.dtype)``: ``mlx.core.bfloat16``), else ``None``."""
    if not isinstance(name, str):
        return None
    return _ALIASES.get(name.strip().lower().removeprefix("mlx.core."))


def short_dtype(name: str) -> str:
    """``normalize_dtype(name)``, or the name itself for a dtype outside the three (``int8``, ``uint32``):
    how probe reports and verification name what they saw."""
    return normalize_dtype(name) or name
