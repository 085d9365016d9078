"""Which ops of an attention layer end a CUDA graph: chains of one SDPA (or one MoE block) per step.

Each step is ``x <- x + f(x)`` with the big operands (K, V, the mask, the expert weights) evaluated once
beforehand, so the peak over what was allocated before the chain is the memory of the steps whose graphs
are still in flight. ``omlx_profiles.peak`` predicts it from the same shapes (the test / the
analysis builds the items of one step and replays the graph-commit rules); comparing the two says
whether the items count each kernel's input elements the way MLX does.

Run on the device (MLX CUDA); writes ``$OUT/chains_<tag>.json``.
"""
from __future__ import annotations

import argparse
import os

import mlx.core as mx

from probe_graphs import run_cases, timed_peak  # the same directory: run as a script


def causal_window_mask(S: int, kL: int, window: int | None) -> mx.array:
    """mlx-lm's create_causal_mask: bottom-right aligned, optional sliding window (bool (S, kL))."""
    offset = kL - S
    rinds = mx.arange(kL)
    linds = mx.arange(offset, offset + S)[:, None]
    m = linds >= rinds
    if window is not None:
        m = m & (linds < rinds + window)
    return m


def sdpa_chain(label, n_q, n_kv, D, S, kL, mask, steps, sinks=False, window=None):
    q = (mx.random.normal((1, n_q, S, D)) * 0.1).astype(mx.bfloat16)
    k = (mx.random.normal((1, n_kv, kL, D)) * 0.1).astype(mx.bfloat16)
    v = (mx.random.normal((1, n_kv, kL, D)) * 0.1).astype(mx.bfloat16)
    m = "causal" if mask == "causal" else (causal_window_mask(S, kL, window) if mask == "bool" else None)
    s = mx.zeros((n_q,), dtype=mx.bfloat16) if sinks else None
    mx.eval(q, k, v, *([m] if isinstance(m, mx.array) else []), *([s] if s is not None else []))
    out = {"case": label, "n_q": n_q, "n_kv": n_kv, "D": D, "S": S, "kL": kL, "mask": mask, "sinks": sinks,
           "window": window, "steps": steps, "scores_bytes": n_q * S * kL * 2}
    kw = {"sinks": s} if sinks else {}

    def build():
        x = q
        for _ in range(steps):
            x = x + mx.fast.scaled_dot_product_attention(x, k, v, scale=D ** -0.5, mask=m, **kw)
        return x

    for rep in range(2):
        r = timed_peak(build)
        out[f"rep{rep}"] = {"peak": r["peak"], "scores_live": round(r["peak"] / out["scores_bytes"], 3),
                            "host_s": r["host_s"], "wall_s": r["wall_s"]}
    return out


def moe_chain(label, h, I, E, k, S, steps):
    from mlx_lm.models.switch_layers import SwitchGLU

    dt = mx.bfloat16 if mx.default_device() == mx.gpu else mx.float32  # CPU gather_mm is fp32-only
    mlp = SwitchGLU(h, I, E)
    mlp.set_dtype(dt)
    gate_w = (mx.random.normal((E, h)) * 0.02).astype(dt)
    x0 = (mx.random.normal((1, S, h)) * 0.1).astype(dt)
    mx.eval(mlp.parameters(), gate_w, x0)
    out = {"case": label, "h": h, "I": I, "E": E, "k": k, "S": S, "steps": steps}

    def build():
        x = x0
        for _ in range(steps):
            g = x @ gate_w.T
            inds = mx.stop_gradient(mx.argpartition(-g, kth=k - 1, axis=-1)[..., :k])
            sc = mx.take_along_axis(mx.softmax(g, axis=-1, precise=True), inds, axis=-1)
            x = x + (mlp(x, inds) * sc[..., None]).sum(axis=-2)
        return x

    for rep in range(2):
        out[f"rep{rep}"] = timed_peak(build)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--tag", default="default")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--set", default="main", choices=["main", "conv"], help="conv: bool-mask conversion cases")
    args = ap.parse_args()
    results = {"tag": args.tag, "device": str(mx.default_device()), "mlx": mx.__version__,
               "env": {k: os.environ.get(k) for k in ("MLX_MAX_OPS_PER_BUFFER", "MLX_MAX_MB_PER_BUFFER")},
               "cases": []}
    if args.set == "conv":
        cases = [
            ("sdpa", "gpt-oss-like D64 bool sliding 128 + sinks", 64, 8, 64, 2048, 2175, "bool", 24, True, 128),
            ("sdpa", "gpt-oss-like D64 bool sliding 128, no sinks", 64, 8, 64, 2048, 2175, "bool", 24, False, 128),
            ("sdpa", "gemma-3-27b-like D128 bool sliding 1024", 32, 16, 128, 2048, 3071, "bool", 24, False, 1024),
            ("sdpa", "gemma-3-27b-like D128 bool sliding 1024 + sinks", 32, 16, 128, 2048, 3071, "bool", 24, True, 1024),
            ("sdpa", "gpt-oss-like S4096 bool sliding 128 + sinks", 64, 8, 64, 4096, 4223, "bool", 16, True, 128),
            ("sdpa", "gemma-3-27b-like S4096 bool sliding 1024", 32, 16, 128, 4096, 5119, "bool", 16, False, 1024),
            ("sdpa", "gpt-oss-like D64 full causal 32k + sinks (cuDNN)", 64, 8, 64, 2048, 32768, "causal", 24, True),
            ("sdpa", "gemma-3-27b-like D128 bool full 8k (array mask)", 32, 16, 128, 2048, 8192, "bool", 16, False),
        ]
    elif args.quick:
        cases = [("sdpa", "tiny-fallback", 2, 2, 192, 64, 256, "causal", 3),
                 ("moe", "tiny-moe", 64, 32, 8, 2, 64, 3)]
    else:
        cases = [
            ("sdpa", "deepseek-v2-like D192 causal 32k", 16, 16, 192, 2048, 32768, "causal", 12),
            ("sdpa", "deepseek-v2-like D192 causal 8k", 16, 16, 192, 2048, 8192, "causal", 24),
            ("sdpa", "gemma-3-4b-like D256 GQA causal 32k", 8, 4, 256, 2048, 32768, "causal", 12),
            ("sdpa", "gpt-oss-like D64 bool sliding 128 + sinks", 64, 8, 64, 2048, 2175, "bool", 24, True, 128),
            ("sdpa", "gemma-3-27b-like D128 bool sliding 1024", 32, 16, 128, 2048, 3071, "bool", 24, False, 1024),
            ("sdpa", "llama-like D128 causal 32k (cuDNN)", 32, 8, 128, 2048, 32768, "causal", 24),
            ("moe", "deepseek-v2-lite MoE (64 x 1408, k 6)", 2048, 1408, 64, 6, 2048, 16),
            ("moe", "qwen3-30b MoE (128 x 768, k 8)", 2048, 768, 128, 8, 2048, 16),
        ]
    run_cases(cases, {"sdpa": sdpa_chain, "moe": moe_chain}, results, os.path.join(args.out, f"chains_{args.tag}.json"))


if __name__ == "__main__":
    main()
