"""A drop-in for oMLX's ``omlx/memory_monitor.py``, backed by the profile estimator.

Swap it in with one line (``omlx/memory_monitor.py``: ``from omlx_profiles.compat import *``). Same names
and call signatures as oMLX's module at 70fa3482 (``reference/seed_memory_monitor.txt``) and the APIs its
main branch added since: ``MemoryMonitor`` (``set_model_info`` incl. ``rotating_layer_specs`` /
``prefill_memory_profile``, ``has_model_info``, ``estimate_block_memory``, ``estimate_prompt_kv_bytes``,
``estimate_resident_kv_bytes``, ``estimate_prefill_peak_bytes``, ``estimate_chunk_transient_bytes``,
``estimate_blocks_to_free``, ``set_fixed_state_bytes`` / ``fixed_state_bytes``, ...),
``set_model_info_from_model``, ``raise_if_prefill_exceeds``, ``collect_kv_layer_specs``,
``make_prefill_memory_profile``, ``register_tiled_prefill_head_dim``, ``estimate_unfused_sdpa_call_bytes``,
``estimate_mla_kv_bytes_per_token``, ``MemoryInfo`` and ``PrefillMemoryExceededError``.

Behaves as oMLX's callers expect:

* **The guard's error is oMLX's own.** When ``omlx.exceptions`` is importable, ``raise_if_prefill_exceeds``
  raises an instance of both ``omlx.exceptions.PrefillMemoryExceededError`` (which oMLX's server maps to
  HTTP 400) and this module's ``PrefillMemoryExceededError``.
* **No model info is a logged no-op**, as in oMLX: the estimates return 0 and the guard lets the request
  through, with a warning that says why it cannot guard (``has_model_info()`` tells callers beforehand).
  Unlike the old module nothing is guessed: no 32-layer / 8-head / 128-dim default stands in for a model.
  (The project's own API, ``omlx_profiles.Estimator``, stays strict.)
* **Bad arguments are errors** naming the argument (``ValueError``), never a silent 0.

Where oMLX's numbers were wrong, the facade's are the measured ones (every method's docstring says how):

* **The peak is the measured mechanism, term by term**, not "KV of the new tokens + one SDPA call":
  MLX allocates ahead of the device, so the peak holds several layers' activations, the old KV buffer a
  growing cache copies, masks, MoE/MLP activations (``omlx_profiles.peak``). The old formula was 0.01-0.52
  of measured prefill peaks on an H200 (issue 5).
* **Kernel routes per backend and MLX version** (``profiles/kernels``), not one hard-coded Metal table.
* **Score bytes are the compute dtype** and the fallback keeps the scaled q and the output in that dtype
  too; the old module charged the output as fp32.
* **KV bytes are exact**: mlx-lm allocates in 256-token steps, sliding windows hold window-1+chunk rows
  during a chunk; per-layer cache kinds come from the profile.
* **A fractional KV width** (TurboQuant's ``dtype_size``) is priced the way oMLX runs it: a fresh prompt is
  prefilled at the model's width and its cache converted at the end (both copies alive), a restored
  TurboQuant prefix adds mlx-vlm's fp32 attention over the quantized cache; blocks are stored narrow.

Model info comes from ``set_profile(profile)`` (a registry profile: the best), from
``set_model_info_from_model`` (a live mlx-lm model through ``omlx_profiles.extract.profile_from_model``; a
config-only model through its config, ``model.config`` or ``model.args``, nested ``text_config`` too), or
from oMLX's ``set_model_info(num_layers, num_kv_heads, head_dim, ...)`` (a uniform profile is built from
those numbers; what they cannot tell -- MLP width -- is not charged, and the docstring says so).

The per-call estimates are precomputed (``omlx_profiles.peak.fast.FastPeak.peak``): a few integer
operations each, never below the exact model and never negative.

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

from .compat_read import (as_dict, cfg_get, collect_kv_layer_specs, dims, language_config, mla_kv_bytes_per_token,
                          model_config, model_dtype_size, pos_int)
from .errors import OmlxProfilesError
from .peak import kernels as _routes
from .units import format_bytes



def __getattr__(name: str) -> Any:
    """``mx`` (``mlx.core``, ``None`` without mlx), imported on first use: oMLX's module had it (its tests
    patch ``omlx.memory_monitor.mx.get_active_memory``), and the facade's estimates must not import mlx."""
    if name == "mx":
        return _mx()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _mx():
    try:
        import mlx.core as mx
    except Exception:  # noqa: BLE001
        return None
    return mx

logger = logging.getLogger(__name__)

DEFAULT_BACKEND_ENV = "OMLX_PROFILES_BACKEND"
# oMLX's module-level names its own code and tests import (kept with the values oMLX 70fa3482 had; the
# facade does not use them: its kernel routes come from profiles/kernels per backend and MLX version)
_SDPA_VECTOR_QUERY_TOKEN_THRESHOLD = 8
_SDPA_FULL_SUPPORTED_HEAD_DIMS = frozenset({64, 80, 128})
_SDPA_VECTOR_SUPPORTED_HEAD_DIMS = frozenset({64, 96, 128, 256})
_SDPA_FALLBACK_SCORE_DTYPE_SIZE = 2
_cfg_get = cfg_get
_pos_int = pos_int


class ModelInfoMissingError(OmlxProfilesError, RuntimeError):
    """Kept for callers that catch it; the facade no longer raises it (no model info is a logged no-op,
    as oMLX expects). The project's own API raises its own typed errors."""


class PrefillMemoryExceededError(OmlxProfilesError):
    """A prompt's prefill peak would pass the memory limit: ``message``, ``request_id``,
    ``estimated_bytes``, ``limit_bytes``. ``raise_if_prefill_exceeds`` raises a subclass that is also
    oMLX's ``omlx.exceptions.PrefillMemoryExceededError`` when that is importable."""

    def __init__(self, message: str, request_id: str | None = None, estimated_bytes: int = 0,
                 limit_bytes: int = 0, details: dict | None = None):
        super().__init__(message)
        self.message = message
        self.request_id = request_id
        self.estimated_bytes = int(estimated_bytes)
        self.limit_bytes = int(limit_bytes)
        self.details = details or {}


_BOTH: dict[type, type] = {}


def prefill_error_class() -> type:
    """The class ``raise_if_prefill_exceeds`` raises: oMLX's ``PrefillMemoryExceededError`` and ours at
    once when ``omlx.exceptions`` is importable (oMLX's server maps its class to HTTP 400; anything else
    becomes a 500), else ours."""
    try:
        from omlx.exceptions import PrefillMemoryExceededError as theirs  # type: ignore[import-not-found]
    except Exception:  # noqa: BLE001 - not running inside oMLX (or an oMLX without the class)
        return PrefillMemoryExceededError
    if not isinstance(theirs, type) or not issubclass(theirs, BaseException):
        return PrefillMemoryExceededError
    if issubclass(theirs, PrefillMemoryExceededError):
        return theirs
    both = _BOTH.get(theirs)
    if both is None:
        def __init__(self, message, request_id=None, estimated_bytes=0, limit_bytes=0, details=None):
            try:
                theirs.__init__(self, message, request_id=request_id, estimated_bytes=estimated_bytes,
                                limit_bytes=limit_bytes)
            except TypeError:  # an oMLX whose class takes other arguments: the message is enough for it
                theirs.__init__(self, message)
            self.message = message
            self.request_id = request_id
            self.estimated_bytes = int(estimated_bytes)
            self.limit_bytes = int(limit_bytes)
            if details is not None or not hasattr(self, "details"):
                self.details = details or {}

        try:
            both = type("PrefillMemoryExceededError", (theirs, PrefillMemoryExceededError),
                        {"__init__": __init__, "__module__": __name__,
                         "__doc__": PrefillMemoryExceededError.__doc__})
        except TypeError:  # layouts that cannot be combined: oMLX's class is the one its server maps
            both = theirs
        _BOTH[theirs] = both
    return both


@dataclass
class MemoryInfo:
    """Current GPU memory state (as oMLX's)."""

    total_bytes: int
    used_bytes: int
    available_bytes: int
    utilization: float


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
    s = score_dtype_size
    return int(n_q_heads * query_tokens * kv_len * s + 2 * n_q_heads * query_tokens * head_dim * s)


def estimate_mla_kv_bytes_per_token(config: Any, cache_list: Any, dtype_size: float) -> float | None:
    """Resident KV bytes per token of an MLA model (latent ``kv_lora_rank`` keys + ``qk_rope_head_dim``
    values, one head) with, on DSA layers (a CacheList of two), the indexer cache. The indexer's value
    width follows the installed mlx-lm (0.31.x: zero-width values; 0.32.x: values as wide as the keys;
    none installed: the wider); layers are counted from the cache objects as oMLX did."""
    return mla_kv_bytes_per_token(config, cache_list, dtype_size)


def _counts(new_tokens, chunk_size, cached_tokens) -> tuple[int, int, int]:
    """oMLX took anything; a bad count here is an error naming the argument (never a silent 0)."""
    from .validation import check_count

    return (check_count("new_tokens", new_tokens), check_count("chunk_size", chunk_size, minimum=1),
            check_count("cached_tokens", cached_tokens))


def _dtype_name(size: float | None) -> str:
    return "fp32" if size and size >= 4 else "bf16"


def _default_backend() -> str:
    env = os.environ.get(DEFAULT_BACKEND_ENV)
    if env in _routes.BACKENDS:
        return env
    mx = _mx()
    if mx is None:
        return "metal"
    try:
        if mx.metal.is_available():
            return "metal"
        if hasattr(mx, "cuda") and mx.cuda.is_available():
            return "cuda"
        return "cpu"
    except Exception:  # noqa: BLE001
        return "metal"


def _mlx_version() -> str | None:
    return getattr(_mx(), "__version__", None)


def _step_rows(tokens: int) -> int:
    """Rows a ``KVCache`` holds after ``tokens``: mlx-lm allocates in steps of 256 (measured: the live caches
    of every family agree, tests/test_kv_live.py); oMLX's per-token override counted ``tokens``."""
    return -(-int(tokens) // 256) * 256


def _positive_number(name: str, v: Any, *, allow_none: bool = True) -> None:
    if v is None and allow_none:
        return
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 < v < float("inf")):
        raise ValueError(f"set_model_info: {name} must be a positive finite number, got {v!r}")


class MemoryMonitor:
    """Memory monitor for oMLX's paged SSD KV cache and its prefill guard, backed by profiles.

    Extra keyword arguments (not in oMLX): ``backend`` (``metal``/``cuda``/``cpu``; default: the running
    MLX, else ``$OMLX_PROFILES_BACKEND``, else metal), ``mlx_version`` (default: the installed MLX, else the
    newest kernel table), ``max_memory`` (bytes; default: MLX's recommended working set).
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
        self._fixed_state_bytes = 0
        self._warned_no_info = False
        self._clear_model()

    # -- model info ---------------------------------------------------------------------------------
    def _clear_model(self) -> None:
        self._profile = None
        self._fast = None
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
        ``_turboquant_peak``). ``kv_bytes_per_token``: their exact per-token bytes (MLA), which scales them
        everywhere. Sliding and state caches stay at the activation width (TurboQuant passes them through)."""
        self._clear_model()
        self._apply_profile(profile, dtype_size=dtype_size, kv_bytes_per_token=kv_bytes_per_token)
        p = profile
        self._num_layers = p.num_layers
        self._num_kv_heads = p.num_kv_heads or 1
        self._head_dim = p.head_dim or (p.mla.kv_lora_rank if p.mla else None)
        self._num_attention_heads = p.num_heads
        kinds = [p.layer_types[n].entries[0].kind for n in p.layer_names]
        self._num_kv_cache_layers = sum(1 for k in kinds if k in ("full", "latent", "chunked"))
        wins: dict[int, int] = {}
        for n in p.layer_names:
            for e in p.layer_types[n].entries:
                if e.kind == "sliding":
                    wins[e.window] = wins.get(e.window, 0) + 1
        self._rotating_layer_specs = tuple((c, w) for w, c in sorted(wins.items()))
        self._log_model("profile %s (%s)" % (p.name, p.source))

    def _apply_profile(self, profile, *, dtype_size: float | None, kv_bytes_per_token: float | None,
                       layer_scale: float = 1.0) -> None:
        from .kv.bytes import kv_report
        from .peak.fast import FastPeak
        from .peak.replay import KV_SCALED_KINDS

        act = 4 if profile.dtype == "fp32" else 2
        self._profile = profile
        self._dtype_size = dtype_size if dtype_size else act
        self._score_dtype_size = act
        self._kv_bytes_per_token_override = float(kv_bytes_per_token) if kv_bytes_per_token else None
        full_row = sum(e.row_elements for n in profile.layer_names for e in profile.layer_types[n].entries
                       if e.kind in KV_SCALED_KINDS) * act
        if self._kv_bytes_per_token_override is not None and full_row:
            scale = self._kv_bytes_per_token_override / full_row
        else:
            # a KV stored wider than the activations is wider throughout; a narrower one (TurboQuant) is not:
            # oMLX prefills a fresh request at the model's width and quantizes the cache once at the end
            # (scheduler.py, "Fresh TurboQuant requests run fp16 during the cold prefill loop")
            scale = max(self._dtype_size / act, 1.0) * layer_scale
        self._kv_scale = scale
        self._store_scale = min(self._dtype_size / act, 1.0)  # what a converted (TurboQuant) cache keeps
        self._fast = FastPeak(profile, self._backend, self._mlx_version_for_tables(), kv_scale=scale)
        # bytes per token of the unbounded caches: 256 tokens of a single-call prompt / 256 (exact per step)
        full = kv_report(profile, 512, schedule="direct").total - kv_report(profile, 256, schedule="direct").total
        self._kv_per_token = full // 256

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
        for name, v in (("num_layers", num_layers), ("num_kv_heads", num_kv_heads), ("head_dim", head_dim)):
            if not _pos_int(v):
                raise ValueError(f"set_model_info: {name} must be a positive integer, got {v!r}")
        for name, v in (("num_attention_heads", num_attention_heads), ("hidden_size", hidden_size),
                        ("intermediate_size", intermediate_size)):
            if v is not None and not _pos_int(v):
                raise ValueError(f"set_model_info: {name} must be a positive integer or None, got {v!r}")
        if num_kv_cache_layers is not None and (isinstance(num_kv_cache_layers, bool)
                                                or not isinstance(num_kv_cache_layers, int) or num_kv_cache_layers < 0):
            raise ValueError(f"set_model_info: num_kv_cache_layers must be an integer >= 0 or None, "
                             f"got {num_kv_cache_layers!r}")
        _positive_number("dtype_size", dtype_size, allow_none=False)
        _positive_number("compute_dtype_size", compute_dtype_size)
        _positive_number("kv_bytes_per_token", kv_bytes_per_token)
        rot: list[tuple[int, int]] = []
        for spec in rotating_layer_specs or ():
            try:
                count, window = spec
            except (TypeError, ValueError):
                raise ValueError(f"set_model_info: rotating_layer_specs entries are (count, window), got {spec!r}")
            if _pos_int(count) and _pos_int(window):
                rot.append((int(count), int(window)))
        ane = ane_prefill_transient_bytes
        if isinstance(ane, bool) or not isinstance(ane, int):
            raise ValueError(f"set_model_info: ane_prefill_transient_bytes must be an integer, got {ane!r}")

        ours = getattr(prefill_memory_profile, "profile", None)
        if isinstance(prefill_memory_profile, ProfilePrefillMemory) and ours is not None:
            self.set_profile(ours, dtype_size=dtype_size)
            self._ane_prefill_transient_bytes = max(int(ane), 0)
            self._update_plain()
            return

        n_q = num_attention_heads or num_kv_heads
        act = compute_dtype_size if compute_dtype_size else 2
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
        from .registry.profile import Profile
        from .schema.family import CompleteVariant

        v = CompleteVariant.model_validate({
            "mlx_model_type": "llama", "num_layers": num_layers, "dtype": _dtype_name(act),
            "num_heads": n_q, "num_kv_heads": num_kv_heads, "head_dim": head_dim,
            "hidden_size": hidden_size or n_q * head_dim,
            **({"intermediate_size": intermediate_size} if intermediate_size else {}),
            "layers": {"kinds": {k: v for k, v in kinds.items() if k in types}, "types": types},
        })
        prof = Profile.from_variant(v, name="set_model_info", family="seed", source="set_model_info()")
        if not intermediate_size:
            # no MLP width known: charge attention only (say so instead of inventing a width)
            import dataclasses

            prof = dataclasses.replace(prof, intermediate_size=1)
        self._clear_model()
        self._apply_profile(prof, dtype_size=dtype_size, kv_bytes_per_token=kv_bytes_per_token,
                            layer_scale=layer_scale)
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
        self._fixed_state_bytes = max(0, int(n))

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
        from .validation import check_count

        check_count("block_size", block_size)
        if num_layers or num_kv_heads or head_dim or dtype_size:
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
        return float(block_size * self._block_bytes_per_token())

    def _block_bytes_per_token(self) -> float:
        from .peak.replay import KV_SCALED_KINDS

        p = self._profile
        act = 4 if p.dtype == "fp32" else 2
        per = 0.0
        for n in p.layer_names:
            for e in p.layer_types[n].entries:
                if e.kind in KV_SCALED_KINDS:
                    per += e.row_elements * act * self._kv_scale * self._store_scale
                elif e.kind in ("sliding", "chunked"):
                    per += e.row_elements * act
        return per

    def _scaled_kv(self, tokens: int, chunk: int = 2048) -> int:
        from .kv.bytes import kv_report
        from .peak.fast import _scaled_total

        rep = kv_report(self._profile, int(tokens), chunk=chunk)
        return rep.total if self._kv_scale == 1.0 else _scaled_total(self._profile, rep, self._kv_scale)

    def estimate_prompt_kv_bytes(self, num_tokens: int) -> float:
        """Resident KV bytes after a prompt of ``num_tokens`` (exact: mlx-lm's 256-token allocation step,
        bounded sliding windows, constant states) as the prefill holds them: at the model's width even with
        a TurboQuant ``dtype_size`` (oMLX quantizes a fresh request's cache once, after its prefill; its
        callers use this number for prefill-time growth). Differs from oMLX (tokens x per-token bytes x
        dtype_size): capacity rounding and windows are applied; without model info: 0, logged."""
        from .validation import check_count

        if check_count("num_tokens", num_tokens) == 0:
            return 0
        if self._profile is None:
            return self._no_info("estimate_prompt_kv_bytes")
        if self._kv_bytes_per_token_override is not None:
            return _step_rows(num_tokens) * self._kv_bytes_per_token_override
        kv = self._scaled_kv(num_tokens)
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
        from .validation import check_count

        n = check_count("num_tokens", num_tokens)
        chunk = check_count("chunk_tokens", chunk_tokens, minimum=1)
        if n == 0:
            return 0
        if self._profile is None:
            self._no_info("estimate_resident_kv_bytes")
            return self._fixed_state_bytes
        if self._kv_bytes_per_token_override is not None:
            return _step_rows(n) * self._kv_bytes_per_token_override + self._fixed_state_bytes
        from .kv.bytes import kv_report
        from .peak.replay import KV_SCALED_KINDS, scale_up

        p = self._profile
        act = 4 if p.dtype == "fp32" else 2
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
        total = scale_up(scaled, self._kv_scale) + other + max(state, self._fixed_state_bytes)
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
                and new_tokens >= 0 and chunk_size >= 1 and cached_tokens >= 0:
            try:
                return self._fast.peak(new_tokens, chunk_size, cached_tokens)
            except OmlxProfilesError as e:
                return self._unknown_peak("estimate_prefill_peak_bytes", e)
        new_tokens, chunk_size, cached_tokens = _counts(new_tokens, chunk_size, cached_tokens)
        f = self._fast
        if f is None:
            return self._no_info("estimate_prefill_peak_bytes")
        try:
            peak = f.peak(new_tokens, chunk_size, cached_tokens)
        except OmlxProfilesError as e:
            return self._unknown_peak("estimate_prefill_peak_bytes", e)
        if self._store_scale != 1.0 and new_tokens:
            peak = self._turboquant_peak(peak, new_tokens, chunk_size, cached_tokens)
        if self._ane_prefill_transient_bytes and peak:
            peak += self._ane_prefill_transient_bytes
        if self._prefill_memory_profile is not None and new_tokens:
            peak = max(peak, self._foreign_peak(new_tokens, chunk_size, cached_tokens))
        return peak

    def _turboquant_peak(self, peak: int, new: int, chunk: int, cached: int) -> int:
        """The prefill peak when the KV is kept at a fractional width (oMLX's TurboQuant), from oMLX's and
        mlx-vlm's source (a bound: nothing here was measured).

        * A fresh request (no cached prefix) is prefilled at the model's width -- the peak above -- and its
          cache then converted whole (``TurboQuantKVCache.from_cache`` per layer): the full-width cache and
          its quantized copy can be alive together, so the peak is at least both.
        * A restored TurboQuant prefix stays quantized while the suffix is prefilled; mlx-vlm's attention
          over it either materializes fp32 scores (``prefill_attention``: ``[n_q, qL, kL]``, masked and
          softmaxed: three such buffers) or dequantizes the keys and values to fp32 and casts them to the
          activation dtype (``dequantize``): the larger of the two is added for the layer in flight. The
          rows the suffix adds stay charged at the model's width (the safe side)."""
        from .peak.replay import scale_up

        if cached == 0:
            full, other = self._kv_parts(new, chunk)
            return max(peak, full + other + scale_up(full, self._store_scale))
        p = self._profile
        act = 4 if p.dtype == "fp32" else 2
        n_q, n_kv, hd = self._num_attention_heads or 1, self._num_kv_heads or 1, self._head_dim or 1
        q, kl = min(chunk, new), cached + new
        scores = 3 * n_q * q * kl * 4
        dequant = 2 * n_kv * kl * hd * (4 + act)
        return peak + max(scores, dequant)

    def _kv_parts(self, tokens: int, chunk: int) -> tuple[int, int]:
        """(full-attention caches at their prefill width, every other cache) after ``tokens``."""
        from .kv.bytes import kv_report
        from .peak.replay import KV_SCALED_KINDS, scale_up

        p = self._profile
        rep = kv_report(p, int(tokens), chunk=chunk)
        full = other = 0
        for lb in rep.layers:
            for e, x in zip(p.layer_types[lb.kind].entries, lb.entries):
                if e.kind in KV_SCALED_KINDS:
                    full += x.nbytes
                else:
                    other += x.nbytes
        return scale_up(full, self._kv_scale), other

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
        from .peak.kernels import SdpaCall, tiled_state

        p = self._profile
        act = 4 if p.dtype == "fp32" else 2
        n_q, n_kv, hd = self._num_attention_heads or 1, self._num_kv_heads or 1, self._head_dim or 1
        q, kv = int(query_tokens), max(int(kv_len), int(query_tokens))
        call = SdpaCall(n_q, n_kv, hd, hd, q, kv, mask="causal" if q > 1 else "none", dtype=p.dtype)
        d = self._fast.routes.route(call, tiled_state()[1])
        out = n_q * q * hd * act
        if d.route in ("fused", "vector"):
            return out
        if d.route == "tiled":
            return out + n_q * q * min(d.kv_tile or kv, kv) * act
        return estimate_unfused_sdpa_call_bytes(n_q, q, kv, hd, act)

    def estimate_chunk_transient_bytes(self, n_tokens: int, kv_len: int, **_newer_options: Any) -> int:
        """Transient bytes of ONE prefill chunk of ``n_tokens`` queries over ``kv_len`` keys: what the
        chunk allocates beyond the cache it held before (the rows it adds, the activations in flight, the
        old KV buffers it copies). Differs from oMLX (the SDPA score/output buffer of one layer): the
        executor's run-ahead keeps several layers' activations live, and the rows the chunk adds are in it
        (oMLX adds ``estimate_prompt_kv_bytes(n_tokens)`` on top: counted twice, the safe side). Without
        model info: 0 (logged). Never negative."""
        from .validation import check_count

        n = check_count("n_tokens", n_tokens)
        kv = check_count("kv_len", kv_len)
        if self._fast is None:
            return self._no_info("estimate_chunk_transient_bytes")
        if n == 0:
            return 0
        try:
            return self._fast.chunk_transient(n, kv)
        except OmlxProfilesError as e:
            return self._unknown_peak("estimate_chunk_transient_bytes", e)

    def estimate_blocks_to_free(self, bytes_to_free: int, block_size: int) -> int:
        """Blocks of ``block_size`` tokens to evict to free ``bytes_to_free`` (rounded up, at least 1).
        As oMLX, raises ``RuntimeError`` when the monitor was built with eviction disabled; without model
        info 0 (no block size is known, nothing is evicted on a guess)."""
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


def make_prefill_memory_profile(config: Any, *, compute_dtype_size: float = 2, backend: str | None = None,
                                mlx_version: str | None = None, **_newer_options: Any) -> ProfilePrefillMemory | None:
    """A prefill-memory strategy for the model ``config`` describes (a dict or a config object; a nested
    ``text_config`` is read the way mlx-lm reads it): the config's full profile -- every layer kind,
    head count and width -- through ``omlx_profiles.extract.profile_from_config``. ``None`` (logged) when
    the config is not one mlx-lm can build or this package models: the caller keeps its uniform numbers.
    Unlike oMLX's (DeepSeek-V4 and Qwen4 only), it covers every family the registry knows."""
    from .errors import InputError, UnsupportedError
    from .extraction.from_config import profile_from_config

    d = as_dict(config)
    if not d:
        return None
    dtype = "fp32" if compute_dtype_size and compute_dtype_size >= 4 else None
    try:
        prof = profile_from_config(d, source="make_prefill_memory_profile()", dtype=dtype)
    except (InputError, UnsupportedError, ValueError) as e:
        logger.info("make_prefill_memory_profile: no profile for this config (%s)", e)
        return None
    return ProfilePrefillMemory(prof, backend=backend, mlx_version=mlx_version)


def _is_live_mlx_model(model: Any) -> bool:
    try:
        import mlx.nn as nn
    except Exception:  # noqa: BLE001
        return False
    return isinstance(model, nn.Module)


def set_model_info_from_model(monitor: MemoryMonitor, model: Any) -> None:
    """Populate ``monitor`` from ``model``, the best way the model allows:

    1. a live mlx-lm model (an ``mlx.nn.Module``): its profile, ``model.args`` checked by a cache probe
       (``omlx_profiles.extract.profile_from_model``): every layer kind is known;
    2. a model that only exposes its config (``model.config`` -- an object or a dict -- else
       ``model.args``; the language model's part under ``text_config`` / ``language_config`` /
       ``llm_config`` when present): the config's profile (``profile_from_config``), or, when the config
       is not a full one, oMLX's numbers (layers, KV heads, head_dim, query heads, dtype from
       ``model.dtype``) with the KV layer kinds from ``model.make_cache()`` when it has one
       (``collect_kv_layer_specs``, MLA bytes per token from ``estimate_mla_kv_bytes_per_token``).

    Errors are logged, not raised, as in oMLX; a model nothing can be read from leaves the monitor without
    model info (its estimates return 0, logged)."""
    if _is_live_mlx_model(model):
        try:
            from .live.from_model import profile_from_model  # lazy: imports mlx through the live probe

            monitor.set_profile(profile_from_model(model))
            return
        except Exception as e:  # noqa: BLE001 - fall back to the config, as oMLX reads it
            logger.info("set_model_info_from_model: the cache probe failed (%s: %s); reading the config",
                        type(e).__name__, e)
    config = model_config(model)
    if config is None:
        logger.warning("set_model_info_from_model: %s has neither a config nor args; the monitor has no "
                       "model info", type(model).__name__)
        monitor._clear_model()
        return
    dt_size = model_dtype_size(model)
    full = as_dict(language_config(config)) if as_dict(config) else None
    if full and isinstance(full.get("model_type"), str):
        try:
            from .extraction.from_config import profile_from_config

            top = as_dict(config)
            prof = profile_from_config(top if top and isinstance(top.get("model_type"), str) else full,
                                       source="model.config", dtype="fp32" if dt_size == 4 else None)
            monitor.set_profile(prof)
            return
        except Exception as e:  # noqa: BLE001 - not a complete config: read its numbers, as oMLX did
            logger.debug("set_model_info_from_model: config not readable as a profile (%s: %s)",
                         type(e).__name__, e)
    d = dims(config)
    if not (d.num_layers and d.num_kv_heads and d.head_dim):
        logger.warning("set_model_info_from_model: incomplete model dims (layers=%s, kv_heads=%s, head_dim=%s);"
                       " the monitor has no model info", d.num_layers, d.num_kv_heads, d.head_dim)
        monitor._clear_model()
        return
    cache_list = None
    full_layers, rotating, state_layers = 0, [], 0
    make_cache = getattr(model, "make_cache", None)
    if callable(make_cache) and not type(make_cache).__module__.startswith("unittest.mock"):
        try:
            cache_list = make_cache()
            full_layers, rotating, state_layers = collect_kv_layer_specs(cache_list)
        except Exception as e:  # noqa: BLE001
            logger.debug("set_model_info_from_model: make_cache failed (%s)", e)
    kv_layers = full_layers if (full_layers or rotating or state_layers) else None
    try:
        monitor.set_model_info(
            num_layers=d.num_layers, num_kv_heads=d.num_kv_heads, head_dim=d.head_dim, dtype_size=dt_size,
            num_attention_heads=d.num_attention_heads, num_kv_cache_layers=kv_layers,
            compute_dtype_size=dt_size, kv_bytes_per_token=mla_kv_bytes_per_token(config, cache_list, dt_size),
            rotating_layer_specs=rotating, hidden_size=d.hidden_size, intermediate_size=d.intermediate_size)
    except Exception as e:  # noqa: BLE001 - logged, as oMLX
        logger.warning("set_model_info_from_model: %s: %s; the monitor has no model info", type(e).__name__, e)
        monitor._clear_model()


def warm_up_model(model: Any, tokens: int = 64) -> float:
    """Run one short prefill through a freshly loaded mlx-lm ``model`` and free it (seconds taken).

    Not in oMLX. Call it once after loading a model and before admitting requests: the prefill
    estimates are for a warmed-up process, and on MLX's CUDA backend the first prefill after loading holds
    more in flight than any later one (measured on an H200 up to +46%; one 64-token prefill removed it:
    ``omlx_profiles.live.warmup``). Imports mlx, unlike the estimators."""
    from .live.warmup import warm_up  # lazy: the facade's estimates must not import mlx

    return warm_up(model, tokens)


def _ceiling_words(current: int, **ceilings: Any) -> tuple[str, str]:
    """Which ceiling binds and what to change, from newer oMLX's helper when it is there."""
    try:
        from omlx.exceptions import describe_ceiling_binding  # type: ignore[import-not-found]

        return describe_ceiling_binding(static=ceilings.get("static_ceiling_bytes", 0),
                                        dynamic=ceilings.get("dynamic_ceiling_bytes", 0),
                                        metal_cap=ceilings.get("metal_cap_bytes", 0),
                                        tier=ceilings.get("memory_guard_tier", ""), current=current,
                                        fmt=format_bytes, tail="reduce context length")
    except Exception:  # noqa: BLE001 - an oMLX without it, or none at all
        return "", "free memory, or loosen memory_guard_tier (safe -> balanced -> aggressive)"


def raise_if_prefill_exceeds(monitor: MemoryMonitor | None, *, prefill_memory_guard: bool, hard_limit_bytes: int,
                             current_usage_bytes: int, prefill_step_size: int, num_prompt_tokens: int,
                             cached_tokens: int = 0, request_id: str | None = None, **ceilings: Any) -> None:
    """Raise ``PrefillMemoryExceededError`` (oMLX's class too, when importable) if ``current + prefill
    peak`` would pass ``hard_limit_bytes``.

    ``cached_tokens``: prompt KV already resident in ``current_usage_bytes`` (a paged prefix hit); a cache
    that re-allocates KV on a hit must pass 0. No-op when the guard is disabled, no limit is set, no
    monitor, or the monitor has no model info (logged: it cannot guard), as in oMLX. Newer oMLX's ceiling
    breakdown (``static_ceiling_bytes``, ``dynamic_ceiling_bytes``, ``metal_cap_bytes``,
    ``memory_guard_tier``) words the message when given. The message names the numbers and what to
    change: fewer tokens, a smaller prefill step, or more memory."""
    if not prefill_memory_guard or hard_limit_bytes <= 0 or monitor is None:
        return
    new_tokens = max(int(num_prompt_tokens) - max(int(cached_tokens), 0), 0)
    if new_tokens == 0:
        return
    cached = max(int(cached_tokens), 0)
    peak = int(monitor.estimate_prefill_peak_bytes(new_tokens, prefill_step_size, cached_tokens=cached))
    if peak <= 0:
        return  # no model info: logged by the monitor
    current = max(0, int(current_usage_bytes))
    if current + peak <= hard_limit_bytes:
        return
    over = current + peak - hard_limit_bytes
    smaller = ""
    if prefill_step_size > 256:
        half = max(256, prefill_step_size // 2)
        try:
            alt = int(monitor.estimate_prefill_peak_bytes(new_tokens, half, cached_tokens=cached))
            if current + alt <= hard_limit_bytes:
                smaller = f"; a prefill step of {half} would fit (peak {format_bytes(alt)})"
        except (OmlxProfilesError, ValueError):
            pass
    binding, advice = _ceiling_words(current, **ceilings)
    message = (f"Prefill would require ~{format_bytes(current + peak)} peak (current {format_bytes(current)} + "
               f"KV+SDPA and activations {format_bytes(peak)} for {new_tokens} new tokens, {cached} cached) but "
               f"{binding + ' ' if binding else ''}ceiling is {format_bytes(hard_limit_bytes)}, over by "
               f"{format_bytes(over)} (usage {current / 1024**3:.1f} GB, ceiling {hard_limit_bytes / 1024**3:.1f} GB)."
               f" Shorten the prompt, lower prefill_step_size (now {prefill_step_size}){smaller}, or {advice}.")
    if not request_id:
        import uuid

        request_id = f"preflight-{uuid.uuid4().hex[:8]}"
    logger.warning("Preflight rejected (%d tokens, cached=%d, request_id=%s): %s",
                   num_prompt_tokens, cached_tokens, request_id, message)
    raise prefill_error_class()(message=message, request_id=request_id, estimated_bytes=current + peak,
                                limit_bytes=int(hard_limit_bytes))


__all__ = [
    "MemoryInfo", "MemoryMonitor", "ModelInfoMissingError", "PrefillMemoryExceededError", "ProfilePrefillMemory",
    "collect_kv_layer_specs", "estimate_mla_kv_bytes_per_token", "estimate_unfused_sdpa_call_bytes",
    "make_prefill_memory_profile", "mx", "prefill_error_class", "raise_if_prefill_exceeds",
    "register_tiled_prefill_head_dim", "set_model_info_from_model", "warm_up_model",
    "_SDPA_VECTOR_QUERY_TOKEN_THRESHOLD", "_SDPA_FULL_SUPPORTED_HEAD_DIMS", "_SDPA_VECTOR_SUPPORTED_HEAD_DIMS",
    "_SDPA_FALLBACK_SCORE_DTYPE_SIZE",
]
