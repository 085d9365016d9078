"""The plain values every layer takes and gives: byte sizes, token counts, counts and flags, dtype names.

One layer, three modules with one job each (the structure review's "units + dtypes + validation -> units"):
``sizes`` (``64GiB`` / ``32k`` in, ``1.50 GiB`` / ``32k`` out, and the ``MAX_BYTES`` / ``MAX_TOKENS`` limits),
``counts`` (an API argument is an integer in range or a bool, else an ``InputError`` naming it) and ``dtypes``
(element sizes and spellings of the activation dtypes). They sit just above ``errors`` and import nothing
else of the package, so every layer may import them; callers import from ``omlx_profiles.units``.
"""
from __future__ import annotations

from .counts import MAX_COUNT, check_count, check_flag
from .dtypes import DTYPE_BYTES, check_dtype, normalize_dtype, short_dtype
from .sizes import MAX_BYTES, MAX_TOKENS, format_bytes, format_tokens, parse_size, parse_tokens

__all__ = [
    "MAX_BYTES", "MAX_COUNT", "MAX_TOKENS", "DTYPE_BYTES",
    "check_count", "check_dtype", "check_flag", "format_bytes", "format_tokens", "normalize_dtype",
    "parse_size", "parse_tokens", "short_dtype",
]
