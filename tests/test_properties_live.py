"""The peak off whole KV steps against the truth: a tiny real mlx-lm Llama on MLX's CPU backend, prompts fed in
chunks of 7 after prefixes that are not whole 256-token steps (issue 14 items 0 and 4).

With chunks under 256 tokens a call that grows the full-attention caches (KVCache's concatenate: the old buffer
and the grown one alive together) can be dozens of calls before the prompt's end; the peak model evaluated only
its first and last calls and came out at 0.57-0.68 of these measurements (session 6). It now also evaluates the
last call that grows each layer type's caches (peak/prefill.py).

The truth itself is not monotone in the cached prefix here: which call grows the caches, and from how many rows,
moves with the prefix's alignment (a 1,000-token prefix peaks ~1 MB above a 1,100-token one with the same 600 new
tokens, more than the 100 tokens' KV). So monotonicity in the prefix is not a property of the truth off whole
steps; test_properties_api.py states the domains where the reported number is monotone.
"""
from __future__ import annotations

import pytest

mx = pytest.importorskip("mlx.core")

from omlx_profiles.estimate.calibration import profile_for_config  # noqa: E402
from omlx_profiles.live.build import build_model  # noqa: E402
from omlx_profiles.live.measure import measure_prefill_peak  # noqa: E402
from omlx_profiles.peak.prefill import Request, prefill_peak  # noqa: E402

_CFG = dict(vocab_size=512, rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
            max_position_embeddings=32768, model_type="llama", num_hidden_layers=4, hidden_size=256,
            intermediate_size=512, num_attention_heads=4, num_key_value_heads=2, head_dim=128)
CHUNK, NEW = 7, 600
PREFIXES = (1000, 1100)


def test_small_chunks_off_whole_steps_are_never_under_the_truth():
    model = build_model(_CFG, "bf16", allow_fp32_promotion=False)
    prof = profile_for_config(_CFG, "bf16")
    measure_prefill_peak(model, 257, 256)  # what a process keeps after its first call goes into the baseline
    meas, est = {}, {}
    for c in PREFIXES:
        meas[c] = measure_prefill_peak(model, c + NEW, CHUNK, cached=c)["peak_over_baseline"]
        est[c] = prefill_peak(prof, Request(c + NEW, cached=c, chunk=CHUNK), backend="cpu",
                              mlx_version=mx.__version__, dtype="bf16", apply_basis=False).peak_bytes
    ratios = {c: est[c] / meas[c] for c in PREFIXES}
    assert all(1.0 <= r <= 1.15 for r in ratios.values()), ratios  # measured 1.046 / 1.056 (1,300: 1.057)
    # the truth falls as the prefix grows from 1,000 to 1,100 tokens (by more than the 100 tokens' KV): see above
    assert meas[1000] > meas[1100] + 100 * 4 * 2 * 2 * 128 * 2, meas
