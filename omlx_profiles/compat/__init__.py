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
``set_model_info_from_model`` (a live mlx-lm model through ``omlx_profiles.live.from_model.profile_from_model``; a
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

Layout (a package so that no module mixes concerns; this file only re-exports, under oMLX's names):
``monitor`` (``MemoryMonitor``: model info in, estimates out; ``ProfilePrefillMemory``), ``seed`` (what
oMLX's monitor did besides estimating: device memory, stats, the running backend), ``uniform`` (oMLX's
``set_model_info`` numbers <-> a profile), ``kv_terms`` (the KV questions' arithmetic), ``sdpa`` (one
attention call; oMLX's SDPA names), ``from_model`` (model info from a loaded model or a config; warm-up),
``guard`` (``raise_if_prefill_exceeds`` and its errors), ``read`` (plain values from oMLX-side objects).
"""
from __future__ import annotations

from typing import Any

from .from_model import make_prefill_memory_profile, set_model_info_from_model, warm_up_model
from .guard import (ModelInfoMissingError, PrefillMemoryExceededError, logger, prefill_error_class,
                    raise_if_prefill_exceeds)
from .kv_terms import estimate_mla_kv_bytes_per_token
from .monitor import MemoryMonitor, ProfilePrefillMemory
from .read import cfg_get, collect_kv_layer_specs, pos_int
from .sdpa import (_SDPA_FALLBACK_SCORE_DTYPE_SIZE, _SDPA_FULL_SUPPORTED_HEAD_DIMS, _SDPA_VECTOR_QUERY_TOKEN_THRESHOLD,
                   _SDPA_VECTOR_SUPPORTED_HEAD_DIMS, estimate_unfused_sdpa_call_bytes, register_tiled_prefill_head_dim)
from .seed import DEFAULT_BACKEND_ENV, MemoryInfo, _mx

# oMLX's private helpers under the names its code used
_cfg_get = cfg_get
_pos_int = pos_int

# the classes oMLX sees keep the module path they had before the split (reprs, pickles, oMLX's logs)
for _cls in (MemoryInfo, MemoryMonitor, ModelInfoMissingError, PrefillMemoryExceededError, ProfilePrefillMemory):
    _cls.__module__ = __name__
del _cls


def __getattr__(name: str) -> Any:
    """``mx`` (``mlx.core``, ``None`` without mlx), imported on first use: oMLX's module had it (its tests
    patch ``omlx.memory_monitor.mx.get_active_memory``), and the facade's estimates must not import mlx."""
    if name == "mx":
        return _mx()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "MemoryInfo", "MemoryMonitor", "ModelInfoMissingError", "PrefillMemoryExceededError", "ProfilePrefillMemory",
    "collect_kv_layer_specs", "estimate_mla_kv_bytes_per_token", "estimate_unfused_sdpa_call_bytes",
    "make_prefill_memory_profile", "mx", "prefill_error_class", "raise_if_prefill_exceeds",
    "register_tiled_prefill_head_dim", "set_model_info_from_model", "warm_up_model",
    "_SDPA_VECTOR_QUERY_TOKEN_THRESHOLD", "_SDPA_FULL_SUPPORTED_HEAD_DIMS", "_SDPA_VECTOR_SUPPORTED_HEAD_DIMS",
    "_SDPA_FALLBACK_SCORE_DTYPE_SIZE",
]
