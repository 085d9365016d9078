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

import argparse
import json
import os
import sys
import time
from pathlib import Path

import mlx.core as mx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import measure_peaks as MP  # noqa: E402

GiB = 2**30


def cases(H, L, kLs, nope=128, rope=64, vd=128, rank=512, dt=mx.bfloat16, repeats=2, deadline=1e12, t0=0.0):
    key = mx.random.key(3)
    out = []

    def rnd(*shape):
        return mx.random.normal(shape, key=key).astype(dt)

    for kL in kLs:
        if time.time() - t0 > deadline:
            break
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
            r = MP.measure(fn, repeats)
            row = {"case": label, "H": H, "L": L, "kL": kL, "scores_bytes": sc,
                   "transient": max(x["transient"] for x in r), "in_scores": round(max(x["transient"] for x in r) / sc, 3),
                   "ms": [x["ms"] for x in r]}
            print(json.dumps(row), flush=True)
            out.append(row)
        del q_pe, k_pe, q_nope, k, v, add, mask
        MP.settle()
    return out


def module_case(name, kLs, L, repeats=2, deadline=1e12, t0=0.0, smoke=False):
    """layers[0].self_attn of the model alone, with a KVCache already holding kL - L rows."""
    from mlx_lm.models.base import create_attention_mask
    from mlx_lm.models.cache import KVCache

    cfg = MP.load_config(name)
    cfg = MP.shrink_config(cfg) if smoke else dict(cfg)
    cfg["num_hidden_layers"] = 1
    model, _ = MP.build_model(cfg)
    attn = model.layers[0].self_attn
    h = cfg["hidden_size"]
    lat = cfg["kv_lora_rank"]
    rope = cfg["qk_rope_head_dim"]
    out = []
    for kL in kLs:
        if time.time() - t0 > deadline:
            break
        c = KVCache()
        if kL > L:
            c.update_and_fetch(mx.random.normal((1, 1, kL - L, lat)).astype(MP.DTYPE),
                               mx.random.normal((1, 1, kL - L, rope)).astype(MP.DTYPE))
            mx.eval(c.keys, c.values)
        x = mx.random.normal((1, L, h)).astype(MP.DTYPE)
        mx.eval(x)
        mask = create_attention_mask(x, c, return_array=True)
        mx.eval(mask)

        def fn():
            # one call on a fresh copy of the cache state, so repeats see the same kL
            cc = KVCache()
            if c.keys is not None:
                cc.keys, cc.values, cc.offset = c.keys, c.values, c.offset
            return attn(x, mask, cc)

        r = MP.measure(fn, repeats)
        sc = cfg["num_attention_heads"] * L * kL * 2
        row = {"case": f"{name} layers[0].self_attn", "L": L, "kL": kL, "scores_bytes": sc,
               "transient": max(x["transient"] for x in r), "in_scores": round(max(x["transient"] for x in r) / sc, 3),
               "ms": [x["ms"] for x in r]}
        print(json.dumps(row), flush=True)
        out.append(row)
        del c, x, mask
        MP.settle()
    del model, attn
    MP.settle()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tag", default="run")
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--smoke", action="store_true", help="tiny shapes (CPU check of the script)")
    ap.add_argument("--deadline", type=float, default=120.0)
    ap.add_argument("--module", default="deepseek-v3-8l-16e", help="config name for the attention-module case")
    a = ap.parse_args()
    t0 = time.time()
    res = {"mlx": mx.__version__, "device": str(mx.default_device())}
    if a.smoke:
        res["ops"] = cases(4, 64, [128, 256], dt=mx.float32, repeats=1)
        res["module"] = module_case(a.module, [256], 64, repeats=1, smoke=True)
    else:
        res["ops"] = cases(128, 2048, [8192, 32768], deadline=a.deadline, t0=t0)
        res["module"] = module_case(a.module, [8192, 32768], 2048, deadline=a.deadline, t0=t0)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / f"mla_{a.tag}.json").write_text(json.dumps(res))


if __name__ == "__main__":
    main()
