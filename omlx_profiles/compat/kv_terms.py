"""The facade's KV arithmetic: what oMLX's KV questions (bytes per block, per prompt, resident during a
prefill, a TurboQuant cache's conversion) come to for a profile, on top of ``kv.bytes.kv_report``.

Functions of the profile and the monitor's two width factors, so that ``MemoryMonitor`` only chooses which
to ask: ``kv_scale`` (the full-attention caches stored wider than the activations, or an exact MLA
per-token width) and ``store_scale`` (a narrower, TurboQuant, width the stored blocks keep).
"""
from __future__ import annotations

from typing import Any

from ..units import DTYPE_BYTES
from ..kv.bytes import kv_report
from ..kv.replay import kv_capacity_fast
from ..peak.replay import KV_SCALED_KINDS, kv_split, scale_up, scaled_total
from .read import mla_kv_bytes_per_token


def _act(p) -> int:
    return DTYPE_BYTES[p.dtype]


def step_rows(tokens: int) -> int:
    """Rows a ``KVCache`` holds after ``tokens``: mlx-lm allocates in steps of 256 (measured: the live caches
    of every family agree, tests/test_kv_live.py); oMLX's per-token override counted ``tokens``."""
    return kv_capacity_fast(int(tokens), "direct", 1)


def estimate_mla_kv_bytes_per_token(config: Any, cache_list: Any, dtype_size: float) -> float | None:
    """Resident KV bytes per token of an MLA model (latent ``kv_lora_rank`` keys + ``qk_rope_head_dim``
    values, one head) with, on DSA layers (a CacheList of two), the indexer cache. The indexer's value
    width follows the installed mlx-lm (0.31.x: zero-width values; 0.32.x: values as wide as the keys;
    none installed: the wider); layers are counted from the cache objects as oMLX did."""
    return mla_kv_bytes_per_token(config, cache_list, dtype_size)


def kv_widths(p, dtype_size: float, kv_bytes_per_token: float | None, layer_scale: float) -> tuple[float, float]:
    """``(kv_scale, store_scale)`` for KV caches stored at ``dtype_size`` bytes per element (or exactly
    ``kv_bytes_per_token``), ``layer_scale`` times as many full caches as the profile has layers for."""
    act = _act(p)
    full_row = sum(e.row_elements for n in p.layer_names for e in p.layer_types[n].entries
                   if e.kind in KV_SCALED_KINDS) * act
    if kv_bytes_per_token is not None and full_row:
        scale = kv_bytes_per_token / full_row
    else:
        # a KV stored wider than the activations is wider throughout; a narrower one (TurboQuant) is not:
        # oMLX prefills a fresh request at the model's width and quantizes the cache once at the end
        # (scheduler.py, "Fresh TurboQuant requests run fp16 during the cold prefill loop")
        scale = max(dtype_size / act, 1.0) * layer_scale
    return scale, min(dtype_size / act, 1.0)  # the second: what a converted (TurboQuant) cache keeps


def block_bytes_per_token(p, kv_scale: float, store_scale: float) -> float:
    """Bytes one token of a stored block takes: full-attention caches at the stored KV width, sliding and
    chunked layers at full width (a block is stored whole), states not at all (they are not per token)."""
    act = _act(p)
    per = 0.0
    for n in p.layer_names:
        for e in p.layer_types[n].entries:
            if e.kind in KV_SCALED_KINDS:
                per += e.row_elements * act * kv_scale * store_scale
            elif e.kind in ("sliding", "chunked"):
                per += e.row_elements * act
    return per


def scaled_kv(p, tokens: int, kv_scale: float, chunk: int = 2048) -> int:
    """Resident KV after ``tokens`` (prefill chunks of ``chunk``), full-attention caches at ``kv_scale``."""
    rep = kv_report(p, int(tokens), chunk=chunk)
    return rep.total if kv_scale == 1.0 else scaled_total(p, rep, kv_scale)


def resident_kv(p, n: int, chunk: int, kv_scale: float, fixed_state_bytes: int) -> int:
    """The most KV a prefill of ``n`` tokens in chunks of ``chunk`` holds at once: full caches at mlx-lm's
    256-row capacity (at ``kv_scale``), sliding windows at ``window - 1 + chunk`` rows (a RotatingKVCache
    concatenates the chunk before trimming), recurrent state as the larger of the profile's state caches
    and ``fixed_state_bytes`` (oMLX's measured states: never both)."""
    act = _act(p)
    rep = kv_report(p, n, chunk=chunk)
    scaled = other = state = 0
    for lb in rep.layers:
        for e, x in zip(p.layer_types[lb.kind].entries, lb.entries):
            if e.kind in KV_SCALED_KINDS:
                scaled += x.nbytes
            elif e.kind == "sliding":
                during = min(n, e.window - 1 + min(chunk, n)) * e.row_elements * act
                other += max(x.nbytes, during)
            elif e.kind == "state":
                state += x.nbytes
            else:
                other += x.nbytes
    return scale_up(scaled, kv_scale) + other + max(state, fixed_state_bytes)


def kv_parts(p, tokens: int, chunk: int, kv_scale: float) -> tuple[int, int]:
    """(full-attention caches at their prefill width, every other cache) after ``tokens``."""
    full, other = kv_split(p, kv_report(p, int(tokens), chunk=chunk))
    return scale_up(full, kv_scale), other


def turboquant_peak(p, peak: int, new: int, chunk: int, cached: int, *, kv_scale: float, store_scale: float,
                    n_q: int, n_kv: int, head_dim: int) -> int:
    """The prefill peak when the KV is kept at a fractional width (oMLX's TurboQuant), from oMLX's and
    mlx-vlm's source (a bound: nothing here was measured).

    * A fresh request (no cached prefix) is prefilled at the model's width -- ``peak`` -- and its
      cache then converted whole (``TurboQuantKVCache.from_cache`` per layer): the full-width cache and
      its quantized copy can be alive together, so the peak is at least both.
    * A restored TurboQuant prefix stays quantized while the suffix is prefilled; mlx-vlm's attention
      over it either materializes fp32 scores (``prefill_attention``: ``[n_q, qL, kL]``, masked and
      softmaxed: three such buffers) or dequantizes the keys and values to fp32 and casts them to the
      activation dtype (``dequantize``): the larger of the two is added for the layer in flight. The
      rows the suffix adds stay charged at the model's width (the safe side)."""
    if cached == 0:
        full, other = kv_parts(p, new, chunk, kv_scale)
        return max(peak, full + other + scale_up(full, store_scale))
    act = _act(p)
    q, kl = min(chunk, new), cached + new
    scores = 3 * n_q * q * kl * 4
    dequant = 2 * n_kv * kl * head_dim * (4 + act)
    return peak + max(scores, dequant)
