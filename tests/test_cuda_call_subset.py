"""The exact replay evaluates a subset of a prompt's calls (``prefill._TAIL_CALLS``: the first, the last three,
and per layer type the last call that grew a cache). That subset is complete where every call's total grows with
its offset, which holds on CPU and Metal. On CUDA it does not quite: where MLX's graph commits end moves with the
offset, so a full-chunk call can peak a little above every later one (found by s7-cudafit, session 7:
Llama-3.1-8B, chunk 512, 49,154 tokens: one full call 2 MiB, 0.016 %, above every evaluated call).

So on CUDA the replay also evaluates the highest full call, found in the per-chunk table of every full call's
total (``peak.fast_cuda.full_call_totals``; the full calls do not depend on the prompt's length): the replay
equals the all-calls replay, with and without a cached prefix. The all-calls replay is the reference (it
evaluates every call, no table); the first case is the one that was under."""
from __future__ import annotations

import pytest

from omlx_profiles import default_registry
from omlx_profiles.peak.prefill import Request, prefill_peak


@pytest.mark.parametrize("tokens, cached", [(49154, 0), (49155, 3000)])
def test_the_cuda_replay_reaches_the_all_calls_peak(tokens, cached):
    p = default_registry().resolve("meta-llama/Llama-3.1-8B-Instruct").profile
    req = Request(tokens, cached=cached, chunk=512)
    subset = prefill_peak(p, req, backend="cuda")
    every = prefill_peak(p, req, backend="cuda", all_calls=True)
    assert subset.peak_bytes == every.peak_bytes, (subset.peak_bytes, every.peak_bytes)
    assert subset.held_before_bytes == every.held_before_bytes
