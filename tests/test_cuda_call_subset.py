"""The exact CUDA replay evaluates a subset of a prompt's calls (``prefill._TAIL_CALLS``: the first, the last
three, and per layer type the last call that grew a cache). That subset is complete where every call's total
grows with its offset, which holds on CPU and Metal. On CUDA it does not quite: where MLX's graph commits end
moves with the offset, so a full-chunk call can peak a little above every later one (found by s7-cudafit,
session 7: Llama-3.1-8B, chunk 512, 49,154 tokens: 2 MiB, 0.016 %, under the all-calls replay).

This is an under of the model against itself, not against a measurement (every CUDA calibration point is at or
above its measured peak, and the residual adds are still charged on CUDA although measured in place: a margin
of 2 x S x hidden bytes per layer in flight). It is pinned here, strictly, so that a fix (every full call from
peak.fast_cuda's per-offset table) has to say so."""
from __future__ import annotations

import pytest

from omlx_profiles import default_registry
from omlx_profiles.peak.prefill import Request, prefill_peak


@pytest.mark.xfail(strict=True, reason="CUDA replay's call subset: a full call 2 MiB above the evaluated ones "
                                       "(graph-commit ends move with the offset); see the module docstring")
def test_the_cuda_call_subset_reaches_the_all_calls_peak():
    p = default_registry().resolve("meta-llama/Llama-3.1-8B-Instruct").profile
    req = Request(49154, chunk=512)
    subset = prefill_peak(p, req, backend="cuda").peak_bytes
    every = prefill_peak(p, req, backend="cuda", all_calls=True).peak_bytes
    assert subset >= every, (subset, every)
