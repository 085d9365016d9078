"""Feed a prompt through a full-size mlx-lm model WITHOUT computing anything: the resident cache bytes of
a real checkpoint's dims, with no weights allocated.

Why: a 30B-700B model does not fit this machine, but an mlx-lm cache's ``nbytes`` is the size of its
buffers (``KVCache`` grows in 256-row steps, ``RotatingKVCache`` trims to its window), and MLX knows every
array's shape from the lazy graph. So ``build_model(config, lazy=True)`` (random weights never
materialized) plus the same model calls as ``probe._replay`` - minus the ``mx.eval`` - leaves each cache
holding unevaluated arrays of exactly the shapes mlx-lm would allocate. The K/V widths come from the
model's own projections, not from this package's reading of the config.

The caller must not evaluate the cache (that would compute the full-size weights). A model whose forward
pass evaluated an array itself (``.item()`` on an activation) would compute weights: the tests check that
MLX's active memory stays flat across a replay, so such a model fails the test instead of passing on
numbers MLX computed.
"""
from __future__ import annotations

from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.cache import make_prompt_cache

from .probe import SCHEDULES, prompt_ids


def replay_lazily(model: nn.Module, tokens: int, schedule: str = "generate", prefill_step: int = 2048) -> list[Any]:
    """The cache list after ``tokens`` prompt tokens through ``schedule`` (generate_step's prompt loop, or
    one direct call), built as a graph only: read ``nbytes`` / shapes, never evaluate it."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, not {schedule!r}")
    if tokens < 1 or prefill_step < 1:
        raise ValueError("need at least one token and a positive prefill step")
    prompt = prompt_ids(tokens)
    cache = make_prompt_cache(model)
    if schedule == "direct":
        model(prompt[None], cache=cache)
        return cache
    processed = 0
    while tokens - processed > 1:
        n = min(prefill_step, tokens - processed - 1)
        model(prompt[processed:processed + n][None], cache=cache)
        processed += n
    model(prompt[processed:][None], cache=cache)
    return cache
