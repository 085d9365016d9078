"""Measure the memory high-water mark of a prompt prefill on a live mlx-lm model.

Why: the estimator promises a prefill peak within [1.00, 1.15] of the truth, and the truth is
``mx.get_peak_memory()`` on a real backend. Peaks are only comparable over a baseline, so the
baseline is the active memory after ``gc`` + ``mx.clear_cache()`` once the weights (and, for a
prefix-cache hit, the cached prefix) are resident. Because ``generate_step`` calls
``mx.clear_cache()`` between chunks, each chunk starts from a fresh low point: the peak is
reset before every model call and read after it, so ``peak_over_baseline`` is the maximum
over calls and every row shows which call set it.

Dead layers: in a ``generate`` prefill chunk only ``[c.state for c in cache]`` is evaluated,
so any layer whose output reaches no later cache (the last layer, and mlp-only layers after
the last cache) is never computed. That is true of real models too, but it means a model
needs at least one layer of every kind *followed by another cached layer* before the chunk
peak includes that kind's attention: build with ``shrink_config(..., layers="period+1")``.
A 1-layer llama measured 2.95 MB over the active memory for a 512-token chunk; 2 layers 11.7 MB.

Dispatch phase: MLX's CPU command encoder counts dispatches per stream across evaluations and makes every
10th one a scheduler task (``DISPATCHES_PER_TASK``, mlx/backend/cpu/encoder.h); ``eval_impl`` stops the host
once more than ``MAX_ACTIVE_TASKS`` (10) tasks are pending. Where those task boundaries fall in a call's ops
therefore depends on how many dispatches the stream saw before, modulo 10 - in a test process, on which
tests ran earlier - and the live set at the peak follows it (hidden 256, head_dim 256, a 256-token chunk
after 1,024 cached tokens: 18.55 to 19.74 MB over the ten phases). An engine that has served requests is
in any phase, so the estimate must cover all ten; ``phase`` makes the measurement choose one instead of
inheriting it (``phased_stream``).
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten
from mlx_lm.generate import maybe_quantize_kv_cache
from mlx_lm.models.cache import make_prompt_cache

from .probe import _replay, prompt_ids, run_schedule


def backend_info() -> dict:
    """Where the numbers were measured: MLX version, default device, GPU backends present."""
    import mlx_lm

    cuda = bool(hasattr(mx, "cuda") and mx.cuda.is_available())
    metal = bool(mx.metal.is_available())
    dev = mx.default_device()
    return {
        "mlx_version": mx.__version__,
        "mlx_lm_version": mlx_lm.__version__,
        "default_device": str(dev),
        "backend": "cpu" if dev == mx.cpu else ("metal" if metal else "cuda" if cuda else "gpu"),
        "metal_available": metal,
        "cuda_available": cuda,
    }


def phased_stream(phase: int) -> mx.Stream:
    """A new stream on the default device that has seen ``phase`` dispatches (modulo 10).

    A new stream's command encoder starts counting at 0. Every ``mx.eval`` adds one dispatch on its
    stream for the ``Synchronizer`` array ``eval_impl`` appends, and ``cpu::eval`` one per evaluated array
    that holds its inputs, plus the op's own work (none for a reshape, one for an add). So an eval of a
    reshape is 2 dispatches and an eval of an add 3 (checked by parity: a 150-matmul chain peaks at 56 live
    outputs after a pad of reshape evals, at 56/57 alternately after add evals); ``phase`` is reached
    as ``3 * (phase % 2) + 2 * k``. MLX keeps streams for the process's lifetime (one idle thread each):
    one per measured replay is cheap."""
    if isinstance(phase, bool) or not isinstance(phase, int) or not 0 <= phase < 10:
        raise ValueError(f"phase must be an int in 0..9, got {phase!r}")
    s = mx.new_stream(mx.default_device())
    one = mx.array([1.0])
    odd = phase % 2
    pairs = ((phase - 3 * odd) % 10) // 2
    with mx.stream(s):
        for _ in range(odd):
            mx.eval(one + one)
        for _ in range(pairs):
            mx.eval(one.reshape(1, 1))
    mx.synchronize(s)
    return s


def _settle() -> int:
    """Active bytes after freeing everything that can be freed (Python refs, MLX buffer cache)."""
    gc.collect()
    mx.clear_cache()
    return mx.get_active_memory()


@dataclass
class _ChunkRecorder:
    baseline: int
    rows: list[dict] = field(default_factory=list)

    def before(self, q_len: int, kv_len: int) -> None:
        self._active = mx.get_active_memory()
        mx.reset_peak_memory()

    def after(self, q_len: int, kv_len: int) -> None:
        peak = mx.get_peak_memory()
        self.rows.append({
            "call": len(self.rows),
            "q_len": q_len,
            "kv_len": kv_len,
            "active_before": self._active,
            "peak": peak,
            "active_before_over_baseline": self._active - self.baseline,
            "peak_over_baseline": peak - self.baseline,
        })


def measure_prefill_peak(
    model: nn.Module,
    tokens: int,
    prefill_step: int = 2048,
    cached: int = 0,
    schedule: str = "generate",
    *,
    kv_bits: int | None = None,
    kv_group_size: int = 64,
    quantized_kv_start: int = 5000,
    phase: int | None = None,
) -> dict:
    """Peak memory over the baseline while a ``tokens``-token prompt is prefilled.

    ``tokens`` is the whole prompt; ``cached`` of its first tokens are already in the cache
    (a prefix-cache hit): they are run first with the ``generate`` schedule, *before* the
    baseline is taken, and only the ``tokens - cached`` new tokens are measured, through the
    same loop ``run_schedule`` uses (``generate``: chunks of ``prefill_step``, then the last
    token alone; ``direct``: one call).

    ``phase``: run on ``phased_stream(phase)`` (the prefix too, then the measured calls), so the result does
    not depend on what ran in the process before; ``None``: mlx-lm's ``generation_stream``, in whatever
    dispatch phase earlier work left it (see the module doc).

    Returns a dict: ``peak_over_baseline`` (max over calls), ``baseline_active``, ``rows`` (per
    call: q_len, kv_len, active_before, peak and both over the baseline), ``cache_nbytes``
    (sum of ``c.nbytes`` at the end), ``cache_held`` (active memory over the empty-cache
    state once everything transient is freed: nbytes plus any larger buffer a cache view keeps
    alive, prefix included), ``cache_nbytes_before`` (the cached prefix), ``weights_nbytes``,
    the request, and ``backend_info()``.
    """
    if not 0 <= cached < tokens:
        raise ValueError(f"need 0 <= cached < tokens, got cached={cached}, tokens={tokens}")
    ids = prompt_ids(tokens)
    mx.eval(ids)
    cache = make_prompt_cache(model)
    new = ids[cached:]
    mx.eval(new)
    stream = None if phase is None else phased_stream(phase)
    empty = _settle()
    if cached:
        run_schedule(model, ids[:cached], "generate", prefill_step, kv_bits, kv_group_size,
                     quantized_kv_start, cache=cache, stream=stream)
    start_nbytes = sum(c.nbytes for c in cache) if cached else 0
    base0 = _settle()
    rec = _ChunkRecorder(baseline=base0)

    def quantize(c: list) -> None:
        maybe_quantize_kv_cache(
            c, quantized_kv_start=quantized_kv_start, kv_group_size=kv_group_size, kv_bits=kv_bits
        )

    _replay(model, new, cache, schedule, prefill_step, quantize, rec, stream)
    held = _settle() - empty
    weights = sum(p.nbytes for _, p in tree_flatten(model.parameters()))
    return {
        "tokens": tokens,
        "cached": cached,
        "schedule": schedule,
        "prefill_step": prefill_step,
        "kv_bits": kv_bits,
        "phase": phase,
        "baseline_active": base0,
        "peak_over_baseline": max(r["peak_over_baseline"] for r in rec.rows),
        "rows": rec.rows,
        "cache_nbytes": int(sum(c.nbytes for c in cache)),
        "cache_nbytes_before": int(start_nbytes),
        "cache_held": int(held),
        "weights_nbytes": int(weights),
        **backend_info(),
    }
