"""Replay mlx-lm's prompt schedules on a live model and report what its caches hold.

Why: resident-KV bytes depend on *how* the prompt is fed. mlx-lm's ``KVCache`` grows in
256-row steps per call, a ``RotatingKVCache`` keeps all rows of a first multi-token call and
trims only on later calls, and ``generate_step`` sends N-1 tokens in chunks and the last one
alone. So the harness replays ``mlx_lm.generate.generate_step``'s prompt loop line by line
(mlx-lm 0.32.2) rather than calling ``model(prompt)`` once, and keeps the one-call ``direct``
schedule as the other reference point.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Protocol

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.generate import generation_stream, maybe_quantize_kv_cache
from mlx_lm.models.cache import make_prompt_cache

SCHEDULES = ("generate", "direct")


class CallObserver(Protocol):
    """Hooks around every model call of a replay (``peak.py`` measures memory with them)."""

    def before(self, q_len: int, kv_len: int) -> None: ...

    def after(self, q_len: int, kv_len: int) -> None: ...


def prompt_ids(tokens: int, vocab: int = 256) -> mx.array:
    """Deterministic token ids in ``[0, vocab)``; 256 fits every real and shrunk vocab."""
    return (mx.arange(tokens, dtype=mx.int32) * 31 + 7) % vocab


def cache_offset(c: Any) -> int:
    """Tokens the cache entry has seen (CacheList: its first child; ArraysCache: 0)."""
    if hasattr(c, "caches"):
        return cache_offset(c.caches[0])
    return int(getattr(c, "offset", 0) or 0)


def _replay(
    model: nn.Module,
    prompt: mx.array,
    cache: list,
    schedule: str,
    prefill_step: int,
    quantize: Callable[[list], None],
    observer: CallObserver | None,
    stream: mx.Stream | None = None,
) -> None:
    """The body shared by ``run_schedule`` and ``measure_prefill_peak``.

    ``generate`` mirrors ``generate_step`` (mlx-lm 0.32.2, generate.py): while more than one
    token remains, ``model(prompt[:n])`` with ``n = min(prefill_step, remaining - 1)``, then
    ``maybe_quantize_kv_cache``, ``mx.eval([c.state for c in cache])`` and
    ``mx.clear_cache()``; the outputs of those calls are never evaluated, so the lm_head is not
    computed. Then ``_step`` on the last token: logits of the last position, quantize, log-
    softmax, greedy sample, evaluate. ``direct`` is one call of every token, then the same
    quantize and the evaluation of the cache state and the last position's logits (the full
    (1, N, vocab) logits are computed on the way: MLX does not push the slice into the matmul).
    ``stream``: where the ops run, mlx-lm's ``generation_stream`` by default (``measure.phased_stream`` gives
    a fresh one whose dispatch counter starts at a known value).
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, not {schedule!r}")
    if prefill_step < 1:
        raise ValueError("prefill_step must be >= 1")
    total = prompt.shape[0]
    if total < 1:
        raise ValueError("need at least one token")
    start = max((cache_offset(c) for c in cache), default=0)
    with mx.stream(generation_stream if stream is None else stream):
        if schedule == "direct":
            if observer:
                observer.before(total, start + total)
            logits = model(prompt[None], cache=cache)
            quantize(cache)
            mx.eval([c.state for c in cache], logits[:, -1, :])
            if observer:
                observer.after(total, start + total)
            return
        processed = 0
        while total - processed > 1:
            remaining = (total - processed) - 1
            n = min(prefill_step, remaining)
            if observer:
                observer.before(n, start + processed + n)
            model(prompt[:n][None], cache=cache)
            quantize(cache)
            mx.eval([c.state for c in cache])
            if observer:
                observer.after(n, start + processed + n)
            processed += n
            prompt = prompt[n:]
            mx.clear_cache()
        if observer:
            observer.before(1, start + total)
        logits = model(prompt[None], cache=cache)[:, -1, :]
        quantize(cache)
        logprobs = logits - mx.logsumexp(logits, keepdims=True)
        y = mx.argmax(logprobs, axis=-1)
        mx.eval(y, logprobs)
        if observer:
            observer.after(1, start + total)


def run_schedule(
    model: nn.Module,
    tokens: int | mx.array,
    schedule: str = "generate",
    prefill_step: int = 2048,
    kv_bits: int | None = None,
    kv_group_size: int = 64,
    quantized_kv_start: int = 5000,
    *,
    cache: list | None = None,
    stream: mx.Stream | None = None,
) -> list:
    """Feed a prompt of ``tokens`` tokens (or the given ids) and return the cache list.

    ``cache``: continue an existing cache (a prefix-cache hit); by default a fresh
    ``make_prompt_cache(model)``. ``kv_bits`` etc. are generate_step's arguments and convert
    caches in place in the list (``QuantizedKVCache``), exactly as mlx-lm does.
    """
    prompt = prompt_ids(tokens) if isinstance(tokens, int) else tokens
    cache = make_prompt_cache(model) if cache is None else cache

    def quantize(c: list) -> None:
        maybe_quantize_kv_cache(
            c, quantized_kv_start=quantized_kv_start, kv_group_size=kv_group_size, kv_bits=kv_bits
        )

    _replay(model, prompt, cache, schedule, prefill_step, quantize, None, stream)
    return cache


# --- reports ------------------------------------------------------------------------------


def _array_row(name: str, a: mx.array) -> dict:
    return {"name": name, "shape": list(a.shape), "dtype": str(a.dtype).removeprefix("mlx.core."),
            "nbytes": a.nbytes}


def _arrays(c: Any) -> list[dict]:
    """The arrays ``c.nbytes`` counts, in mlx-lm 0.32.2's layout (full buffers, not views)."""
    rows: list[dict] = []
    if hasattr(c, "cache") and isinstance(c.cache, list):  # ArraysCache
        for i, a in enumerate(c.cache):
            if a is not None:
                rows.append(_array_row(f"cache[{i}]", a))
        return rows
    for name in ("keys", "values"):
        a = getattr(c, name, None)
        if a is None:
            continue
        if isinstance(a, (tuple, list)):  # QuantizedKVCache: packed, scales, biases
            for part, x in zip(("packed", "scales", "biases"), a):
                rows.append(_array_row(f"{name}.{part}", x))
        else:
            rows.append(_array_row(name, a))
    return rows


def describe_cache(c: Any) -> dict:
    """One cache entry: class, nbytes, offset, bounds, arrays; CacheList children nested."""
    row: dict = {"class": type(c).__name__, "nbytes": int(c.nbytes) if not _empty(c) else 0}
    for attr in ("offset", "max_size", "keep", "chunk_size", "start_position", "bits",
                 "group_size"):
        v = getattr(c, attr, None)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            row[attr] = v
    if hasattr(c, "caches"):
        row["children"] = [describe_cache(x) for x in c.caches]
        row["arrays"] = []
    else:
        row["arrays"] = _arrays(c)
    return row


def _empty(c: Any) -> bool:
    if hasattr(c, "caches"):
        return all(_empty(x) for x in c.caches)
    if hasattr(c, "cache") and isinstance(c.cache, list):
        return all(a is None for a in c.cache)
    return getattr(c, "keys", None) is None


def cache_report(cache_list: Iterable[Any]) -> list[dict]:
    """Per-entry report of a prompt cache (index, class, nbytes, arrays / children)."""
    return [{"index": i, **describe_cache(c)} for i, c in enumerate(cache_list)]


def cache_totals(report: list[dict]) -> dict:
    """Totals of a ``cache_report``: all bytes, and bytes by class and by dtype (leaves)."""
    by_class: dict[str, int] = {}
    by_dtype: dict[str, int] = {}

    def walk(row: dict) -> None:
        if "children" in row:
            for ch in row["children"]:
                walk(ch)
            return
        by_class[row["class"]] = by_class.get(row["class"], 0) + row["nbytes"]
        for a in row["arrays"]:
            by_dtype[a["dtype"]] = by_dtype.get(a["dtype"], 0) + a["nbytes"]

    for r in report:
        walk(r)
    return {"nbytes": sum(r["nbytes"] for r in report), "entries": len(report),
            "by_class": by_class, "by_dtype": by_dtype}


# --- layout probe -------------------------------------------------------------------------


def probe_layout(model: nn.Module, *, evaluate: bool = True, tokens: int = 2) -> list[dict]:
    """What an extractor needs to learn a layout from a live model.

    ``make_prompt_cache`` + one forward of ``tokens`` (default 2) tokens, then per cache entry:
    class, ``max_size``/``keep``/``chunk_size``, and for every array its shape and dtype. For
    K/V caches the sequence axis (-2) is reported separately as ``rows`` and the per-row
    shape as ``row_shape`` (``[n_kv_heads, head_dim]``), so the per-token bytes are
    ``prod(row_shape) * itemsize`` for keys plus values.

    ``evaluate=False`` only builds the graph: shapes and dtypes are known without computing
    anything, which lets a full-size model built with ``build_model(..., lazy=True)`` be probed
    without allocating its weights.
    """
    cache = make_prompt_cache(model)
    logits = model(prompt_ids(tokens)[None], cache=cache)
    if evaluate:
        mx.eval(logits, [c.state for c in cache])
    return [{"index": i, **_layout_entry(c)} for i, c in enumerate(cache)]


def _layout_entry(c: Any) -> dict:
    row: dict = {"class": type(c).__name__}
    for attr in ("max_size", "keep", "chunk_size"):
        v = getattr(c, attr, None)
        if isinstance(v, int) and not isinstance(v, bool):
            row[attr] = v
    if hasattr(c, "caches"):
        row["children"] = [_layout_entry(x) for x in c.caches]
        return row
    if hasattr(c, "cache") and isinstance(c.cache, list):  # ArraysCache: constant state
        row["state"] = [
            None if a is None else {"shape": list(a.shape),
                                    "dtype": str(a.dtype).removeprefix("mlx.core.")}
            for a in c.cache
        ]
        return row
    for name in ("keys", "values"):
        a = getattr(c, name, None)
        if a is None or isinstance(a, (tuple, list)):
            row[name] = None
            continue
        row[name] = {"shape": list(a.shape), "rows": a.shape[-2],
                     "row_shape": [a.shape[1], a.shape[-1]],
                     "dtype": str(a.dtype).removeprefix("mlx.core.")}
    return row
