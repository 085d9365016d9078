"""One short prefill right after a model is loaded, so that later prompts run as the estimator assumes.

Why: on MLX's CUDA backend the first prefill after a model is loaded commits many smaller CUDA graphs that
MLX does not count toward its limit of in-flight graphs, so more of that prompt's activations are alive at
once than in any later call. Traced on an H200 (benchmarks/cuda/README.md, "Traced commits"): gpt-oss-20b's
first 8k prompt committed 95 graphs instead of 36 with 38 in flight and peaked 9.90 GiB over the weights,
where every later call peaked 7.81; DeepSeek-V2-Lite (prefill step 4096) 13.25 GiB against 11.08. One
prefill of 64 tokens right after loading removed the excess in both; the estimator's CUDA numbers are for
such a warmed-up process. On Metal and CPU the warm-up is harmless (it compiles the kernels a first prompt
would compile anyway).

The warm-up replays ``generate_step``'s prefill (all but the last token through the model with a fresh
cache, the cache state evaluated, then the last token) and drops the cache: nothing stays allocated.
"""

from __future__ import annotations

import gc
import time

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache

WARMUP_TOKENS = 64


def warm_up(model, tokens: int = WARMUP_TOKENS) -> float:
    """Run one ``tokens``-token prefill (token id 0) through ``model`` and free what it allocated; returns
    the seconds it took. ``tokens`` must be at least 2 (a prefill chunk and the last-token step)."""
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 2:
        raise ValueError(f"warm_up: tokens must be an integer >= 2, got {tokens!r}")
    t0 = time.perf_counter()
    ids = mx.zeros((1, tokens), dtype=mx.int32)
    cache = make_prompt_cache(model)
    model(ids[:, :-1], cache=cache)
    mx.eval([c.state for c in cache])
    logits = model(ids[:, -1:], cache=cache)
    mx.eval(logits)
    del logits, cache, ids
    gc.collect()
    mx.clear_cache()
    return time.perf_counter() - t0
