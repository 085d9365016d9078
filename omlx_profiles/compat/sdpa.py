"""One attention call, as oMLX's module priced it: oMLX's SDPA names and the single-call estimates.

The prefill estimates never use these (they charge whole calls: every layer in flight, masks, KV copies);
oMLX's code and tests still import them, and ``register_tiled_prefill_head_dim`` is how oMLX tells the
kernel table about its tiled sdpa256 patch.
"""
from __future__ import annotations

from typing import Any

from ..units import DTYPE_BYTES
from ..peak import kernels as _routes
from ..units import check_count

# oMLX's module-level names its own code and tests import (kept with the values oMLX 70fa3482 had; the
# facade does not use them: its kernel routes come from profiles/kernels per backend and MLX version)
_SDPA_VECTOR_QUERY_TOKEN_THRESHOLD = 8
_SDPA_FULL_SUPPORTED_HEAD_DIMS = frozenset({64, 80, 128})
_SDPA_VECTOR_SUPPORTED_HEAD_DIMS = frozenset({64, 96, 128, 256})
_SDPA_FALLBACK_SCORE_DTYPE_SIZE = 2


def register_tiled_prefill_head_dim(head_dim: int, *, min_kv_len: int = 8192, kv_tile: int = 1024,
                                    **_route_options: Any) -> None:
    """Register a head_dim whose long-context prefill runs an O(L) tiled kernel (oMLX's sdpa256 patch):
    the estimate then charges one ``n_q x qL x kv_tile`` score tile instead of the score matrix. Call it in
    lockstep with installing the kernel route. Differs from oMLX 70fa3482: the minimum kv length is kept per
    head_dim (oMLX overwrote one global threshold for all), and precomputed estimates are refreshed. Newer
    oMLX's extra route options (``min_query_len``, ``supports_array_mask``) are accepted."""
    _routes.register_tiled(head_dim, min_kv_len=min_kv_len, kv_tile=kv_tile)


def estimate_unfused_sdpa_call_bytes(n_q_heads: int, query_tokens: int, kv_len: int, head_dim: int,
                                     score_dtype_size: float = 2) -> int:
    """Transient bytes of ONE SDPA call taking MLX's unfused fallback: the score matrix
    ``n_q x qL x kL`` (where/softmax reuse it: one buffer), the scaled q and the output, all in the compute
    dtype. Differs from oMLX: the output is in the compute dtype (oMLX charged fp32) and the scaled q copy
    is counted; a "causal" mask adds ``qL x kL`` bytes (bool), charged by the full model."""
    # oMLX's callers pass model numbers: a bad one is a ValueError naming it (a negative head count gave a
    # negative byte count, a string a TypeError from the arithmetic, 2**80 a 31-digit answer)
    n_q_heads = check_count("n_q_heads", n_q_heads, minimum=1, maximum=2**31 - 1)
    query_tokens = check_count("query_tokens", query_tokens)
    kv_len = check_count("kv_len", kv_len)
    head_dim = check_count("head_dim", head_dim, minimum=1, maximum=2**31 - 1)
    if isinstance(score_dtype_size, bool) or not isinstance(score_dtype_size, (int, float)) or not 0 < score_dtype_size <= 8:
        raise ValueError(f"estimate_unfused_sdpa_call_bytes: score_dtype_size must be a positive number (at most 8), "
                         f"got {score_dtype_size!r}")
    s = score_dtype_size
    return int(n_q_heads * query_tokens * kv_len * s + 2 * n_q_heads * query_tokens * head_dim * s)


def sdpa_activation_bytes(p, routes: Any, n_q: int, n_kv: int, head_dim: int, query_tokens: int, kv_len: int) -> int:
    """ONE attention call of profile ``p`` alone, as the kernel table ``routes`` routes it: the output (fused /
    vector kernels), plus one score tile (a registered tiled kernel), or the unfused fallback's score
    matrix, scaled q and output (``estimate_unfused_sdpa_call_bytes``), all in the compute dtype."""
    act = DTYPE_BYTES[p.dtype]
    hd = head_dim
    q, kv = int(query_tokens), max(int(kv_len), int(query_tokens))
    call = _routes.SdpaCall(n_q, n_kv, hd, hd, q, kv, mask="causal" if q > 1 else "none", dtype=p.dtype)
    d = routes.route(call, _routes.tiled_state()[1])
    out = n_q * q * hd * act
    if d.route in ("fused", "vector"):
        return out
    if d.route == "tiled":
        return out + n_q * q * min(d.kv_tile or kv, kv) * act
    return estimate_unfused_sdpa_call_bytes(n_q, q, kv, hd, act)
