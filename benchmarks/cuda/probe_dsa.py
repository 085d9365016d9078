#!/usr/bin/env python3
"""Where DeepSeek-V3.2's sparse-attention indexer puts its bytes on CUDA (issue 14, session 5), op by op.

mlx-lm 0.32.2 ``deepseek_v32.Indexer`` (prefill, cache longer than index_topk), per layer:

    scores = q @ k^T                      (1, ih, L, kL) model dtype   q: (1, ih, L, 128), k: (1, 1, kL, 128)
    scores = mx.maximum(scores, 0); scores = scores * weights            (in place if donated)
    scores = sum(scores[:, h:h+1] for h in range(ih))                    (1, 1, L, kL): 64 adds
    scores = mx.where(mask, scores, -inf)
    topk   = mx.argpartition(scores, kth=-topk, axis=-1)[..., -topk:]    uint32 (1, 1, L, kL), sliced
    then in the attention: sparse = put_along_axis(zeros(bool), topk, True) & mask

Each case evaluates its inputs first, then one expression (``measure_peaks.measure``: transient = peak - active
before). ``module``: layers[0].self_attn of the model with both caches already holding kL - L rows.
Writes ``$OUT/dsa_<tag>.json``.
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


def cases(ih, L, kLs, hd=128, topk=2048, dt=mx.bfloat16, repeats=2, deadline=1e12, t0=0.0):
    key = mx.random.key(5)
    out = []

    def rnd(*shape):
        return mx.random.normal(shape, key=key).astype(dt)

    for kL in kLs:
        if time.time() - t0 > deadline:
            break
        plane = L * kL
        rows = mx.arange(kL - L, kL)[:, None]
        mask = rows >= mx.arange(kL)[None]
        q = rnd(1, ih, L, hd)
        k = rnd(1, 1, kL, hd)
        w = rnd(1, ih, L, 1)
        acc = rnd(1, 1, L, kL)
        mx.eval(mask, q, k, w, acc)

        def qk():
            return q @ k.swapaxes(-1, -2)

        def qk_relu_mul():
            s = q @ k.swapaxes(-1, -2)
            return mx.maximum(s, 0) * w

        def qk_to_sum():
            s = mx.maximum(q @ k.swapaxes(-1, -2), 0) * w
            return sum(s[:, h:h + 1] for h in range(ih))

        def whole_indexer():
            s = mx.maximum(q @ k.swapaxes(-1, -2), 0) * w
            s = sum(s[:, h:h + 1] for h in range(ih))
            s = mx.where(mask, s, -float("inf"))
            return mx.argpartition(s, kth=-topk, axis=-1)[..., -topk:]

        def argpartition_only():
            return mx.argpartition(acc, kth=-topk, axis=-1)[..., -topk:]

        def argpartition_full():
            return mx.argpartition(acc, kth=-topk, axis=-1)

        def sparse_mask():
            idx = mx.argpartition(acc, kth=-topk, axis=-1)[..., -topk:]
            sm = mx.zeros((1, 1, L, kL), dtype=mx.bool_)
            sm = mx.put_along_axis(sm, idx, mx.array(True), axis=-1)
            return sm & mask

        for label, fn in [("qk", qk), ("qk_relu_mul", qk_relu_mul), ("qk_to_sum", qk_to_sum),
                          ("whole_indexer", whole_indexer), ("argpartition_sliced", argpartition_only),
                          ("argpartition_full", argpartition_full), ("argpartition+sparse_mask", sparse_mask)]:
            r = MP.measure(fn, repeats)
            tr = max(x["transient"] for x in r)
            row = {"case": label, "ih": ih, "L": L, "kL": kL, "plane": plane, "transient": tr,
                   "bytes_per_plane_elt": round(tr / plane, 3), "result_bytes": r[0]["result_bytes"],
                   "ms": [x["ms"] for x in r]}
            print(json.dumps(row), flush=True)
            out.append(row)
        del q, k, w, acc, mask
        MP.settle()
    return out


def module_case(name, kLs, L, repeats=2, deadline=1e12, t0=0.0, smoke=False):
    """layers[0].self_attn with both caches (latent, indexer) holding kL - L rows."""
    cfg = MP.load_config(name)
    cfg = MP.shrink_config(cfg) if smoke else dict(cfg)
    cfg["num_hidden_layers"] = 1
    model, _ = MP.build_model(cfg)
    attn = model.layers[0].self_attn
    h = cfg["hidden_size"]
    out = []
    from mlx_lm.models.base import create_attention_mask
    for kL in kLs:
        if time.time() - t0 > deadline:
            break
        cache = model.make_cache()[0]
        if kL > L:  # random rows (a prefill of kL - L tokens would need its own (H, kL, kL) scores)
            lat, rope, ihd = cfg["kv_lora_rank"], cfg["qk_rope_head_dim"], cfg["index_head_dim"]
            cache[0].update_and_fetch(mx.random.normal((1, 1, kL - L, lat)).astype(MP.DTYPE),
                                      mx.random.normal((1, 1, kL - L, rope)).astype(MP.DTYPE))
            ik = mx.random.normal((1, 1, kL - L, ihd)).astype(MP.DTYPE)
            cache[1].update_and_fetch(ik, mx.zeros_like(ik))
            mx.eval([c.state for c in cache])
        x = mx.random.normal((1, L, h)).astype(MP.DTYPE)
        mx.eval(x)
        mask = create_attention_mask(x, cache[0], return_array=True)
        mx.eval(mask)
        saved = [(c.keys, c.values, c.offset) for c in cache]

        def fn():
            for c, (kk, vv, off) in zip(cache, saved):
                c.keys, c.values, c.offset = kk, vv, off
            return [attn(x, mask, cache)] + [c.state for c in cache]

        r = MP.measure(fn, repeats)
        tr = max(z["transient"] for z in r)
        sc = cfg["num_attention_heads"] * L * kL * 2
        row = {"case": f"{name} layers[0].self_attn", "L": L, "kL": kL, "pe_scores_bytes": sc, "transient": tr,
               "in_pe_scores": round(tr / sc, 3), "ms": [z["ms"] for z in r]}
        print(json.dumps(row), flush=True)
        out.append(row)
        del cache, x, mask, saved
        MP.settle()
    del model, attn
    MP.settle()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tag", default="run")
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--smoke", action="store_true", help="tiny shapes (CPU check of the script)")
    ap.add_argument("--deadline", type=float, default=60.0)
    ap.add_argument("--module", default="deepseek-v3.2-8l-16e")
    a = ap.parse_args()
    t0 = time.time()
    res = {"mlx": mx.__version__, "device": str(mx.default_device())}
    if a.smoke:
        res["ops"] = cases(4, 64, [256], hd=16, topk=32, dt=mx.float32, repeats=1)
        res["module"] = module_case(a.module, [256], 64, repeats=1, smoke=True)
    else:
        res["ops"] = cases(64, 2048, [8192, 32768], deadline=a.deadline, t0=t0)
        res["module"] = module_case(a.module, [8192, 32768], 2048, deadline=a.deadline, t0=t0)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / f"dsa_{a.tag}.json").write_text(json.dumps(res))


if __name__ == "__main__":
    main()
