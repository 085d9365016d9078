"""``MemoryMonitor``: oMLX's memory monitor, its estimates answered by the profile estimator.

The estimating half of oMLX's class (its memory plumbing is ``seed.SeedMonitor``): model info in (a profile,
or oMLX's numbers through ``uniform``), bytes out (``kv_terms`` for the KV questions, ``peak.fast.FastPeak``
for the prefill peak, ``sdpa`` for one attention call). The package docstring (``omlx_profiles.compat``)
says how each answer differs from oMLX's and why.
"""
from __future__ import annotations

import logging
import math
from typing import Any, Optional

from ..units import DTYPE_BYTES
from ..errors import InputError, OmlxProfilesError
from ..peak import kernels as _routes
from ..peak.envelope import MonotonePeak
from ..peak.fast import FastPeak
from ..units import format_bytes
from ..units import MAX_BYTES, MAX_TOKENS
from ..units import check_count
from .kv_terms import block_bytes_per_token, kv_widths, resident_kv, scaled_kv, step_rows, turboquant_peak
from .sdpa import sdpa_activation_bytes
from .seed import SeedMonitor, default_backend
from .seed import mlx_version as mlx_version_running
from .uniform import _positive_number, check_dims, check_model_info, omlx_numbers, uniform_profile

# the facade's one logger, named as the module oMLX swapped in (its log configuration names it)
logger = logging.getLogger(__package__)


#: Token counts the facade answers: the CLI's limit (units.MAX_TOKENS, 2**30). A 2**31-token prefix was
#: replayed for 3.4 s of CPU and then answered 0 ("unknown": the guard let it through).
TOKENS = MAX_TOKENS


def _counts(new_tokens, chunk_size, cached_tokens) -> tuple[int, int, int]:
    """oMLX took anything; a bad count here is an error naming the argument (never a silent 0). The prompt in
    all (``new_tokens + cached_tokens``) stops at the token limit too, as the CLI's ``--tokens`` and the API's
    ``Request.tokens`` do (2^30 cached and 4,096 new answered 147 TB: hostile pass 8)."""
    out = (check_count("new_tokens", new_tokens, maximum=TOKENS),
           check_count("chunk_size", chunk_size, minimum=1, maximum=TOKENS),
           check_count("cached_tokens", cached_tokens, maximum=TOKENS))
    if out[0] + out[2] > TOKENS:
        raise InputError(f"new_tokens + cached_tokens must be <= {TOKENS}, got {out[0]} + {out[2]}")
    return out


def _real(v: object) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)


def _check_construction(max_kv_cache_memory, check_interval, eviction_enabled, max_memory) -> None:
    """``ValueError`` naming the argument, as oMLX's own check of ``max_kv_cache_memory`` does: the seed took a
    NaN or infinite limit (``max_kv_cache=nan PiB``), a string (``TypeError`` from a comparison), a negative
    ``max_memory`` or a NaN ``check_interval`` (every check then re-read the memory, or none did)."""
    if max_kv_cache_memory is not None and not (_real(max_kv_cache_memory) and 0 <= max_kv_cache_memory <= MAX_BYTES):
        raise ValueError(f"max_kv_cache_memory must be a number of bytes from 0 to {MAX_BYTES:,} or None, "
                         f"got {max_kv_cache_memory!r:.40}")
    if not (_real(check_interval) and check_interval >= 0):
        raise ValueError(f"check_interval must be a finite number of seconds >= 0, got {check_interval!r:.40}")
    if not isinstance(eviction_enabled, bool):
        raise ValueError(f"eviction_enabled must be True or False, got {eviction_enabled!r:.40}")
    if max_memory is not None and not (_real(max_memory) and 0 <= max_memory <= MAX_BYTES):  # 0: unknown, as the seed's
        raise ValueError(f"max_memory must be a number of bytes from 0 to {MAX_BYTES:,} or None, "
                         f"got {max_memory!r:.40}")


class MemoryMonitor(SeedMonitor):
    """Memory monitor for oMLX's paged SSD KV cache and its prefill guard, backed by profiles.

    Extra keyword arguments (not in oMLX): ``backend`` (``metal``/``cuda``/``cpu``; default: the running
    MLX, else ``$OMLX_PROFILES_BACKEND``, else metal), ``mlx_version`` (default: the installed MLX, else the
    newest kernel table), ``max_memory`` (bytes; default: MLX's recommended working set).
    """

    def __init__(self, max_kv_cache_memory: int | None, check_interval: float = 1.0, *,
                 eviction_enabled: bool = True, backend: str | None = None, mlx_version: str | None = None,
                 max_memory: int | None = None):
        _check_construction(max_kv_cache_memory, check_interval, eviction_enabled, max_memory)
        super().__init__(max_kv_cache_memory, check_interval, eviction_enabled=eviction_enabled,
                         max_memory=max_memory)
        self._backend = backend or default_backend()
        if self._backend not in _routes.BACKENDS:
            raise ValueError(f"backend must be one of {_routes.BACKENDS}, got {backend!r}")
        self._mlx_version = mlx_version if mlx_version is not None else mlx_version_running()
        self._fixed_state_bytes = 0
        self._warned_no_info = False
        self._clear_model()

    # -- model info ---------------------------------------------------------------------------------
    def _clear_model(self) -> None:
        self._profile = None
        self._fast = None
        self._mono = None
        self._cuda_transient = None  # peak.fast_cuda_prefix.CudaTransient (CUDA chunk transients), built on demand
        self._dtype_size: float = 2
        self._score_dtype_size: float = 2
        self._kv_bytes_per_token_override: float | None = None
        self._kv_scale: float = 1.0
        self._store_scale: float = 1.0
        self._plain = False  # model info, and nothing added to the fast path's answer (the hot path)
        self._num_layers = self._num_kv_heads = self._head_dim = None
        self._num_attention_heads = self._num_kv_cache_layers = None
        self._rotating_layer_specs: tuple[tuple[int, int], ...] = ()
        self._prefill_memory_profile = None
        self._ane_prefill_transient_bytes = 0
        self._fixed_state_bytes = 0

    def set_profile(self, profile, *, dtype_size: float | None = None, kv_bytes_per_token: float | None = None) -> None:
        """Use a resolved ``omlx_profiles`` profile (registry, config extraction or live model): every
        layer kind, head count and width the estimate needs. ``dtype_size``: bytes per element the
        full-attention caches store: wider than the activations scales them everywhere; narrower (a fractional
        TurboQuant width) scales the stored blocks, while the prefill is priced as oMLX runs it (see
        ``kv_terms.turboquant_peak``). ``kv_bytes_per_token``: their exact per-token bytes (MLA), which scales them
        everywhere. Sliding and state caches stay at the activation width (TurboQuant passes them through)."""
        from ..registry.profile import require_profile

        require_profile(profile)  # before anything is cleared: a wrong object keeps the model info there was
        # as set_model_info's widths: a negative, zero, infinite or NaN width gave negative, inf or NaN bytes
        _positive_number("dtype_size", dtype_size, where="set_profile")
        _positive_number("kv_bytes_per_token", kv_bytes_per_token, maximum=float(1 << 40), where="set_profile")
        self._clear_model()
        self._apply_profile(profile, dtype_size=dtype_size, kv_bytes_per_token=kv_bytes_per_token)
        p = profile
        self._num_layers = p.num_layers
        self._num_kv_heads = p.num_kv_heads or 1
        self._head_dim = p.head_dim or (p.mla.kv_lora_rank if p.mla else None)
        self._num_attention_heads = p.num_heads
        self._num_kv_cache_layers, self._rotating_layer_specs = omlx_numbers(p)
        self._log_model("profile %s (%s)" % (p.name, p.source))

    def _apply_profile(self, profile, *, dtype_size: float | None, kv_bytes_per_token: float | None,
                       layer_scale: float = 1.0) -> None:
        act = DTYPE_BYTES[profile.dtype]
        self._profile = profile
        self._dtype_size = dtype_size if dtype_size else act
        self._score_dtype_size = act
        self._kv_bytes_per_token_override = float(kv_bytes_per_token) if kv_bytes_per_token else None
        self._kv_scale, self._store_scale = kv_widths(profile, self._dtype_size, self._kv_bytes_per_token_override,
                                                      layer_scale)
        self._fast = FastPeak(profile, self._backend, self._mlx_version_for_tables(), kv_scale=self._kv_scale)
        self._mono = MonotonePeak(self._fast)
        self._cuda_transient = None

    def _update_plain(self) -> None:
        self._plain = (self._fast is not None and self._store_scale == 1.0 and not self._ane_prefill_transient_bytes
                       and self._prefill_memory_profile is None)

    def _log_model(self, what: str) -> None:
        self._update_plain()
        logger.info("Model info set from %s: %s per 64-token block, KV width x%.3f, backend %s", what,
                    format_bytes(self.estimate_block_memory(64)), self._kv_scale, self._backend)

    def _mlx_version_for_tables(self) -> str | None:
        v = self._mlx_version
        if v is None:
            return None
        try:
            _routes.KernelRoutes.for_backend(self._backend, v)
            return v
        except OmlxProfilesError:
            logger.warning("no %s kernel table covers MLX %s; using the newest table", self._backend, v)
            return None

    def set_model_info(self, num_layers: int, num_kv_heads: int, head_dim: int, dtype_size: float = 2,
                       num_attention_heads: Optional[int] = None, num_kv_cache_layers: Optional[int] = None,
                       compute_dtype_size: Optional[float] = None, kv_bytes_per_token: Optional[float] = None,
                       rotating_layer_specs=None, prefill_memory_profile=None,
                       ane_prefill_transient_bytes: int = 0, hidden_size: Optional[int] = None,
                       intermediate_size: Optional[int] = None, **_newer_options: Any) -> None:
        """oMLX's entry point: builds a uniform profile from these numbers.

        ``num_kv_cache_layers`` layers get a KVCache (``0``: none, a rotating-only model), the
        ``rotating_layer_specs`` groups ``(count, window)`` a RotatingKVCache, the rest no cache. More
        KV caches than layers (DSA: a CacheList of the latent and the indexer cache on some layers) are
        charged as that many caches' worth of KV. ``dtype_size`` is what the KV caches store per element
        (fractional with TurboQuant: see ``set_profile``) and ``kv_bytes_per_token`` their exact bytes per
        token (MLA: it scales the full-attention caches everywhere); ``compute_dtype_size`` is the activation width. The peak charges what these numbers allow (KV
        growth and copies, SDPA by the kernel table, q/k/v/o with ``hidden_size = num_attention_heads *
        head_dim`` unless given, the MLP only when ``intermediate_size`` is given);
        ``ane_prefill_transient_bytes`` is added to it. ``prefill_memory_profile``: one made by
        ``make_prefill_memory_profile`` replaces these numbers with the config's full profile; another
        object with oMLX's protocol (``estimate_resident_kv_bytes``, ``estimate_prefill_transient_bytes``)
        is honoured as a floor under the estimates. Prefer ``set_profile`` / ``set_model_info_from_model``:
        they know every layer kind and the MLP width."""
        rot = check_model_info(num_layers, num_kv_heads, head_dim, dtype_size=dtype_size,
                               num_attention_heads=num_attention_heads, num_kv_cache_layers=num_kv_cache_layers,
                               compute_dtype_size=compute_dtype_size, kv_bytes_per_token=kv_bytes_per_token,
                               rotating_layer_specs=rotating_layer_specs,
                               ane_prefill_transient_bytes=ane_prefill_transient_bytes, hidden_size=hidden_size,
                               intermediate_size=intermediate_size)
        ane = ane_prefill_transient_bytes

        ours = getattr(prefill_memory_profile, "profile", None)
        if isinstance(prefill_memory_profile, ProfilePrefillMemory) and ours is not None:
            self.set_profile(ours, dtype_size=dtype_size)
            self._ane_prefill_transient_bytes = max(int(ane), 0)
            self._update_plain()
            return

        n_q = num_attention_heads or num_kv_heads
        act = compute_dtype_size if compute_dtype_size else 2
        uniform = uniform_profile(num_layers, num_kv_heads, head_dim, n_q=n_q, act=act, rot=rot,
                                  num_kv_cache_layers=num_kv_cache_layers, hidden_size=hidden_size,
                                  intermediate_size=intermediate_size)
        wanted_full = uniform.kv_cache_layers
        self._clear_model()
        self._apply_profile(uniform.profile, dtype_size=dtype_size, kv_bytes_per_token=kv_bytes_per_token,
                            layer_scale=uniform.layer_scale)
        # the numbers oMLX set, as oMLX keeps them (its tests and logs read them)
        self._num_layers = num_layers
        self._num_kv_heads = num_kv_heads
        self._head_dim = head_dim
        self._dtype_size = dtype_size
        self._score_dtype_size = act
        self._num_attention_heads = n_q
        self._num_kv_cache_layers = wanted_full
        self._rotating_layer_specs = tuple(rot)
        self._prefill_memory_profile = prefill_memory_profile
        self._ane_prefill_transient_bytes = max(int(ane), 0)
        self._log_model("set_model_info (%d layers: %d KV caches%s)" % (
            num_layers, wanted_full, "".join(f", {c}x@{w}" for c, w in rot)))

    def set_fixed_state_bytes(self, n: int) -> None:
        """Record the per-sequence recurrent-state bytes oMLX measured from live caches (GDN / Mamba).
        Charged in ``estimate_resident_kv_bytes`` as the larger of it and the profile's own state caches
        (never both: the profile already counts them when it knows them). Cleared by a new model."""
        self._fixed_state_bytes = check_count("n", n)  # int() took "8", 1.5, True; a negative became 0

    @property
    def fixed_state_bytes(self) -> int:
        """The per-sequence recurrent-state bytes set by ``set_fixed_state_bytes`` (0 until set)."""
        return self._fixed_state_bytes

    def has_model_info(self) -> bool:
        """Whether model info is set. Without it the estimates return 0 and the guard is a no-op (logged)."""
        return self._profile is not None

    def _no_info(self, what: str) -> int:
        """The no-model-info answer oMLX's callers expect (0), logged: loudly once, then at debug level."""
        log = logger.debug if self._warned_no_info else logger.warning
        self._warned_no_info = True
        log("MemoryMonitor has no model info: %s returns 0, so the prefill guard cannot guard (call "
            "set_model_info_from_model(), set_model_info() or set_profile() after loading the model)", what)
        return 0

    def _unknown_peak(self, what: str, err: Exception) -> int:
        """A peak the estimator reports as unknown for this model and backend (e.g. Mamba2 layers on CUDA:
        measured above every model of them): oMLX's callers expect a number and cannot act on an error, so
        0, with a warning that says the guard cannot guard this model and why (once per monitor)."""
        log = logger.debug if getattr(self, "_warned_unknown", False) else logger.warning
        self._warned_unknown = True
        log("%s: the prefill peak of this model is unknown here (%s); returning 0: the prefill guard cannot "
            "guard it", what, err)
        return 0

    # -- estimates ----------------------------------------------------------------------------------
    def estimate_block_memory(self, block_size: int, num_layers: Optional[int] = None,
                              num_kv_heads: Optional[int] = None, head_dim: Optional[int] = None,
                              dtype_size: Optional[float] = None) -> float:
        """Bytes one block of ``block_size`` tokens of KV occupies. Explicit overrides compute oMLX's
        ``block * kv_heads * head_dim * dtype * 2 * layers`` (with the model's own numbers for those not
        given); otherwise the profile's exact per-token bytes over every cache kind (latent MLA, sliding
        layers counted at full width: a block is stored whole), full-attention caches at the KV width.
        Without model info (and not every dimension given): 0, logged -- oMLX substituted a 7B model."""
        block_size = check_count("block_size", block_size)
        if num_layers is not None or num_kv_heads is not None or head_dim is not None or dtype_size is not None:
            # the overrides are checked as set_model_info's are: a list, a str, -1 or NaN multiplied through
            check_dims("estimate_block_memory", num_layers=num_layers, num_kv_heads=num_kv_heads, head_dim=head_dim)
            _positive_number("dtype_size", dtype_size, where="estimate_block_memory")
            layers = num_layers or self._num_kv_cache_layers or self._num_layers
            heads = num_kv_heads or self._num_kv_heads
            dim = head_dim or self._head_dim
            if not (layers and heads and dim):
                return self._no_info("estimate_block_memory")
            dt = dtype_size or self._dtype_size
            return block_size * heads * dim * dt * 2 * layers
        if self._profile is None:
            return self._no_info("estimate_block_memory")
        if self._kv_bytes_per_token_override is not None:
            return block_size * self._kv_bytes_per_token_override
        return float(block_size * block_bytes_per_token(self._profile, self._kv_scale, self._store_scale))

    def estimate_prompt_kv_bytes(self, num_tokens: int) -> float:
        """Resident KV bytes after a prompt of ``num_tokens`` (exact: mlx-lm's 256-token allocation step,
        bounded sliding windows, constant states) as the prefill holds them: at the model's width even with
        a TurboQuant ``dtype_size`` (oMLX quantizes a fresh request's cache once, after its prefill; its
        callers use this number for prefill-time growth). Differs from oMLX (tokens x per-token bytes x
        dtype_size): capacity rounding and windows are applied; without model info: 0, logged."""
        num_tokens = check_count("num_tokens", num_tokens, maximum=TOKENS)
        if num_tokens == 0:
            return 0
        if self._profile is None:
            return self._no_info("estimate_prompt_kv_bytes")
        if self._kv_bytes_per_token_override is not None:
            return step_rows(num_tokens) * self._kv_bytes_per_token_override
        kv = scaled_kv(self._profile, num_tokens, self._kv_scale)
        other = self._prefill_memory_profile
        if other is not None and hasattr(other, "estimate_resident_kv_bytes"):
            kv = max(kv, int(other.estimate_resident_kv_bytes(int(num_tokens), chunk_tokens=max(int(num_tokens), 1))))
        return kv

    def estimate_resident_kv_bytes(self, num_tokens: int, *, chunk_tokens: int = 1) -> float:
        """The most KV a prefill of ``num_tokens`` in chunks of ``chunk_tokens`` holds at once: full caches
        at mlx-lm's 256-row capacity, sliding windows at ``window - 1 + chunk`` rows (a RotatingKVCache
        concatenates the chunk before trimming), recurrent state as the larger of the profile's state
        caches and ``fixed_state_bytes``; at the model's width during the prefill even with a TurboQuant
        ``dtype_size`` (see ``estimate_prompt_kv_bytes``). Admission-only, as in oMLX: charge it once per
        request."""
        n = check_count("num_tokens", num_tokens, maximum=TOKENS)
        chunk = check_count("chunk_tokens", chunk_tokens, minimum=1, maximum=TOKENS)
        if n == 0:
            return 0
        if self._profile is None:
            self._no_info("estimate_resident_kv_bytes")
            return self._fixed_state_bytes
        if self._kv_bytes_per_token_override is not None:
            return step_rows(n) * self._kv_bytes_per_token_override + self._fixed_state_bytes
        total = resident_kv(self._profile, n, chunk, self._kv_scale, self._fixed_state_bytes)
        foreign = self._prefill_memory_profile
        if foreign is not None and hasattr(foreign, "estimate_resident_kv_bytes"):
            total = max(total, int(foreign.estimate_resident_kv_bytes(n, chunk_tokens=chunk)) + self._fixed_state_bytes)
        return total

    def estimate_prefill_peak_bytes(self, new_tokens: int, chunk_size: int, *, cached_tokens: int = 0) -> float:
        """Per-request prefill peak over what is already held (weights and the cached prefix's KV
        excluded): the highest ``generate_step`` call's cache held + rows added + activations in flight.
        ``cached_tokens`` widen attention (kL) but add no KV. Differs from oMLX: oMLX charged the new
        tokens' KV + one SDPA call; this is the measured mechanism (``omlx_profiles.peak``). Without model
        info: 0 (logged), as oMLX. Never negative, never below the exact model: the precomputed fast path
        ``omlx_profiles.peak.fast.FastPeak.peak`` (a multiply, an add and a division for most models)."""
        if self._plain and type(new_tokens) is int and type(chunk_size) is int and type(cached_tokens) is int \
                and 0 <= new_tokens <= TOKENS and 1 <= chunk_size <= TOKENS and 0 <= cached_tokens <= TOKENS \
                and new_tokens + cached_tokens <= TOKENS:
            try:
                return self._mono.peak(new_tokens, chunk_size, cached_tokens)
            except OmlxProfilesError as e:
                return self._unknown_peak("estimate_prefill_peak_bytes", e)
        new_tokens, chunk_size, cached_tokens = _counts(new_tokens, chunk_size, cached_tokens)
        f = self._fast
        if f is None:
            return self._no_info("estimate_prefill_peak_bytes")
        try:
            peak = self._mono.peak(new_tokens, chunk_size, cached_tokens)
        except OmlxProfilesError as e:
            return self._unknown_peak("estimate_prefill_peak_bytes", e)
        if self._store_scale != 1.0 and new_tokens:
            peak = turboquant_peak(self._profile, peak, new_tokens, chunk_size, cached_tokens,
                                   kv_scale=self._kv_scale, store_scale=self._store_scale,
                                   n_q=self._num_attention_heads or 1, n_kv=self._num_kv_heads or 1,
                                   head_dim=self._head_dim or 1)
        if self._ane_prefill_transient_bytes and peak:
            peak += self._ane_prefill_transient_bytes
        if self._prefill_memory_profile is not None and new_tokens:
            peak = max(peak, self._foreign_peak(new_tokens, chunk_size, cached_tokens))
        return peak

    def _foreign_peak(self, new: int, chunk: int, cached: int) -> int:
        other = self._prefill_memory_profile
        try:
            q = min(chunk, new)
            return int(other.estimate_resident_kv_bytes(new, chunk_tokens=q)
                       + other.estimate_prefill_transient_bytes(q, new + cached)) + self._ane_prefill_transient_bytes
        except Exception as e:  # noqa: BLE001 - a caller's strategy object: its failure is not ours
            logger.warning("prefill_memory_profile failed (%s: %s); using the profile estimate alone",
                           type(e).__name__, e)
            return 0

    def _estimate_sdpa_activation_bytes(self, query_tokens: int, kv_len: int) -> int:
        """ONE attention call alone, as the kernel table routes it on this backend and MLX version: the
        output (fused / vector kernels), plus one score tile (a registered tiled kernel), or the unfused
        fallback's score matrix, scaled q and output (``estimate_unfused_sdpa_call_bytes``), all in the
        compute dtype. Kept for oMLX code that prices a single call; the prefill estimates charge the
        whole call (every layer in flight, masks, KV copies), not this."""
        if self._profile is None or query_tokens <= 0:
            return 0 if query_tokens <= 0 else self._no_info("_estimate_sdpa_activation_bytes")
        return sdpa_activation_bytes(self._profile, self._fast.routes, self._num_attention_heads or 1,
                                     self._num_kv_heads or 1, self._head_dim or 1, query_tokens, kv_len)

    def estimate_chunk_transient_bytes(self, n_tokens: int, kv_len: int, **_newer_options: Any) -> int:
        """Transient bytes of ONE prefill chunk of ``n_tokens`` queries over ``kv_len`` keys: what the
        chunk allocates beyond the cache it held before (the rows it adds, the activations in flight, the
        old KV buffers it copies). Differs from oMLX (the SDPA score/output buffer of one layer): the
        executor's run-ahead keeps several layers' activations live, and the rows the chunk adds are in it
        (oMLX adds ``estimate_prompt_kv_bytes(n_tokens)`` on top: counted twice, the safe side). Without
        model info: 0 (logged). Never negative, never below the exact model of that call (after a prefix fed in
        chunks of ``n_tokens``), non-decreasing in ``kv_len``: on CUDA, where the exact call falls at some longer
        prefixes (graph commits move with the offset), a bound of every call of ``n_tokens`` queries up to that
        offset (``peak.fast_cuda_prefix.CudaTransient``; the exact call where there is none: chunked attention)."""
        n = check_count("n_tokens", n_tokens, maximum=TOKENS)
        kv = check_count("kv_len", kv_len, maximum=TOKENS)
        if self._fast is None:
            return self._no_info("estimate_chunk_transient_bytes")
        if n == 0:
            return 0
        try:
            f = self._fast
            if f.exact_only and kv > n and f.routes.executor.graph_commit is not None:
                t = self._cuda_transient
                if t is None or t.fast is not f:
                    from ..peak.fast_cuda_prefix import CudaTransient

                    t = self._cuda_transient = CudaTransient(f)
                v = t.bound(n, kv - n)
                if v is not None:
                    first = f.chunk_transient(n, n)  # a fresh cache's first call (the answer at kv_len <= n)
                    return v if v > first else first
            return f.chunk_transient(n, kv)
        except OmlxProfilesError as e:
            return self._unknown_peak("estimate_chunk_transient_bytes", e)

    def estimate_blocks_to_free(self, bytes_to_free: int, block_size: int) -> int:
        """Blocks of ``block_size`` tokens to evict to free ``bytes_to_free`` (rounded up, at least 1).
        As oMLX, raises ``RuntimeError`` when the monitor was built with eviction disabled; without model
        info 0 (no block size is known, nothing is evicted on a guess)."""
        if not self._eviction_enabled:
            raise RuntimeError("estimate_blocks_to_free called on a MemoryMonitor constructed with "
                               "eviction_enabled=False")
        bytes_to_free = check_count("bytes_to_free", bytes_to_free)  # -1 or True asked for a block; "8" a TypeError
        block_mem = self.estimate_block_memory(block_size)
        if block_mem <= 0:
            return 0
        return max(1, int((bytes_to_free + block_mem - 1) // block_mem))

    @property
    def backend(self) -> str:
        return self._backend

    @property
    def profile(self):
        return self._profile

    def __repr__(self) -> str:
        info = self.get_memory_info()
        return (f"MemoryMonitor(max_kv_cache={format_bytes(self._max_kv_cache_memory)}, "
                f"used={format_bytes(info.used_bytes)}, backend={self._backend}, "
                f"model={getattr(self._profile, 'name', None)})")


class ProfilePrefillMemory:
    """oMLX's ``PrefillMemoryProfile`` protocol, answered by an ``omlx_profiles`` profile: what
    ``make_prefill_memory_profile`` returns. ``MemoryMonitor.set_model_info(...,
    prefill_memory_profile=this)`` makes the monitor use the whole profile."""

    def __init__(self, profile, *, backend: str | None = None, mlx_version: str | None = None):
        self.profile = profile
        self._monitor = MemoryMonitor(None, eviction_enabled=False, backend=backend, mlx_version=mlx_version,
                                      max_memory=0)
        self._monitor.set_profile(profile)

    def estimate_resident_kv_bytes(self, num_tokens: int, *, chunk_tokens: int = 1) -> int:
        return int(self._monitor.estimate_resident_kv_bytes(num_tokens, chunk_tokens=chunk_tokens))

    def estimate_prefill_transient_bytes(self, query_tokens: int, kv_len: int, **_newer_options: Any) -> int:
        return int(self._monitor.estimate_chunk_transient_bytes(query_tokens, kv_len))

    def __repr__(self) -> str:
        return f"ProfilePrefillMemory({self.profile.name})"
