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

import sys
from pathlib import Path

import mlx.core as mx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import measure_peaks as MP  # noqa: E402
import probe_common as PC  # noqa: E402


def cases(ih, L, kLs, hd=128, topk=2048, dt=mx.bfloat16, repeats=2, deadline=1e12, t0=0.0):
    rnd = PC.random_of(5, dt)
    out = []
    for kL in PC.within(kLs, deadline, t0):
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
            out.append(PC.measured(fn, repeats, {"case": label, "ih": ih, "L": L, "kL": kL, "plane": plane},
                                   plane, "bytes_per_plane_elt", with_result=True))
        del q, k, w, acc, mask
        MP.settle()
    return out


def _latent_and_indexer_caches(model, cfg, kL, L):
    """The model's CacheList (latent, indexer) holding kL - L random rows (a prefill of kL - L tokens would need
    its own (H, kL, kL) scores); each call starts from that state again."""
    cache = model.make_cache()[0]
    if kL > L:
        lat, rope, ihd = cfg["kv_lora_rank"], cfg["qk_rope_head_dim"], cfg["index_head_dim"]
        cache[0].update_and_fetch(mx.random.normal((1, 1, kL - L, lat)).astype(MP.DTYPE),
                                  mx.random.normal((1, 1, kL - L, rope)).astype(MP.DTYPE))
        ik = mx.random.normal((1, 1, kL - L, ihd)).astype(MP.DTYPE)
        cache[1].update_and_fetch(ik, mx.zeros_like(ik))
        mx.eval([c.state for c in cache])
    saved = [(c.keys, c.values, c.offset) for c in cache]

    def step(attn, x, mask):
        for c, (kk, vv, off) in zip(cache, saved):
            c.keys, c.values, c.offset = kk, vv, off
        return [attn(x, mask, cache)] + [c.state for c in cache]

    return cache[0], step


def module_case(name, kLs, L, repeats=2, deadline=1e12, t0=0.0, smoke=False):
    """layers[0].self_attn with both caches (latent, indexer) holding kL - L rows."""
    return PC.module_sweep(name, kLs, L, _latent_and_indexer_caches, ("pe_scores_bytes", "in_pe_scores"),
                           repeats=repeats, deadline=deadline, t0=t0, smoke=smoke)


def main():
    a = PC.parse_args(__doc__, deadline=60.0, module="deepseek-v3.2-8l-16e")
    PC.run(a, "dsa",
           lambda: {"ops": cases(4, 64, [256], hd=16, topk=32, dt=mx.float32, repeats=1),
                    "module": module_case(a.module, [256], 64, repeats=1, smoke=True)},
           lambda t0: {"ops": cases(64, 2048, [8192, 32768], deadline=a.deadline, t0=t0),
                       "module": module_case(a.module, [8192, 32768], 2048, deadline=a.deadline, t0=t0)})


if __name__ == "__main__":
    main()
