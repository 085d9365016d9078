"""A drop-in for oMLX's ``omlx/memory_monitor.py``, backed by the profile estimator.

Same names and call signatures as the seed (``reference/seed_memory_monitor.txt``): ``MemoryMonitor``
(``set_model_info``, ``has_model_info``, ``estimate_block_memory``, ``estimate_prompt_kv_bytes``,
``estimate_prefill_peak_bytes``, ``estimate_chunk_transient_bytes``, ``estimate_blocks_to_free``, ...),
``set_model_info_from_model``, ``raise_if_prefill_exceeds``, ``register_tiled_prefill_head_dim``,
``estimate_unfused_sdpa_call_bytes``, ``estimate_mla_kv_bytes_per_token``, ``MemoryInfo`` and
``PrefillMemoryExceededError`` (estimated_bytes, limit_bytes, request_id, a message saying what to change).

Where the seed was wrong, the facade is right; every method's docstring says how it differs. In short:

* **No silent 7B default.** The seed substituted 32 layers / 8 KV heads / head_dim 128 when dims were
  unset and returned 0 from the peak estimate (which turned the guard off). Here, without model info,
  ``estimate_*`` raise ``ModelInfoMissingError`` and ``raise_if_prefill_exceeds`` raises it too (a guard
  that cannot estimate must not wave a request through); ``has_model_info()`` tells callers beforehand.
* **The peak is the measured mechanism, term by term**, not "KV of the new tokens + one SDPA call":
  MLX allocates ahead of the device, so the peak holds several layers' activations, the old KV buffer a
  growing cache copies, masks, MoE/MLP activations (``omlx_profiles.peak``). The seed under-estimated
  real prefill peaks by 2-100x (issue 5: 0.01-0.52 of the measured peak on an H200).
* **Kernel routes per backend and MLX version** (``profiles/kernels``), not one hard-coded Metal table:
  the seed called D=80 prefill fused on every version and D=96 never (wrong for MLX 0.32.1+), and D=256
  vector decode... only the prefill matters for the guard, where it also missed the CUDA rules.
* **Score bytes are the compute dtype** (2 for bf16: measured), and the fallback keeps the scaled q and
  the output in that dtype too; the seed charged the output as fp32.
* **KV bytes are exact**: mlx-lm allocates in 256-token steps (and sliding windows hold window-1+chunk
  rows during a chunk); per-layer cache kinds come from the profile, not from counting ``KVCache``.
* **MLA/DSA**: the DSA indexer stores zero *values* as wide as its keys (the seed counted zero-width).

Model info comes either from ``set_profile(profile)`` (a registry profile: the best), from
``set_model_info_from_model`` (the live model, through ``omlx_profiles.extract.profile_from_model``), or from
the seed's ``set_model_info(num_layers, num_kv_heads, head_dim, ...)`` (a uniform dense profile is built
from those numbers; what it cannot know — hidden size, MLP width — is then not charged, and the
docstring of ``estimate_prefill_peak_bytes`` says so).

The per-call estimates are precomputed (``omlx_profiles.peak.fast``): a few integer operations each.

**Warm the model up once after loading it (CUDA).** The estimate is for a warmed-up process. The first
prefill after MLX loads a model commits many smaller CUDA graphs that MLX does not count toward its limit of
in-flight graphs, so more of the prompt's activations are alive at once: measured on an H200, gpt-oss-20b's
first 8k prompt peaked 9.90 GiB over the weights where every later one peaked 7.81, and DeepSeek-V2-Lite
(step 4096) 13.25 GiB where later ones peaked 11.08. One 64-token prefill right after loading removed it
in both (benchmarks/cuda/README.md, "Traced commits"): ``warm_up_model(model)`` does that; oMLX should
call it when it loads a model.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Optional

from .errors import OmlxProfilesError
from .peak import kernels as _routes
from .peak.kernels import _TILED_VERSION
from .units import format_bytes

logger = logging.getLogger(__name__)

DEFAULT_BACKEND_ENV = "OMLX_PROFILES_BACKEND"


class ModelInfoMissingError(OmlxProfilesError, RuntimeError):
    """An estimate was asked of a ``MemoryMonitor`` that has no model info (the seed returned 0 here)."""


class PrefillMemoryExceededError(OmlxProfilesError):
    """A prompt's prefill peak would pass the memory limit. Compatible with oMLX's exception of the same
    name: ``message``, ``request_id``, ``estimated_bytes``, ``limit_bytes`` (oMLX maps it to HTTP 400)."""

    def __init__(self, message: str, request_id: str | None = None, estimated_bytes: int = 0,
                 limit_bytes: int = 0):
        super().__init__(message)
        self.message = message
        self.request_id = request_id
        self.estimated_bytes = int(estimated_bytes)
        self.limit_bytes = int(limit_bytes)


@dataclass
class MemoryInfo:
    """Current GPU memory state (as the seed)."""

    total_bytes: int
    used_bytes: int
    available_bytes: int
    utilization: float


def register_tiled_prefill_head_dim(head_dim: int, *, min_kv_len: int = 8192, kv_tile: int = 1024) -> None:
    """Register a head_dim whose long-context prefill runs an O(L) tiled kernel (oMLX's sdpa256 patch):
    the estimate then charges one ``n_q x qL x kv_tile`` score tile instead of the score matrix. Call it in
    lockstep with installing the kernel route. Differs from the seed: the minimum kv length is kept per
    head_dim (the seed overwrote one global threshold for all), and precomputed estimates are refreshed."""
    _routes.register_tiled(head_dim, min_kv_len=min_kv_len, kv_tile=kv_tile)


def estimate_unfused_sdpa_call_bytes(n_q_heads: int, query_tokens: int, kv_len: int, head_dim: int,
                                     score_dtype_size: float = 2) -> int:
    """Transient bytes of ONE SDPA call taking MLX's unfused fallback: the score matrix
    ``n_q x qL x kL`` (where/softmax reuse it: one buffer), the scaled q and the output, all in the compute
    dtype. Differs from the seed: the output is in the compute dtype (the seed charged fp32) and the
    scaled q copy is counted; a "causal" mask adds ``qL x kL`` bytes (bool), charged by the full model."""
    s = score_dtype_size
    return int(n_q_heads * query_tokens * kv_len * s + 2 * n_q_heads * query_tokens * head_dim * s)


def _cfg_get(obj: Any, key: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _pos_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def estimate_mla_kv_bytes_per_token(config: Any, cache_list: Any, dtype_size: float) -> float | None:
    """Resident KV bytes per token of an MLA model (latent ``kv_lora_rank`` keys + ``qk_rope_head_dim``
    values, one head) with, on DSA layers, the indexer cache. Differs from the seed: the DSA indexer
    stores ``values = zeros_like(keys)``, so it costs ``2 * index_head_dim`` per token (the seed counted
    the values as zero-width), and layers are counted from the cache objects as the seed did."""
    rank = _cfg_get(config, "kv_lora_rank")
    rope = _cfg_get(config, "qk_rope_head_dim")
    if not (_pos_int(rank) and _pos_int(rope)) or cache_list is None:
        return None
    main = idx = 0
    try:
        for c in cache_list:
            caches = getattr(c, "caches", None)
            if caches is None:
                main += 1  # a bare KVCache holding the latent
                continue
            if len(caches) >= 1:
                main += 1
            if len(caches) >= 2:
                idx += 1
    except TypeError:
        return None
    if main <= 0:
        return None
    ih = _cfg_get(config, "index_head_dim", 0) or 0
    ih = ih if _pos_int(ih) else 0
    return float(main * (rank + rope) + idx * 2 * ih) * float(dtype_size)


def _counts(new_tokens, chunk_size, cached_tokens) -> tuple[int, int, int]:
    """The seed took anything; a bad count here is an error naming the argument (never a silent 0)."""
    from .validation import check_count

    return (check_count("new_tokens", new_tokens), check_count("chunk_size", chunk_size, minimum=1),
            check_count("cached_tokens", cached_tokens))


def _dtype_name(size: float | None) -> str:
    return "fp32" if size and size >= 4 else "bf16"


def _default_backend() -> str:
    env = os.environ.get(DEFAULT_BACKEND_ENV)
    if env in _routes.BACKENDS:
        return env
    try:  # lazy: the facade itself never needs mlx
        import mlx.core as mx  # noqa: F401

        if mx.metal.is_available():
            return "metal"
        if hasattr(mx, "cuda") and mx.cuda.is_available():
            return "cuda"
        return "cpu"
    except Exception:
        return "metal"


def _mlx_version() -> str | None:
    try:
        import mlx.core as mx

        return mx.__version__
    except Exception:
        return None


class MemoryMonitor:
    """Memory monitor for oMLX's paged SSD KV cache and its prefill guard, backed by profiles.

    Extra keyword arguments (not in the seed): ``backend`` (``metal``/``cuda``/``cpu``; default: the
    running MLX, else ``$OMLX_PROFILES_BACKEND``, else metal), ``mlx_version`` (default: the installed
    MLX, else the newest kernel table), ``max_memory`` (bytes; default: MLX's recommended working set).
    """

    def __init__(self, max_kv_cache_memory: int | None, check_interval: float = 1.0, *,
                 eviction_enabled: bool = True, backend: str | None = None, mlx_version: str | None = None,
                 max_memory: int | None = None):
        if eviction_enabled and (max_kv_cache_memory is None or max_kv_cache_memory <= 0):
            raise ValueError("max_kv_cache_memory must be positive when "
                             f"eviction_enabled=True, got {max_kv_cache_memory}")
        self._max_kv_cache_memory = max_kv_cache_memory or 0
        self._eviction_enabled = eviction_enabled
        self._check_interval = check_interval
        self._max_memory = max_memory if max_memory is not None else self._get_max_memory()
        self._last_check_time = 0.0
        self._last_memory_info: Optional[MemoryInfo] = None
        self._lock = threading.Lock()
        self._backend = backend or _default_backend()
        if self._backend not in _routes.BACKENDS:
            raise ValueError(f"backend must be one of {_routes.BACKENDS}, got {backend!r}")
        self._mlx_version = mlx_version if mlx_version is not None else _mlx_version()
        self._paged_cache_manager = None
        self._block_size = 256
        self._baseline_memory = 0
        self._running_requests = 0
        self._waiting_requests = 0
        self._clear_model()

    # -- model info ---------------------------------------------------------------------------------
    def _clear_model(self) -> None:
        self._profile = None
        self._fast = None
        self._dtype_size: float = 2
        self._kv_per_token_override: float | None = None
        self._kv_per_token: int = 0  # exact per-token bytes of the unbounded caches (per 256-row step / 256)
        self._num_layers = self._num_kv_heads = self._head_dim = None
        self._num_attention_heads = self._num_kv_cache_layers = None

    def set_profile(self, profile, *, dtype_size: float | None = None, kv_bytes_per_token: float | None = None) -> None:
        """Use a resolved ``omlx_profiles`` profile (registry, config extraction or live model): every
        layer kind, head count and width the estimate needs. ``dtype_size`` (fractional KV widths, e.g.
        TurboQuant) and ``kv_bytes_per_token`` override the *block* accounting only (as in the seed)."""
        from .kv.bytes import kv_report
        from .peak.fast import FastPeak

        self._clear_model()
        self._profile = profile
        self._fast = FastPeak(profile, self._backend, self._mlx_version_for_tables())
        act = 4 if profile.dtype == "fp32" else 2
        self._dtype_size = dtype_size if dtype_size else act
        self._kv_per_token_override = float(kv_bytes_per_token) if kv_bytes_per_token else None
        # bytes per token of the unbounded caches: 256 tokens of a single-call prompt / 256 (exact per step)
        full = kv_report(profile, 512, schedule="direct").total - kv_report(profile, 256, schedule="direct").total
        self._kv_per_token = full // 256
        self._num_layers = profile.num_layers
        self._num_kv_heads = profile.num_kv_heads or 1
        self._head_dim = profile.head_dim or (profile.mla.kv_lora_rank if profile.mla else None)
        self._num_attention_heads = profile.num_heads
        self._num_kv_cache_layers = sum(1 for n in profile.layer_names
                                        if profile.layer_types[n].entries[0].kind in ("full", "latent", "chunked"))
        logger.info("Model info set from profile %s (%s): %s per token of KV, backend %s",
                    profile.name, profile.source, format_bytes(self._kv_per_token), self._backend)

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
                       hidden_size: Optional[int] = None, intermediate_size: Optional[int] = None) -> None:
        """The seed's entry point: builds a uniform dense-attention profile from these numbers.

        Differs from the seed: ``num_kv_cache_layers`` layers get a KVCache and the rest none (the seed
        estimated the same); the peak charges what these numbers allow (KV growth and copies, SDPA by the
        kernel table, q/k/v/o with ``hidden_size = num_attention_heads * head_dim`` unless given, the MLP
        only when ``intermediate_size`` is given). Prefer ``set_profile`` / ``set_model_info_from_model``:
        they know every layer kind and the MLP width."""
        for name, v in (("num_layers", num_layers), ("num_kv_heads", num_kv_heads), ("head_dim", head_dim)):
            if not _pos_int(v):
                raise ValueError(f"set_model_info: {name} must be a positive integer, got {v!r}")
        for name, v in (("num_attention_heads", num_attention_heads), ("num_kv_cache_layers", num_kv_cache_layers),
                        ("hidden_size", hidden_size), ("intermediate_size", intermediate_size)):
            if v is not None and not _pos_int(v):
                raise ValueError(f"set_model_info: {name} must be a positive integer or None, got {v!r}")
        for name, v in (("dtype_size", dtype_size), ("compute_dtype_size", compute_dtype_size),
                        ("kv_bytes_per_token", kv_bytes_per_token)):
            if v is None and name != "dtype_size":
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 < v < float("inf")):
                raise ValueError(f"set_model_info: {name} must be a positive finite number, got {v!r}")
        n_q = num_attention_heads or num_kv_heads
        kv_layers = num_kv_cache_layers or num_layers
        act = compute_dtype_size if compute_dtype_size and compute_dtype_size > 0 else 2
        from .registry.profile import Profile
        from .schema.family import CompleteVariant

        v = CompleteVariant.model_validate({
            "mlx_model_type": "llama", "num_layers": num_layers, "dtype": _dtype_name(act),
            "num_heads": n_q, "num_kv_heads": num_kv_heads, "head_dim": head_dim,
            "hidden_size": hidden_size or n_q * head_dim,
            **({"intermediate_size": intermediate_size} if intermediate_size else {}),
            "layers": {"kinds": {"full": {"kind": "full"}, "none": {"kind": "none"}},
                       "types": ["full"] * kv_layers + ["none"] * (num_layers - kv_layers)},
        })
        prof = Profile.from_variant(v, name="set_model_info", family="seed", source="set_model_info()")
        if not intermediate_size:
            # no MLP width known: charge attention only (say so instead of inventing a width)
            import dataclasses

            prof = dataclasses.replace(prof, intermediate_size=1)
        self.set_profile(prof, dtype_size=dtype_size, kv_bytes_per_token=kv_bytes_per_token)

    def has_model_info(self) -> bool:
        """Whether model info is set. Unlike the seed, estimates without it raise instead of returning a
        7B-shaped guess (or 0), so callers check this first when the difference matters."""
        return self._profile is not None

    def _require(self):
        if self._profile is None:
            raise ModelInfoMissingError(
                "MemoryMonitor has no model info: call set_profile(), set_model_info_from_model() or "
                "set_model_info() first (the estimate is not guessed)")
        return self._profile

    # -- estimates ----------------------------------------------------------------------------------
    def estimate_block_memory(self, block_size: int, num_layers: Optional[int] = None,
                              num_kv_heads: Optional[int] = None, head_dim: Optional[int] = None,
                              dtype_size: Optional[float] = None) -> float:
        """Bytes one block of ``block_size`` tokens of KV occupies. Explicit overrides compute the seed's
        ``block * kv_heads * head_dim * dtype * 2 * layers`` (all four given, or together with the model's
        own numbers); otherwise the profile's exact per-token bytes over every cache kind (latent MLA,
        expanded MLA widths, sliding layers counted at full width: a block is stored whole).
        Differs from the seed: no 32/8/128 default — without model info and without all overrides this
        raises ``ModelInfoMissingError``."""
        from .validation import check_count

        check_count("block_size", block_size)
        if num_layers or num_kv_heads or head_dim or dtype_size:
            layers = num_layers or self._num_layers
            heads = num_kv_heads or self._num_kv_heads
            dim = head_dim or self._head_dim
            if not (layers and heads and dim):
                self._require()
            dt = dtype_size or self._dtype_size
            return block_size * heads * dim * dt * 2 * layers
        self._require()
        if self._kv_per_token_override is not None:
            return block_size * self._kv_per_token_override
        return float(block_size * self._block_bytes_per_token())

    def _block_bytes_per_token(self) -> float:
        p = self._profile
        per = 0.0
        for n in p.layer_names:
            for e in p.layer_types[n].entries:
                if e.kind in ("full", "sliding", "chunked", "latent", "indexer"):
                    per += e.row_elements
        return per * self._dtype_size

    def estimate_prompt_kv_bytes(self, num_tokens: int) -> float:
        """Resident KV bytes after a prompt of ``num_tokens`` (exact: mlx-lm's 256-token allocation step,
        bounded sliding windows, constant states). Differs from the seed (tokens x per-token bytes, 0
        without model info): capacity rounding and windows are applied; without model info it raises."""
        p = self._require()
        from .validation import check_count

        if check_count("num_tokens", num_tokens) == 0:
            return 0
        if self._kv_per_token_override is not None:
            return num_tokens * self._kv_per_token_override
        from .kv.bytes import kv_report

        return kv_report(p, int(num_tokens)).total

    def estimate_prefill_peak_bytes(self, new_tokens: int, chunk_size: int, *, cached_tokens: int = 0) -> float:
        """Per-request prefill peak over what is already held (weights and the cached prefix's KV
        excluded): the highest ``generate_step`` call's cache held + rows added + activations in flight.
        ``cached_tokens`` widen attention (kL) but add no KV. Differs from the seed: the seed charged the
        new tokens' KV + one SDPA call and returned 0 without model info; this is the measured mechanism
        (``omlx_profiles.peak``) and raises ``ModelInfoMissingError`` without model info.

        Fast path: the precomputed envelope of ``omlx_profiles.peak.fast`` (a multiply, an add and a
        division for most models); short prompts go through the exact, memoized model."""
        f = self._fast
        if f is None:
            self._require()
        if type(new_tokens) is not int or type(chunk_size) is not int or type(cached_tokens) is not int:
            new_tokens, chunk_size, cached_tokens = _counts(new_tokens, chunk_size, cached_tokens)
        if new_tokens <= 0:
            if new_tokens < 0:
                raise ValueError(f"new_tokens must be >= 0, got {new_tokens}")
            return 0
        if chunk_size <= 0 or cached_tokens < 0:
            _counts(new_tokens, chunk_size, cached_tokens)
        c = cached_tokens
        L = f._lines.get(chunk_size)
        if L is not None and _TILED_VERSION[0] == f._tiled_gen and new_tokens > chunk_size:
            kl = c + new_tokens - 1
            if kl >= L.kl_min:
                a, b = L.lines[0]
                best = a + b * kl
                for a, b in L.lines[1:]:
                    v = a + b * kl
                    if v > best:
                        best = v
                peak = -(-best // L.den)
                return peak - f._prefix(c, chunk_size) if c else peak
        return f.peak(int(new_tokens), int(chunk_size), int(c))

    def estimate_chunk_transient_bytes(self, n_tokens: int, kv_len: int) -> int:
        """Transient bytes of ONE prefill chunk of ``n_tokens`` queries over ``kv_len`` keys: what the
        chunk allocates beyond the cache it held before (the rows it adds, the activations in flight, the
        old KV buffers it copies). Differs from the seed (the SDPA score/output buffer of one layer):
        the executor's run-ahead keeps several layers' activations live."""
        self._require()
        if n_tokens <= 0:
            return 0
        n = int(n_tokens)
        cached = max(int(kv_len), n) - n
        # one call of n queries after ``cached`` resident tokens (then generate_step's last token)
        return int(self._fast.peak(n + 1, n, cached))

    def estimate_blocks_to_free(self, bytes_to_free: int, block_size: int) -> int:
        """Blocks of ``block_size`` tokens to evict to free ``bytes_to_free`` (rounded up, at least 1).
        As the seed, raises ``RuntimeError`` when the monitor was built with eviction disabled."""
        if not self._eviction_enabled:
            raise RuntimeError("estimate_blocks_to_free called on a MemoryMonitor constructed with "
                               "eviction_enabled=False")
        block_mem = self.estimate_block_memory(block_size)
        if block_mem <= 0:
            return 0
        return max(1, int((bytes_to_free + block_mem - 1) // block_mem))

    # -- seed plumbing (unchanged semantics) -----------------------------------------------------------
    def _get_max_memory(self) -> int:
        try:
            import mlx.core as mx

            info = mx.device_info()
            v = info.get("max_recommended_working_set_size") or info.get("memory_size")
            if v:
                return int(v)
        except Exception:
            pass
        try:
            return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        except (ValueError, OSError, AttributeError):
            return 0

    def set_paged_cache_manager(self, manager, block_size: int = 64) -> None:
        self._paged_cache_manager = manager
        self._block_size = block_size

    def set_baseline_memory(self) -> None:
        try:
            import mlx.core as mx

            self._baseline_memory = int(mx.get_active_memory())
        except Exception:
            self._baseline_memory = 0

    def set_request_stats(self, running: int, waiting: int) -> None:
        self._running_requests = running
        self._waiting_requests = waiting

    def _get_current_memory_usage(self) -> int:
        return 0  # paged-SSD mode: the KV lives on SSD (as the seed)

    def get_memory_info(self) -> MemoryInfo:
        with self._lock:
            now = time.time()
            if self._last_memory_info is not None and now - self._last_check_time < self._check_interval:
                return self._last_memory_info
            used = self._get_current_memory_usage()
            avail = max(0, self._max_memory - used)
            util = used / self._max_memory if self._max_memory > 0 else 0.0
            self._last_memory_info = MemoryInfo(self._max_memory, used, avail, util)
            self._last_check_time = now
            return self._last_memory_info

    def is_under_pressure(self) -> bool:
        return False

    def bytes_to_free(self) -> int:
        return 0

    @property
    def max_memory(self) -> int:
        return self._max_memory

    @property
    def max_kv_cache_memory(self) -> int:
        return self._max_kv_cache_memory

    @property
    def eviction_enabled(self) -> bool:
        return self._eviction_enabled

    @property
    def backend(self) -> str:
        return self._backend

    @property
    def profile(self):
        return self._profile

    def get_stats(self) -> dict:
        info = self.get_memory_info()
        return {
            "total_bytes": info.total_bytes, "used_bytes": info.used_bytes,
            "available_bytes": info.available_bytes, "utilization": info.utilization,
            "max_kv_cache_memory": self._max_kv_cache_memory,
            "total_formatted": format_bytes(info.total_bytes), "used_formatted": format_bytes(info.used_bytes),
            "available_formatted": format_bytes(info.available_bytes),
        }

    def __repr__(self) -> str:
        return (f"MemoryMonitor(max_kv_cache={format_bytes(self._max_kv_cache_memory)}, backend={self._backend}, "
                f"model={getattr(self._profile, 'name', None)})")


def set_model_info_from_model(monitor: MemoryMonitor, model: Any) -> None:
    """Populate ``monitor`` from a live mlx-lm ``model``: its profile (``model.args`` read as a config and
    checked by a cache probe: ``omlx_profiles.extract.profile_from_model``).

    Differs from the seed: every layer kind is known (sliding, latent, state, KV-shared layers), not a
    count of ``KVCache`` objects; and when the model cannot be read the monitor is left *without* model
    info, so the estimates raise (the seed left a 7B default / a no-op guard behind silently). Errors are
    logged, not raised, as in the seed."""
    try:
        from .live.from_model import profile_from_model  # lazy: imports mlx through the live probe
    except ImportError as e:  # pragma: no cover - extraction ships with the extraction work
        logger.warning("set_model_info_from_model: profile extraction unavailable (%s)", e)
        return
    try:
        prof = profile_from_model(model)
    except Exception as e:
        logger.warning("set_model_info_from_model: could not read the model (%s: %s); the monitor has no "
                       "model info and its estimates will raise", type(e).__name__, e)
        monitor._clear_model()
        return
    monitor.set_profile(prof)


def warm_up_model(model: Any, tokens: int = 64) -> float:
    """Run one short prefill through a freshly loaded mlx-lm ``model`` and free it (seconds taken).

    Not in the seed. Call it once after loading a model and before admitting requests: the prefill
    estimates are for a warmed-up process, and on MLX's CUDA backend the first prefill after loading holds
    more in flight than any later one (measured on an H200 up to +46%; one 64-token prefill removed it:
    ``omlx_profiles.live.warmup``). Imports mlx, unlike the estimators."""
    from .live.warmup import warm_up  # lazy: the facade's estimates must not import mlx

    return warm_up(model, tokens)


def raise_if_prefill_exceeds(monitor: MemoryMonitor | None, *, prefill_memory_guard: bool, hard_limit_bytes: int,
                             current_usage_bytes: int, prefill_step_size: int, num_prompt_tokens: int,
                             cached_tokens: int = 0, request_id: str | None = None) -> None:
    """Raise ``PrefillMemoryExceededError`` if ``current + prefill peak`` would pass ``hard_limit_bytes``.

    ``cached_tokens``: prompt KV already resident in ``current_usage_bytes`` (a paged prefix hit); a cache
    that re-allocates KV on a hit must pass 0. No-op when the guard is disabled, no limit is set, or no
    monitor. Differs from the seed: a monitor without model info raises ``ModelInfoMissingError`` (the
    seed's estimate returned 0 and the guard let everything through), and the message names the numbers
    and what to change: fewer tokens, a smaller prefill step, or more memory."""
    if not prefill_memory_guard or hard_limit_bytes <= 0 or monitor is None:
        return
    new_tokens = max(int(num_prompt_tokens) - max(int(cached_tokens), 0), 0)
    if new_tokens == 0:
        return
    peak = int(monitor.estimate_prefill_peak_bytes(new_tokens, prefill_step_size, cached_tokens=cached_tokens))
    current = max(0, int(current_usage_bytes))
    if current + peak <= hard_limit_bytes:
        return
    over = current + peak - hard_limit_bytes
    smaller = ""
    if prefill_step_size > 256:
        half = max(256, prefill_step_size // 2)
        try:
            alt = int(monitor.estimate_prefill_peak_bytes(new_tokens, half, cached_tokens=cached_tokens))
            if current + alt <= hard_limit_bytes:
                smaller = f"; a prefill step of {half} would fit (peak {format_bytes(alt)})"
        except OmlxProfilesError:
            pass
    message = (f"Prefill of {new_tokens} new tokens (+{max(int(cached_tokens), 0)} cached) would peak at "
               f"{format_bytes(current + peak)} (current {format_bytes(current)} + prefill {format_bytes(peak)}), "
               f"over the {format_bytes(hard_limit_bytes)} limit by {format_bytes(over)}. Shorten the prompt, "
               f"lower prefill_step_size (now {prefill_step_size}){smaller}, free memory, or raise the limit.")
    if not request_id:
        import uuid

        request_id = f"preflight-{uuid.uuid4().hex[:8]}"
    logger.warning("Preflight rejected (%d tokens, cached=%d, request_id=%s): %s",
                   num_prompt_tokens, cached_tokens, request_id, message)
    raise PrefillMemoryExceededError(message=message, request_id=request_id, estimated_bytes=current + peak,
                                     limit_bytes=int(hard_limit_bytes))


__all__ = [
    "MemoryInfo", "MemoryMonitor", "ModelInfoMissingError", "PrefillMemoryExceededError",
    "estimate_mla_kv_bytes_per_token", "estimate_unfused_sdpa_call_bytes", "raise_if_prefill_exceeds",
    "register_tiled_prefill_head_dim", "set_model_info_from_model", "warm_up_model",
]
