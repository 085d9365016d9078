"""Kernel routes as data (profiles/kernels/*.yaml): the routing claims, and the CPU claims measured live.

The Metal and CUDA rules come from MLX source and the disassembly of the released wheels
(benchmarks/notes/sdpa_routes_research.md); the CUDA rules' memory was measured on an H200
(benchmarks/cuda/README.md). What this machine can measure (the CPU backend) is measured here.
"""
from __future__ import annotations

import gc

import pytest

from omlx_profiles.errors import InputError, UnsupportedError
from omlx_profiles.peak.ops.attention import sdpa_items
from omlx_profiles.peak.ops.items import CallContext
from omlx_profiles.peak.kernels import (
    KernelRoutes,
    SdpaCall,
    parse_version,
    register_tiled,
    unregister_tiled,
    version_matches,
)


def route(backend, version, dq, dv=None, q=2048, k=32768, mask="causal", n_q=32, n_kv=8, dtype="bf16", nax=False,
          sinks=False):
    kr = KernelRoutes.for_backend(backend, version)
    return kr.route(SdpaCall(n_q, n_kv, dq, dv or dq, q, k, mask, sinks, dtype, nax)).route


def test_versions():
    assert parse_version("0.32.4") == (0, 32, 4)
    assert parse_version("0.32") == (0, 32, 0)
    assert parse_version("0.32.4.dev20261014+cuda") == (0, 32, 4)
    assert version_matches((0, 32, 3), ">=0.32.3")
    assert not version_matches((0, 32, 2), ">=0.32.3")
    assert version_matches((0, 31, 2), ">=0.30,<0.32.1")
    with pytest.raises(InputError):
        parse_version("latest")


@pytest.mark.parametrize("version", ["0.30.6", "0.31.2", "0.32.0"])
def test_metal_old_full_kernel_head_dims(version):
    # 0.30-0.32.0: the full (steel) kernel covers D 64/80/128 only
    assert route("metal", version, 128) == "fused"
    assert route("metal", version, 80) == "fused"
    assert route("metal", version, 64) == "fused"
    assert route("metal", version, 96) == "fallback"
    assert route("metal", version, 256) == "fallback"
    assert route("metal", version, 192, 128) == "fallback"


def test_metal_0321_adds_72_96():
    assert route("metal", "0.32.1", 96) == "fused"
    assert route("metal", "0.32.1", 72) == "fused"
    assert route("metal", "0.32.0", 72) == "fallback"


def test_metal_d256_prefill():
    # D=256 prefill falls back off the M5's neural accelerators, on every version (the ladder's case)
    for v in ("0.31.2", "0.32.0", "0.32.2", "0.32.4"):
        assert route("metal", v, 256, nax=False) == "fallback"
    # NAX (M5): fused from 0.32.2 for qL >= 1024
    assert route("metal", "0.32.2", 256, nax=True) == "fused"
    assert route("metal", "0.32.4", 256, nax=True) == "fused"
    assert route("metal", "0.32.4", 256, q=512, nax=True) == "fallback"
    # 0.32.3+ pre-M5: fused only for a whole prompt in one call (qL == kL >= 2048)
    assert route("metal", "0.32.4", 256, q=4096, k=4096) == "fused"
    assert route("metal", "0.32.2", 256, q=4096, k=4096) == "fallback"


def test_metal_d512_blocked_only_on_0324():
    assert route("metal", "0.32.4", 512, n_q=32, n_kv=16) == "blocked"
    assert route("metal", "0.32.3", 512, n_q=32, n_kv=16) == "fallback"


def test_metal_decode_vector():
    assert route("metal", "0.32.4", 128, q=1, k=4096, mask="none") == "vector"
    # qL * gqa > 32: no vector kernel
    assert route("metal", "0.32.4", 128, q=8, k=4096, mask="causal", n_q=64, n_kv=8) == "fallback"


def test_cuda_routes():
    assert route("cuda", "0.32.4", 128) == "fused"  # cuDNN
    assert route("cuda", "0.32.4", 64, mask="bool") == "fused"
    assert route("cuda", "0.32.4", 256) == "fallback"  # > 128
    assert route("cuda", "0.32.4", 192, 128) == "fallback"  # DeepSeek-V2 192/128
    assert route("cuda", "0.32.4", 128, dtype="fp32") == "fallback"
    assert route("cuda", "0.31.1", 128) == "fused"
    kr = KernelRoutes.for_backend("cuda", "0.32.4")
    assert kr.supports_bool_mask is False and kr.bool_to_additive_buffers == 2.0


def test_cpu_always_fallback():
    for dq in (64, 128, 256):
        assert route("cpu", "0.32.4", dq) == "fallback"
        assert route("cpu", "0.32.4", dq, q=1, mask="none") == "fallback"


def test_unknown_version_is_not_guessed():
    with pytest.raises(UnsupportedError, match="no metal kernel table covers MLX 0.29.0"):
        KernelRoutes.for_backend("metal", "0.29.0")
    newest = KernelRoutes.for_backend("metal")
    assert newest.mlx_version.startswith("newest")
    with pytest.raises(InputError):
        KernelRoutes.for_backend("rocm")


def test_registered_tiled_kernel_takes_precedence():
    kr = KernelRoutes.for_backend("metal", "0.32.4")
    call = SdpaCall(8, 4, 256, 256, 2048, 32768, "causal", False, "bf16")
    assert kr.route(call).route == "fallback"
    register_tiled(256, min_kv_len=8192, kv_tile=1024)
    try:
        from omlx_profiles.peak.kernels import tiled_state

        d = kr.route(call, tiled_state()[1])
        assert d.route == "tiled" and d.kv_tile == 1024
        short = SdpaCall(8, 4, 256, 256, 2048, 4096, "causal", False, "bf16")
        assert kr.route(short, tiled_state()[1]).route == "fallback"  # below min_kv_len
    finally:
        unregister_tiled(256)
    with pytest.raises(InputError):
        register_tiled(0)


def test_kernel_files_validate(cli):
    code, out, err = cli("validate", "profiles")
    assert code == 0, err


# --------------------------------------------------------------------------------------------------
# claims measured on this machine (CPU backend)
# --------------------------------------------------------------------------------------------------

mx = pytest.importorskip("mlx.core")


def _transient(fn, repeats: int = 3):
    """Peak over what was held before, the max of ``repeats`` calls: the executor's run-ahead (how many
    outputs are allocated before earlier ops release their inputs) varies with timing, and the tables
    model its worst case."""
    best = 0
    for _ in range(repeats):
        gc.collect()
        mx.clear_cache()
        before = mx.get_active_memory()
        mx.reset_peak_memory()
        r = fn()
        mx.eval(r)
        best = max(best, mx.get_peak_memory() - before)
        del r
    return best


@pytest.mark.parametrize("dtype,mask,n_q,n_kv,dq", [
    ("fp32", "causal", 8, 2, 128),
    ("bf16", "causal", 8, 2, 64),
    ("bf16", "none", 4, 4, 128),
    ("fp32", "bool", 4, 1, 64),
])
def test_cpu_fallback_sdpa_bytes_measured(dtype, mask, n_q, n_kv, dq):
    """The fallback's peak = one score buffer + scaled q + output (+ the causal mask), to a few bytes."""
    dt = {"fp32": mx.float32, "bf16": mx.bfloat16}[dtype]
    qL, kL = 256, 1024
    q = mx.random.normal((1, n_q, qL, dq)).astype(dt)
    k = mx.random.normal((1, n_kv, kL, dq)).astype(dt)
    v = mx.random.normal((1, n_kv, kL, dq)).astype(dt)
    m = mask
    if mask == "bool":
        m = mx.arange(kL)[None] <= mx.arange(kL - qL, kL)[:, None]
        mx.eval(m)
    mx.eval(q, k, v)
    measured = _transient(lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=0.1,
                                                                        mask=None if m == "none" else m))
    kr = KernelRoutes.for_backend("cpu", mx.__version__)
    ctx = CallContext(q_len=qL, offset=kL - qL, act=4 if dtype == "fp32" else 2, dtype=dtype, routes=kr, tiled={})
    items = sdpa_items(ctx, SdpaCall(n_q, n_kv, dq, dq, qL, kL, mask, False, dtype), family="llama")
    est = sum(i.bytes for i in items)
    assert measured - 16 <= est <= measured * 1.01, (est, measured)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_cpu_fast_op_decompositions_measured(dtype):
    """rms_norm and rope have no CPU kernel: the table's multiples of the input bytes are the worst case
    measured (a fresh process running the ops back to back reaches them; how many temporaries coexist
    depends on how far the host runs ahead of the CPU worker, so a single run may stay below)."""
    dt = {"fp32": mx.float32, "bf16": mx.bfloat16}[dtype]
    kr = KernelRoutes.for_backend("cpu", mx.__version__)
    x = mx.random.normal((1, 256, 256)).astype(dt)
    w = mx.ones((256,)).astype(dt)
    q = mx.random.normal((1, 2, 256, 128)).astype(dt)
    mx.eval(x, w, q)
    norm = _transient(lambda: mx.fast.rms_norm(x, w, 1e-5)) / x.nbytes
    rope = _transient(lambda: mx.fast.rope(q, 128, traditional=False, base=10000.0, scale=1.0, offset=7)) / q.nbytes
    assert 1.0 <= norm <= kr.fast_ops.rms_norm.transient[dtype] * 1.02
    assert 1.0 <= rope <= kr.fast_ops.rope.transient[dtype] * 1.02


def test_cpu_executor_window_measured():
    """A chain of matmuls (no donation) keeps ~inflight_ops/op_weight outputs alive: the run-ahead."""
    kr = KernelRoutes.for_backend("cpu", mx.__version__)
    W = mx.random.normal((256, 256)) * 0.01
    x = mx.random.normal((256, 256))
    mx.eval(W, x)

    def chain():
        y = x
        for _ in range(150):
            y = y @ W
        return y

    live = _transient(chain, 1) / x.nbytes
    expected = kr.executor.inflight_ops / kr.executor.op_weight
    assert expected * 0.9 <= live <= expected * 1.1, (live, expected)
