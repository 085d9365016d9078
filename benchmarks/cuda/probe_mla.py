#!/usr/bin/env python3
"""Where DeepSeek-V3's latent-MLA prefill puts its bytes on CUDA (issue 14), one op at a time.

mlx-lm 0.32.2's ``deepseek_v3.py`` prefill (L > 1) computes, per layer:

    pe_scores = (q_pe * scale) @ k_pe^T                     (1, H, L, kL)  model dtype
    pe_scores = mx.where(mask, pe_scores, finfo.min)          mask: bool (L, kL) array
    k = embed_q(kv_latent, transpose=False)                   (1, H, kL, qk_nope)
    v = unembed_out(kv_latent)                                (1, H, kL, v_head_dim)
    out = mx.fast.scaled_dot_product_attention(q_nope, k, v, mask=pe_scores)   additive (1, H, L, kL) mask

Each case below evaluates its inputs first, then one expression; ``transient`` = peak - active before
(``measure_peaks.measure``). So the table says which of these allocate a score-sized buffer on this
backend: the QK matmul (yes), the ``where`` (in place when ``pe_scores`` is donatable?), the SDPA with a
per-head additive mask (cuDNN with a bias input, or the unfused fallback that materializes a second
score matrix?), and the whole attention module with a cache holding kL - L rows.

Writes ``$OUT/mla_<tag>.json``.
"""
from __future__ import annotations

import sys
from pathlib import Path

import mlx.core as mx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import measure_peaks as MP  # noqa: E402
import probe_common as PC  # noqa: E402


def cases(H, L, kLs, nope=128, rope=64, vd=128, rank=512, dt=mx.bfloat16, repeats=2, deadline=1e12, t0=0.0):
    rnd = PC.random_of(3, dt)
    out = []
    for kL in PC.within(kLs, deadline, t0):
        sc = H * L * kL * mx.zeros((), dt).itemsize
        rows = mx.arange(kL - L, kL)[:, None]
        cols = mx.arange(kL)[None]
        mask = rows >= cols
        q_pe = rnd(1, H, L, rope)
        k_pe = rnd(1, 1, kL, rope)
        q_nope = rnd(1, H, L, nope)
        k = rnd(1, H, kL, nope)
        v = rnd(1, H, kL, vd)
        add = mx.where(mask, (q_pe * 0.1) @ k_pe.swapaxes(-1, -2), mx.array(-1e4, dt))
        mx.eval(mask, q_pe, k_pe, q_nope, k, v, add)
        scale = (nope + rope) ** -0.5

        def pe_matmul():
            return (q_pe * scale) @ k_pe.swapaxes(-1, -2)

        def pe_where():
            s = (q_pe * scale) @ k_pe.swapaxes(-1, -2)
            return mx.where(mask, s, mx.array(mx.finfo(dt).min, dt))

        def sdpa_headmask():
            return mx.fast.scaled_dot_product_attention(q_nope, k, v, scale=scale, mask=add)

        def sdpa_headmask_fresh():
            s = (q_pe * scale) @ k_pe.swapaxes(-1, -2)
            s = mx.where(mask, s, mx.array(mx.finfo(dt).min, dt))
            return mx.fast.scaled_dot_product_attention(q_nope, k, v, scale=scale, mask=s)

        def sdpa_causal():
            return mx.fast.scaled_dot_product_attention(q_nope, k, v, scale=scale, mask="causal")

        for label, fn in [("pe_matmul", pe_matmul), ("pe_where", pe_where), ("sdpa_headmask(evaluated mask)", sdpa_headmask),
                          ("pe_where+sdpa_headmask", sdpa_headmask_fresh), ("sdpa_causal(same q/k/v)", sdpa_causal)]:
            out.append(PC.measured(fn, repeats, {"case": label, "H": H, "L": L, "kL": kL, "scores_bytes": sc},
                                   sc, "in_scores"))
        del q_pe, k_pe, q_nope, k, v, add, mask
        MP.settle()
    return out


def _latent_cache(model, cfg, kL, L):
    """A KVCache holding kL - L latent rows; each call runs on a fresh copy of that state."""
    from mlx_lm.models.cache import KVCache

    c = KVCache()
    if kL > L:
        c.update_and_fetch(mx.random.normal((1, 1, kL - L, cfg["kv_lora_rank"])).astype(MP.DTYPE),
                           mx.random.normal((1, 1, kL - L, cfg["qk_rope_head_dim"])).astype(MP.DTYPE))
        mx.eval(c.keys, c.values)

    def step(attn, x, mask):
        cc = KVCache()
        if c.keys is not None:
            cc.keys, cc.values, cc.offset = c.keys, c.values, c.offset
        return attn(x, mask, cc)

    return c, step


def module_case(name, kLs, L, repeats=2, deadline=1e12, t0=0.0, smoke=False):
    """layers[0].self_attn of the model alone, with a KVCache already holding kL - L rows."""
    return PC.module_sweep(name, kLs, L, _latent_cache, ("scores_bytes", "in_scores"), repeats=repeats,
                           deadline=deadline, t0=t0, smoke=smoke)


def main():
    a = PC.parse_args(__doc__, deadline=120.0, module="deepseek-v3-8l-16e",
                      module_help="config name for the attention-module case")
    PC.run(a, "mla",
           lambda: {"ops": cases(4, 64, [128, 256], dt=mx.float32, repeats=1),
                    "module": module_case(a.module, [256], 64, repeats=1, smoke=True)},
           lambda t0: {"ops": cases(128, 2048, [8192, 32768], deadline=a.deadline, t0=t0),
                       "module": module_case(a.module, [8192, 32768], 2048, deadline=a.deadline, t0=t0)})


if __name__ == "__main__":
    main()
