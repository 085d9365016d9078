"""The "stalled" measurement condition (session 8, issue 14 item 1): keep the GPU behind the host on purpose.

The CUDA estimate bounds the live set when the host has run MLX's whole in-flight window (11 graphs) ahead of the
GPU. Idle, or with a second process loading the GPU (gpu_hog.py), the host often loses that race (a cuDNN plan per
new kL, a retrace, small kernels the GPU finishes faster than the host encodes them), so a peak measured that way
is one sample of the timing, not the worst a warmed-up process can reach. An engine whose GPU is still busy with
another request when it enqueues a prefill chunk is that worst case. This module makes it happen in the measured
process itself, on the SAME stream, without adding bytes that matter:

* every ``nn.RMSNorm`` inside a decoder layer (``input_layernorm`` and ``post_attention_layernorm``: the first op
  of the attention and of the MLP / MoE block; MLA's ``q_a_layernorm`` / ``kv_a_layernorm``; q / k norms) gets
  its weight through a ``stall`` kernel: a custom CUDA kernel that copies the
  norm weight (hidden x 2 B) and whose thread 0 spins on the GPU's global timer for ``layer_ms``; it takes a
  one-element view of the block's input as a second input, so it runs after everything that produced that
  input and before the block's first kernel;
* off Metal, gated-DeltaNet runs ``gated_delta_ops``, a per-token loop of small kernels (hundreds of graphs per
  chunk). Every ``gdn_every``-th token step gets its gate slice ``g[:, t]`` (B x Hv, fp32) through the same
  kernel (spinning ``gdn_ms``), with the step's state as the dependency.

While a stall kernel runs, its graph cannot complete, so the host encodes up to MLX's cap (``MAX_ACTIVE_TASKS``)
of later graphs, each keeping everything it reads alive. The stall's own bytes: its output, a copy of a norm
weight or a gate slice (at most 14 KiB at hidden 7168), held until its graph completes; reported per point as
``stall_bytes_bound`` (every stall of a chunk alive at once). No weights, no baseline change.
"""
from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn

_SRC = """
    auto i = cooperative_groups::this_grid().thread_rank();
    if (i < N) { out[i] = inp[i]; }
    if (i == 0) {
        unsigned long long t0, t1;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1)); } while (t1 - t0 < (unsigned long long)NS);
    }
"""

_kernel = None
CHUNK_MS = [0.0]  # run 2: the first stall of every chunk spins this long instead (set by probe_commits)
# session 10 (probe_plans_warm.py): one model measured idle and stalled in turn, so the stalls can be switched off
# (the wrapped norms then call rms_norm with the plain weight: the model as built) ...
ACTIVE = [True]
# ... and a stall before every attention's SDPA (install_attention), this long (0: none)
ATTN_MS = [0.0]


class Counter:
    """Stalls encoded since the last ``reset`` (per chunk) and the bytes their outputs hold."""

    def __init__(self):
        self.n = 0
        self.bytes = 0
        self.max_out = 0

    def reset(self):
        self.n = 0
        self.bytes = 0


COUNT = Counter()


def stall(a: mx.array, dep: mx.array, ms: float, mode: str) -> mx.array:
    """A copy of ``a`` that the GPU produces only after ``dep`` exists and ``ms`` milliseconds of spinning."""
    global _kernel
    if COUNT.n == 0 and CHUNK_MS[0] > 0:  # the chunk's first stall (layer 0's input norm): the engine-busy case
        ms = CHUNK_MS[0]
    COUNT.n += 1
    COUNT.bytes += a.nbytes
    COUNT.max_out = max(COUNT.max_out, a.nbytes)
    if mode == "ident":  # CPU smoke: the wiring without the kernel (custom kernels are GPU-only)
        return a + 0 * dep.reshape(-1)[:1].astype(a.dtype)
    if _kernel is None:
        _kernel = mx.fast.cuda_kernel(name="omlx_stall", input_names=["inp", "dep"], output_names=["out"],
                                      source=_SRC, ensure_row_contiguous=False)
    n = a.size
    (out,) = _kernel(inputs=[a.reshape(-1), dep], template=[("T", a.dtype), ("N", n), ("NS", int(ms * 1e6))],
                     grid=(max(n, 1), 1, 1), threadgroup=(min(256, max(n, 1)), 1, 1),
                     output_shapes=[(n,)], output_dtypes=[a.dtype])
    return out.reshape(a.shape)


def _one(x: mx.array) -> mx.array:
    """A one-element view of ``x`` (its first element): the dependency, without reading or copying ``x``
    (a slice is a view whatever the layout; the kernel never reads it)."""
    return x[tuple(slice(0, 1) for _ in x.shape)]


class StalledNorm(nn.Module):
    """``nn.RMSNorm`` whose weight reaches the kernel through ``stall`` (same math, same single kernel)."""

    def __init__(self, norm: nn.RMSNorm, ms: float, mode: str):
        super().__init__()
        self.inner = norm
        self._ms = ms
        self._mode = mode

    def __call__(self, x):
        if not ACTIVE[0]:
            return mx.fast.rms_norm(x, self.inner.weight, self.inner.eps)
        w = stall(self.inner.weight, _one(x), self._ms, self._mode)
        return mx.fast.rms_norm(x, w, self.inner.eps)


def install(model, layer_ms: float, gdn_every: int, gdn_ms: float, mode: str) -> dict:
    """Wrap every decoder layer's two block norms; patch the gated-DeltaNet step loop. Returns what was done."""
    layers = getattr(model, "layers", None)
    if layers is None:
        layers = model.language_model.model.layers if hasattr(model, "language_model") else model.model.layers
    wrapped = 0
    if layer_ms > 0:
        def wrap(mod):
            nonlocal wrapped
            for attr, child in list(mod.children().items()):
                if isinstance(child, nn.RMSNorm):
                    setattr(mod, attr, StalledNorm(child, layer_ms, mode))
                    wrapped += 1
                elif isinstance(child, nn.Module):
                    wrap(child)
                elif isinstance(child, (list, tuple)):
                    for c in child:
                        if isinstance(c, nn.Module):
                            wrap(c)

        for layer in layers:
            wrap(layer)
    gdn = False
    if gdn_every > 0 and gdn_ms > 0:
        from mlx_lm.models import gated_delta as G

        orig = getattr(G, "_omlx_orig_step", None) or G._gated_delta_step_ops
        G._omlx_orig_step = orig
        calls = [0]

        def step(q, k, v, g, beta, state, mask=None):
            calls[0] += 1
            if ACTIVE[0] and calls[0] % gdn_every == 0:
                g = stall(g, _one(state), gdn_ms, mode)
            return orig(q, k, v, g, beta, state, mask)

        G._gated_delta_step_ops = step
        gdn = True
    return {"layer_ms": layer_ms, "norms_wrapped": wrapped, "gdn_every": gdn_every, "gdn_ms": gdn_ms,
            "gdn_patched": gdn, "mode": mode}


_TINY = []


def install_attention(mode: str) -> list[str]:
    """Session 10: a stall right before every attention's SDPA of the mlx-lm modules that import
    ``scaled_dot_product_attention`` from ``mlx_lm.models.base`` (deepseek_v3 - Kimi-K2 runs it -, qwen3_next, ...).
    Active while ``ACTIVE[0]`` and ``ATTN_MS[0] > 0``. The stall copies a one-element array after one element of the
    mask (or of the keys when the mask is a string) exists, and the queries are made to depend on it with
    ``mx.depends`` (no copy: the output shares the queries' buffer), so the SDPA kernel starts only after the spin.
    Why: at a chunk's start the estimate's worst window has layer 0's score matrix alive (its SDPA, which reads it as
    the mask, still in flight) when the 12th graph is launched; with the other stalls the GPU finishes that SDPA a few
    ms before the host, woken when graph 2 completes, launches graph 12 (s8-mla's traces). Bytes: 2 B per stall."""
    import importlib

    from mlx_lm.models import base

    if not _TINY:
        _TINY.append(mx.zeros((1,), mx.bfloat16))
        mx.eval(_TINY[0])
    orig = getattr(base, "_omlx_orig_sdpa", None) or base.scaled_dot_product_attention
    base._omlx_orig_sdpa = orig

    def sdpa(queries, keys, values, cache, scale, mask, sinks=None):
        if ACTIVE[0] and ATTN_MS[0] > 0:
            dep = _one(mask) if isinstance(mask, mx.array) else _one(keys)
            s = stall(_TINY[0], dep, ATTN_MS[0], mode)
            queries = mx.depends(queries, s)
        return orig(queries, keys, values, cache, scale, mask, sinks)

    patched = []
    for name in ("deepseek_v3", "deepseek_v32", "qwen3_next", "qwen3_5"):
        try:
            m = importlib.import_module(f"mlx_lm.models.{name}")
        except ImportError:
            continue
        if getattr(m, "scaled_dot_product_attention", None) in (orig, sdpa) or \
                getattr(getattr(m, "scaled_dot_product_attention", None), "__name__", "") == "sdpa":
            m.scaled_dot_product_attention = sdpa
            patched.append(name)
    return patched


def uninstall_gdn():
    from mlx_lm.models import gated_delta as G

    if hasattr(G, "_omlx_orig_step"):
        G._gated_delta_step_ops = G._omlx_orig_step


def self_test(mode: str) -> dict:
    """The kernel compiles, copies, and spins about as long as asked (measured on the host around an eval)."""
    import time

    a = mx.arange(1000).astype(mx.bfloat16)
    dep = mx.zeros((4,), mx.float32)
    mx.eval(a, dep)
    out = stall(a, _one(dep), 5.0, mode)
    mx.eval(out)
    ok = bool(mx.array_equal(out, a).item())
    t0 = time.time()
    out = stall(a, _one(dep), 50.0, mode)
    mx.eval(out)
    ms = (time.time() - t0) * 1e3
    COUNT.reset()
    return {"copy_ok": ok, "spin_50ms_took_ms": round(ms, 2)}
