"""Resident cache bytes after a prompt: ``sum(c.nbytes for c in cache)`` of the live mlx-lm model.

Per cache entry: rows (from ``rows.py``) times bytes per row, or a constant for state caches. The
bytes per row are the activation dtype's size times ``n_kv * (k_width + v_width)``, or, once
``generate_step(kv_bits=...)`` has converted a ``KVCache`` to ``QuantizedKVCache``, the packed
values plus one fp16/bf16 scale and bias per group, for keys and values separately; mlx-lm converts
the whole *capacity* (zero rows beyond the offset included), so the rows are unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError, UnsupportedError
from ..registry.profile import CacheEntry, Profile
from .replay import SCHEDULES, calls_for, chunked_rows, kv_capacity, kv_capacity_fast, rotating_rows
from ..units import DTYPE_BYTES, check_dtype
from ..quantization import QUANT_BITS  # MLX's quantize bits: one list, for the KV and the weights
from ..units import MAX_TOKENS
from ..units import check_count

DEFAULT_QUANTIZED_KV_START = 5000  # mlx_lm.generate.DEFAULT_QUANTIZED_KV_START


@dataclass(frozen=True)
class KVQuant:
    """``generate_step(kv_bits, kv_group_size, quantized_kv_start)``."""

    bits: int
    group_size: int = 64
    start: int = DEFAULT_QUANTIZED_KV_START

    def __post_init__(self):
        object.__setattr__(self, "bits", check_count("kv_bits", self.bits, minimum=1))
        object.__setattr__(self, "group_size", check_count("kv_group_size", self.group_size, minimum=1))
        # a token count: 0 .. 2^30 as the CLI's --kv-start (it refused 0 and the API took 2^40: hostile pass 8)
        object.__setattr__(self, "start", check_count("quantized_kv_start", self.start, minimum=0, maximum=MAX_TOKENS))
        if self.bits not in QUANT_BITS:
            raise InputError(f"kv_bits must be one of {QUANT_BITS}, got {self.bits}")
        if self.group_size not in (32, 64, 128):
            raise InputError(f"kv_group_size must be 32, 64 or 128 (mx.quantize), got {self.group_size}")

    def width_bytes(self, width: int, act_bytes: int) -> int:
        """Bytes of one quantized row of one head: packed uint32 words + scales + biases."""
        if width % self.group_size:
            raise UnsupportedError(
                f"head width {width} is not divisible by kv_group_size {self.group_size} "
                "(mx.quantize raises)"
            )
        if (width * self.bits) % 32:
            raise UnsupportedError(f"head width {width} at {self.bits} bits does not pack into uint32")
        return width * self.bits // 8 + 2 * (width // self.group_size) * act_bytes


@dataclass(frozen=True)
class EntryBytes:
    kind: str
    rows: int
    nbytes: int
    quantized: bool = False


@dataclass(frozen=True)
class LayerBytes:
    index: int
    kind: str  # the profile's layer-kind name
    nbytes: int
    entries: tuple[EntryBytes, ...]


@dataclass(frozen=True)
class KVReport:
    tokens: int
    schedule: str
    chunk: int
    dtype: str
    quant: KVQuant | None
    total: int
    layers: tuple[LayerBytes, ...]


def check_schedule(schedule: str, chunk: int) -> int:
    """The chunk, checked (a plain ``int``: what the arithmetic uses), for a known schedule."""
    if schedule not in SCHEDULES:
        raise InputError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    return check_count("chunk", chunk, minimum=1)


def entry_bytes(e: CacheEntry, calls: list[int], tokens: int, schedule: str, act: int, quant: KVQuant | None) -> EntryBytes:
    """Bytes of one cache entry after the calls."""
    if e.kind == "none" or not calls:
        return EntryBytes(e.kind, 0, 0)
    if e.kind == "state":
        return EntryBytes(e.kind, 0, e.state_bytes(act))
    if e.kind == "sliding":
        rows = rotating_rows(calls, e.window, e.keep)
    elif e.kind == "chunked":
        rows = chunked_rows(calls, e.chunk)
    elif schedule == "direct":
        rows = kv_capacity_fast(tokens, schedule, 1)
    else:
        rows = kv_capacity(calls)
    converted = quant is not None and schedule == "generate" and not e.in_list and tokens >= quant.start
    if converted and e.kind == "sliding":
        raise UnsupportedError(
            "kv_bits with a sliding-window layer: mlx-lm's RotatingKVCache.to_quantized raises "
            f"NotImplementedError once the offset reaches quantized_kv_start ({quant.start})"
        )
    if converted and e.kind == "latent":
        raise UnsupportedError(
            "kv_bits with MLA latent caches: mlx-lm 0.32 converts them and then crashes in attention "
            "('list' object has no attribute 'swapaxes')"
        )
    if converted and e.kind == "full":
        per_row = e.n_kv * (quant.width_bytes(e.k_width, act) + quant.width_bytes(e.v_width, act))
        return EntryBytes(e.kind, rows, rows * per_row, True)
    # ChunkedKVCache, CacheList members and ArraysCache have no to_quantized: they stay unquantized.
    return EntryBytes(e.kind, rows, rows * e.row_elements * act)


def kv_report(
    profile: Profile,
    tokens: int,
    *,
    schedule: str = "generate",
    chunk: int = 2048,
    dtype: str | None = None,
    quant: KVQuant | None = None,
) -> KVReport:
    """Per-layer resident cache bytes after ``tokens`` prompt tokens went through ``schedule``."""
    tokens = check_count("tokens", tokens, minimum=0, maximum=MAX_TOKENS)  # the token limit everywhere (units)
    chunk = check_schedule(schedule, chunk)
    if not isinstance(profile, Profile):
        raise InputError(f"profile must be a Profile, got {type(profile).__name__}")
    dt = check_dtype(dtype, profile.dtype)
    if quant is not None and not isinstance(quant, KVQuant):
        raise InputError(f"quant must be a KVQuant or None, got {type(quant).__name__}")
    if quant is not None and schedule != "generate":
        raise InputError("kv quantization happens inside generate_step: use schedule 'generate'")
    if quant is not None and profile.kv_bits_fails and tokens >= quant.start:
        raise UnsupportedError(f"unsupported: kv_bits with {profile.name}: {profile.kv_bits_fails}")
    act = DTYPE_BYTES[dt]
    calls = calls_for(tokens, schedule, chunk)
    per_type = {
        name: tuple(entry_bytes(e, calls, tokens, schedule, act, quant) for e in lt.entries)
        for name, lt in profile.layer_types.items()
    }
    layers = tuple(
        LayerBytes(i, name, sum(x.nbytes for x in per_type[name]), per_type[name])
        for i, name in enumerate(profile.layer_names)
    )
    return KVReport(tokens, schedule, chunk, dt, quant, sum(l.nbytes for l in layers), layers)


def kv_bytes(profile: Profile, tokens: int, **kw) -> int:
    return kv_report(profile, tokens, **kw).total
