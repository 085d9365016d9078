#!/usr/bin/env python3
"""Measure real-size prefill peaks with MLX (CUDA backend on a GPU machine; CPU for --smoke).

Self-contained on purpose: it runs on a bare device machine that has only MLX, mlx-lm and numpy.

What it does, per model (random bf16 weights, real dims, real layer counts):

* builds the mlx-lm model from a config dict (``mlx_lm.utils._get_classes`` + ``ModelArgs.from_dict``),
  ``set_dtype(bfloat16)``, evaluates the parameters, then ``gc`` + ``mx.clear_cache()``; the active
  memory at that moment is the **baseline** (weights + the tiny token array);
* replays ``mlx_lm.generate.generate_step``'s prefill exactly: N-1 tokens in chunks of
  ``prefill_step_size`` (2048), each ``model(tokens[None, a:b], cache=cache)`` then
  ``mx.eval([c.state for c in cache])`` and ``mx.clear_cache()``; then the last token alone through the
  decode path (``logits[:, -1, :]``, ``logits - logsumexp``, argmax), on a fresh generation stream like
  mlx-lm does;
* for every chunk records the active memory before it, and, after ``mx.reset_peak_memory()``, the peak
  during it; the point's peak over baseline is the maximum over chunks; plus the final cache ``nbytes``;
* component microbenchmarks: ``mx.fast.scaled_dot_product_attention`` alone (peak over its evaluated
  inputs) over head layouts, head dims, kv lengths, mask kinds and sinks; one layer's MLP / MoE block and
  one layer's attention block (fresh cache) alone at qL = prefill step.

Results go to ``<out>/peaks_<tag>.json`` after every point (so a killed run still returns data), and a
compact table is printed at the end.  See README.md beside this file.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten

HERE = Path(__file__).resolve().parent
CONFIG_DIR = HERE / "configs"

# name -> config file (copied from ../shared/configs, which does not travel to the device).
MODELS = {
    # held out in session 13 (s13-cuda, check 3): never measured on CUDA before; probe_prefix_s13.py
    "devstral-small-2-24b-instruct": "devstral-small-2-24b-instruct.json",  # mistral3 / ministral3, yarn + llama-4 scaling
    "lfm2.5-vl-1.6b-text": "lfm2.5-vl-1.6b-text.json",  # the VL wrapper's lfm2 text model (conv + attention; lm_head untied)
    "qwen2.5-72b": "qwen2.5-72b.json",  # 64 q / 8 kv, hidden 8192 (layers cut to fit: say so per point)
    "qwen2.5-72b-16l": "qwen2.5-72b-16l.json",  # its first 16 of 80 layers (real widths; weights ~36 GB)
    "llama-3.2-1b-instruct": "llama-3.2-1b-instruct.json",  # 32 q / 8 kv, D 64
    "qwen3-0.6b": "qwen3-0.6b.json",  # 16 q / 8 kv, D 128, q/k norms
    # control (s13 run 2): Devstral-Small-2-24B's text dims as a plain llama (no llama-4 query scaling, no yarn)
    "devstral-shape-llama-control": "devstral-shape-llama-control.json",
    "llama-3.1-8b": "llama-3.1-8b.json",
    "gemma-3-4b-it": "gemma-3-4b-it.json",  # head_dim 256 (gemma3_text default), 8 q / 4 kv heads
    "deepseek-v2-lite": "deepseek-v2-lite.json",  # expanded MLA: k 192 / v 128, 16 heads
    "gpt-oss-20b": "gpt-oss-20b.json",  # sinks, sliding 128 / full alternating, head_dim 64
    "qwen3-30b-a3b": "qwen3-30b-a3b.json",  # MoE 128 experts top-8
    "gemma-3-27b-it": "gemma-3-27b-it.json",  # 5 sliding (1024) : 1 global, head_dim 128
    # qwen3.5-27b builds in mlx-lm, but its gated-DeltaNet layers run a per-token Python loop
    # (gated_delta_ops) off Metal: far too slow for a time-boxed device run, and not what a Metal user
    # would see.  Its full-attention SDPA shape (24 q / 4 kv, D 256) is in the SDPA microbenchmark.
    "qwen3.5-27b": "qwen3.5-27b.json",
    # held out: not used to build or tune the CUDA model (session 2), measured once it was frozen
    "qwen3-32b": "qwen3-32b.json",  # dense, 64 layers, 64 q / 8 kv heads
    "mixtral-8x7b-v0.1": "mixtral-8x7b-v0.1.json",  # MoE 8 experts top-2, 32 q / 8 kv
    "phi-3-mini-4k-instruct": "phi-3-mini-4k-instruct.json",  # 32 / 32 heads, D 96
    "qwen2.5-7b-instruct": "qwen2.5-7b-instruct.json",  # q/k/v bias, 28 q / 4 kv
    "mistral-7b-v0.3": "mistral-7b-v0.3.json",
    # held out in session 3 (after the traced-commit fixes), with a 64-token warm-up: probe_commits.py
    "gemma-2-9b-it": "gemma-2-9b-it.json",  # gemma2: softcapped attention written in Python, D 256
    "qwen3-8b": "qwen3-8b.json",  # dense, q/k norms, 32 q / 8 kv
    "llama-3.2-3b-instruct": "llama-3.2-3b-instruct.json",  # 24 q / 8 kv, tied embeddings
    "smollm3-3b": "smollm3-3b.json",  # llama-like, RoPE skipped every 4th layer
    "nemotron-h-56b-base-8k": "nemotron-h-56b-base-8k.json",  # Mamba2 hybrid (54 M : 10 attention : 54 MLP layers)
    # issue 14 (session 4): real attention widths, layers and routed experts cut to fit one H200 (weights
    # ~10-20 GB): DeepSeek-V3 / V3.2 with their first 8 layers (3 dense + 5 MoE) and 16 of 256 routed
    # experts (top-8 kept); Qwen3-Next-80B-A3B with its first 8 layers (6 gated-DeltaNet + 2 full
    # attention) and 64 of 512 experts (top-10 kept). Everything else as in the real config.
    "deepseek-v3-8l-16e": "deepseek-v3-8l-16e.json",
    "deepseek-v3.2-8l-16e": "deepseek-v3.2-8l-16e.json",
    "qwen3-next-80b-a3b-8l-64e": "qwen3-next-80b-a3b-8l-64e.json",
    # run 2: 12 layers (3 dense + 9 MoE) so the in-flight window spans MoE layers only; Qwen3.5-27B (held out)
    # with its first 8 layers (6 gated-DeltaNet + 2 full attention)
    "deepseek-v3-12l-16e": "deepseek-v3-12l-16e.json",
    "qwen3.5-27b-8l": "qwen3.5-27b-8l.json",
    # run 3 (held out): Kimi-K2 dims (64 heads, 1 dense layer; mlx-lm runs kimi_k2 as deepseek_v3), 8 layers, 16 experts
    "kimi-k2-8l-16e": "kimi-k2-8l-16e.json",
}
HELD_OUT = ["qwen3-32b", "mixtral-8x7b-v0.1", "phi-3-mini-4k-instruct", "qwen2.5-7b-instruct", "mistral-7b-v0.3"]
DEFAULT_MODELS = [m for m in MODELS if m != "qwen3.5-27b" and m not in HELD_OUT]

# SDPA microbenchmark head layouts: (label, n_q, n_kv, Dk, Dv, sinks_variants)
SDPA_SHAPES = [
    ("llama-3.1-8b", 32, 8, 128, 128, (False,)),
    ("qwen3-30b-a3b", 32, 4, 128, 128, (False,)),
    ("gemma-3-27b", 32, 16, 128, 128, (False,)),
    ("gpt-oss-20b", 64, 8, 64, 64, (False, True)),
    ("deepseek-v2-lite", 16, 16, 192, 128, (False,)),
    ("gemma-3-4b", 8, 4, 256, 256, (False,)),
    ("qwen3.5-27b", 24, 4, 256, 256, (False,)),
]
MASK_KINDS = ("causal", "bool", "additive", "none")
# sliding-window kv lengths seen in the real runs (window-1 + chunk): gpt-oss 127+2048, gemma 1023+2048
SDPA_SLIDING = [
    ("gpt-oss-20b", 64, 8, 64, 64, True, 128),
    ("gemma-3-27b", 32, 16, 128, 128, False, 1024),
    ("gemma-3-4b", 8, 4, 256, 256, False, 1024),
]

T0 = time.time()
DTYPE = mx.bfloat16


def log(*a):
    print(f"[{time.time() - T0:7.1f}s]", *a, flush=True)


def active():
    return int(mx.get_active_memory())


def settle():
    gc.collect()
    mx.clear_cache()


def GiB(b):
    return b / 2**30


# ----------------------------------------------------------------------------------------------
# model construction


def load_config(name):
    with open(CONFIG_DIR / MODELS[name]) as f:
        return json.load(f)


def shrink_config(cfg):
    """Tiny version for --smoke on CPU: same code paths, few layers, small widths."""
    c = copy.deepcopy(cfg)
    t = c["text_config"] if "text_config" in c else c
    mt = t.get("model_type", c.get("model_type"))
    n = 6 if "gemma3" in mt else (4 if "qwen3_5" in mt else 2)
    t["num_hidden_layers"] = n
    if isinstance(t.get("layer_types"), list):
        t["layer_types"] = t["layer_types"][:n]
    t["hidden_size"] = 512
    for k in ("intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size"):
        if k in t:
            t[k] = 256
    for k in ("num_experts", "num_local_experts", "n_routed_experts"):
        if k in t:
            t[k] = min(t[k], 16)
    if "text_config" in c:
        c["vocab_size"] = 1024
    t["vocab_size"] = 1024
    if "sliding_window" in t and t["sliding_window"]:
        t["sliding_window"] = min(t["sliding_window"], 128)
    return c


def build_model(cfg):
    from mlx_lm.utils import _get_classes

    model_class, args_class = _get_classes(config=cfg)
    args = args_class.from_dict(cfg)
    model = model_class(args)
    model.set_dtype(DTYPE)
    model.eval()
    # evaluate parameter by parameter group so fp32 init temporaries never pile up
    flat = tree_flatten(model.parameters())
    batch, size = [], 0
    for _, p in flat:
        batch.append(p)
        size += p.size
        if size > 2**28:
            mx.eval(batch)
            batch, size = [], 0
    mx.eval(batch)
    weights = sum(p.nbytes for _, p in flat)
    return model, weights


def text_args(cfg):
    t = dict(cfg)
    t.update(cfg.get("text_config", {}))
    return t


def cache_kinds(cache):
    out = []
    for c in cache:
        k = type(c).__name__
        if hasattr(c, "max_size") and getattr(c, "max_size", None):
            k += f"({c.max_size})"
        out.append(k)
    # run-length encode
    rle, prev, cnt = [], None, 0
    for k in out:
        if k == prev:
            cnt += 1
        else:
            if prev is not None:
                rle.append(f"{prev}x{cnt}")
            prev, cnt = k, 1
    rle.append(f"{prev}x{cnt}")
    return " ".join(rle)


# ----------------------------------------------------------------------------------------------
# prefill replay


def prefill_point(model, tokens_all, n_tokens, step, baseline, stream):
    """Replay generate_step's prefill of tokens_all[:n_tokens]; return measurements."""
    from mlx_lm.models.cache import make_prompt_cache

    prompt = tokens_all[:n_tokens]
    cache = make_prompt_cache(model)
    chunks = []
    t0 = time.time()
    done = 0
    with mx.stream(stream):
        while n_tokens - done > 1:
            n = min(step, n_tokens - done - 1)
            before = active()
            mx.reset_peak_memory()
            model(prompt[None, done : done + n], cache=cache)
            mx.eval([c.state for c in cache])
            peak = max(int(mx.get_peak_memory()), before)
            after = active()
            mx.clear_cache()
            chunks.append(
                {
                    "start": done,
                    "end": done + n,
                    "active_before": before,
                    "peak": peak,
                    "transient": peak - before,
                    "active_after": after,
                }
            )
            done += n
        # last token: generate_step's _step
        before = active()
        mx.reset_peak_memory()
        logits = model(prompt[None, done:], cache=cache)
        logits = logits[:, -1, :]
        logprobs = logits - mx.logsumexp(logits, keepdims=True)
        y = mx.argmax(logprobs, axis=-1)
        mx.eval(y, logprobs)
        peak = max(int(mx.get_peak_memory()), before)
        last = {
            "start": done,
            "end": done + 1,
            "active_before": before,
            "peak": peak,
            "transient": peak - before,
            "active_after": active(),
            "logits_shape": list(logits.shape),
            "logits_dtype": str(logits.dtype),
        }
        del logits, logprobs, y
    wall = time.time() - t0
    cache_nbytes = int(sum(c.nbytes for c in cache))
    kinds = cache_kinds(cache)
    offsets = sorted({int(getattr(c, "offset", -1)) for c in cache})
    held = active() - baseline
    all_steps = chunks + [last]
    imax = max(range(len(all_steps)), key=lambda i: all_steps[i]["peak"])
    jmax = max(range(len(all_steps)), key=lambda i: all_steps[i]["transient"])
    res = {
        "tokens": n_tokens,
        "prefill_step_size": step,
        "n_chunks": len(chunks),
        "wall_s": round(wall, 3),
        "baseline": baseline,
        "peak_over_baseline": all_steps[imax]["peak"] - baseline,
        "peak_step_index": imax,
        "peak_step": [all_steps[imax]["start"], all_steps[imax]["end"]],
        "max_step_transient": all_steps[jmax]["transient"],
        "max_transient_step_index": jmax,
        "max_transient_step": [all_steps[jmax]["start"], all_steps[jmax]["end"]],
        "cache_nbytes": cache_nbytes,
        "held_after_over_baseline": held,
        "cache_kinds": kinds,
        "cache_offsets": offsets,
        "chunks": chunks,
        "last": last,
    }
    del cache
    settle()
    res["active_after_free_over_baseline"] = active() - baseline
    return res


# ----------------------------------------------------------------------------------------------
# microbenchmarks


def measure(fn, repeats=2):
    """Peak over what is held before fn() (inputs evaluated); fn returns arrays to eval."""
    out = []
    for _ in range(repeats):
        settle()
        before = active()
        mx.reset_peak_memory()
        t0 = time.perf_counter()
        r = fn()
        mx.eval(r)
        dt = time.perf_counter() - t0
        peak = max(int(mx.get_peak_memory()), before)
        rb = int(sum(a.nbytes for a in (r if isinstance(r, (list, tuple)) else [r]) if isinstance(a, mx.array)))
        out.append({"transient": peak - before, "result_bytes": rb, "ms": round(dt * 1e3, 2)})
        del r
    return out


def make_mask(kind, qL, kL, dtype, window=None):
    if kind in ("causal", "none"):
        return "causal" if kind == "causal" else None
    rinds = mx.arange(kL)[None]
    linds = mx.arange(kL - qL, kL)[:, None]
    m = linds >= rinds
    if window is not None:
        m = m & (linds < rinds + window)
    if kind == "bool":
        return m
    return mx.where(m, mx.array(0.0, dtype), mx.array(-float("inf"), dtype))


def sdpa_case(label, nq, nkv, Dk, Dv, qL, kL, mask_kind, sinks, repeats, window=None):
    dt = mx.bfloat16
    key = mx.random.key(0)
    k1, k2, k3 = mx.random.split(key, 3)
    q = mx.random.normal((1, nq, qL, Dk), key=k1).astype(dt)
    k = mx.random.normal((1, nkv, kL, Dk), key=k2).astype(dt)
    v = mx.random.normal((1, nkv, kL, Dv), key=k3).astype(dt)
    mask = make_mask(mask_kind, qL, kL, dt, window)
    s = mx.zeros((nq,), dtype=dt) if sinks else None
    mx.eval(q, k, v)
    if isinstance(mask, mx.array):
        mx.eval(mask)
    inputs = q.nbytes + k.nbytes + v.nbytes + (mask.nbytes if isinstance(mask, mx.array) else 0)
    scale = Dk**-0.5

    def fn():
        kw = {"sinks": s} if s is not None else {}
        return mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask, **kw)

    try:
        reps = measure(fn, repeats)
        err = None
    except Exception as e:  # noqa: BLE001 - record and go on
        reps, err = [], f"{type(e).__name__}: {e}"
    scores = nq * qL * kL * 2
    rec = {
        "label": label,
        "n_q": nq,
        "n_kv": nkv,
        "qL": qL,
        "kL": kL,
        "Dk": Dk,
        "Dv": Dv,
        "dtype": "bfloat16",
        "mask": mask_kind,
        "mask_shape": list(mask.shape) if isinstance(mask, mx.array) else None,
        "mask_dtype": str(mask.dtype) if isinstance(mask, mx.array) else None,
        "window": window,
        "sinks": bool(sinks),
        "inputs_bytes": int(inputs),
        "scores_bf16_bytes": scores,
        "repeats": reps,
        "transient_max": max((r["transient"] for r in reps), default=None),
        "ratio_to_scores_bf16": (
            round(max(r["transient"] for r in reps) / scores, 4) if reps else None
        ),
        "error": err,
    }
    del q, k, v, mask, s
    settle()
    return rec


def sdpa_micro(qL, kLs, repeats, deadline, results, save):
    recs = results.setdefault("sdpa", [])
    for label, nq, nkv, Dk, Dv, sink_opts in SDPA_SHAPES:
        for kL in kLs:
            for sinks in sink_opts:
                for mk in MASK_KINDS:
                    if time.time() - T0 > deadline:
                        log("sdpa: deadline reached, stopping")
                        return
                    r = sdpa_case(label, nq, nkv, Dk, Dv, qL, kL, mk, sinks, repeats)
                    recs.append(r)
                    log(
                        f"sdpa {label:16s} nq={nq:2d} nkv={nkv:2d} D={Dk}/{Dv} kL={kL:6d} "
                        f"{mk:8s} sinks={int(sinks)} transient={GiB(r['transient_max'] or 0):7.3f} GiB "
                        f"x_scores={r['ratio_to_scores_bf16']} {r['error'] or ''}"
                    )
        save()
    for label, nq, nkv, Dk, Dv, sinks, window in SDPA_SLIDING:
        kL = window - 1 + qL
        for mk in ("bool", "additive"):
            if time.time() - T0 > deadline:
                log("sdpa: deadline reached, stopping")
                return
            r = sdpa_case(label, nq, nkv, Dk, Dv, qL, kL, mk, sinks, repeats, window=window)
            recs.append(r)
            log(
                f"sdpa sliding {label:16s} kL={kL} {mk} transient={GiB(r['transient_max'] or 0):.3f} GiB"
            )
    save()


def find_block(layer, names):
    for n in names:
        if hasattr(layer, n):
            return n, getattr(layer, n)
    return None, None


def block_micro(model, cfg, qL, repeats):
    """One layer's MLP/MoE block and attention block (fresh cache) alone at qL tokens."""
    from mlx_lm.models.cache import make_prompt_cache

    t = text_args(cfg)
    hidden = t["hidden_size"]
    layers = model.layers
    out = []
    x = mx.random.normal((1, qL, hidden)).astype(DTYPE)
    mx.eval(x)
    seen = set()
    for i, layer in enumerate(layers):
        name, blk = find_block(layer, ("mlp", "feed_forward", "block_sparse_moe"))
        if blk is None:
            continue
        kind = type(blk).__name__
        if kind in seen:
            continue
        seen.add(kind)
        reps = measure(lambda: blk(x), repeats)
        rec = {
            "block": f"layers[{i}].{name}",
            "class": kind,
            "qL": qL,
            "hidden": hidden,
            "input_shape": list(x.shape),
            "dtype": str(DTYPE),
            "block_param_bytes": int(sum(p.nbytes for _, p in tree_flatten(blk.parameters()))),
            "repeats": reps,
            "transient_max": max(r["transient"] for r in reps),
        }
        for k in (
            "intermediate_size",
            "moe_intermediate_size",
            "num_experts",
            "num_local_experts",
            "n_routed_experts",
            "num_experts_per_tok",
            "n_shared_experts",
        ):
            if k in t:
                rec[k] = t[k]
        out.append(rec)
        log(f"  block {rec['block']:22s} {kind:24s} transient={GiB(rec['transient_max']):.3f} GiB")
    # attention blocks: one per distinct cache type, fresh cache, mask as the model would build it
    try:
        from mlx_lm.models.base import create_attention_mask

        caches = make_prompt_cache(model)
        seen = set()
        for i, layer in enumerate(layers):
            name, attn = find_block(layer, ("self_attn", "attention", "attn"))
            if attn is None:
                continue
            c = caches[i]
            ck = type(c).__name__
            if ck in seen:
                continue
            seen.add(ck)
            window = getattr(c, "max_size", None)

            def fn(attn=attn, ci=i, window=window):
                cc = make_prompt_cache(model)[ci]
                mask = create_attention_mask(x, cc, window_size=window)
                return [attn(x, mask, cc)] + [a for a in cc.state if isinstance(a, mx.array)]

            reps = measure(fn, repeats)
            rec = {
                "block": f"layers[{i}].{name}",
                "class": type(attn).__name__,
                "cache": ck,
                "window": window,
                "qL": qL,
                "input_shape": list(x.shape),
                "dtype": str(DTYPE),
                "repeats": reps,
                "transient_max": max(r["transient"] for r in reps),
                "note": "result_bytes = attention output + the fresh cache state (capacity rows)",
            }
            out.append(rec)
            log(
                f"  block {rec['block']:22s} {rec['class']:24s} cache={ck} "
                f"transient={GiB(rec['transient_max']):.3f} GiB"
            )
    except Exception as e:  # noqa: BLE001
        out.append({"error": f"attention block: {type(e).__name__}: {e}"})
        log("  attention block micro failed:", e)
    del x
    settle()
    return out


# ----------------------------------------------------------------------------------------------
# driver


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny shrunk configs, small lengths (CPU test)")
    ap.add_argument(
        "--models", default=",".join(DEFAULT_MODELS), help="comma list of name or name@L1+L2, or 'none'"
    )
    ap.add_argument("--lengths", default="8192,32768,65536")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--step", type=int, default=2048, help="prefill_step_size")
    ap.add_argument("--sdpa", action="store_true", help="run the SDPA microbenchmark")
    ap.add_argument("--sdpa-budget", type=float, default=120.0, help="seconds allowed for the SDPA sweep")
    ap.add_argument("--sdpa-kl", default="2048,8192,32768,65536")
    ap.add_argument("--blocks", action="store_true", help="per-model MLP/MoE/attention block microbench")
    ap.add_argument("--deadline", type=float, default=480.0, help="seconds from start; skip what would pass it")
    ap.add_argument(
        "--dtype",
        default=None,
        help="model/activation dtype (default bfloat16; float32 for --smoke, as CPU gather_mm is fp32-only)",
    )
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--tag", default="run")
    args = ap.parse_args()

    lengths = [int(x) for x in args.lengths.split(",")]
    step = args.step
    sdpa_kls = [int(x) for x in args.sdpa_kl.split(",")]
    sdpa_qL = step
    if args.smoke:
        lengths = [int(x) for x in (args.lengths.split(",") if args.lengths != "8192,32768,65536" else ["600", "1300"])]
        step = 256 if args.step == 2048 else args.step
        sdpa_qL = 128
        sdpa_kls = [256, 512]
        global SDPA_SLIDING
        SDPA_SLIDING = [(a, b, c, d, e, f, 64) for (a, b, c, d, e, f, _) in SDPA_SLIDING]

    global DTYPE
    DTYPE = getattr(mx, args.dtype or ("float32" if args.smoke else "bfloat16"))

    outdir = Path(args.out)
    outdir.mkdir(parents=True, exist_ok=True)
    outfile = outdir / f"peaks_{args.tag}.json"

    import mlx_lm

    results = {
        "meta": {
            "mlx": mx.__version__,
            "mlx_lm": mlx_lm.__version__,
            "device": str(mx.default_device()),
            "device_info": {k: (v if isinstance(v, (int, float, str)) else str(v)) for k, v in mx.device_info().items()},
            "python": platform.python_version(),
            "smoke": args.smoke,
            "prefill_step_size": step,
            "lengths": lengths,
            "repeats": args.repeats,
            "dtype": str(DTYPE),
            "memory_limit": int(mx.get_memory_limit()),
            "note": "all byte counts are MLX allocator active bytes (mx.get_active_memory / get_peak_memory)",
        },
        "models": {},
    }

    def save():
        tmp = outfile.with_suffix(".tmp")
        tmp.write_text(json.dumps(results, indent=1))
        tmp.replace(outfile)

    log("device", mx.default_device(), results["meta"]["device_info"])
    save()

    if args.sdpa:
        log(f"SDPA microbenchmark qL={sdpa_qL} kL={sdpa_kls}")
        sdpa_deadline = min(args.deadline, time.time() - T0 + args.sdpa_budget)
        sdpa_micro(sdpa_qL, sdpa_kls, args.repeats, sdpa_deadline, results, save)
        save()

    models = [] if args.models == "none" else args.models.split(",")
    stream = mx.new_stream(mx.default_device())
    for spec in models:
        # "name" or "name@L1+L2" (lengths for this model only)
        name, _, ls = spec.partition("@")
        mlengths = [int(x) for x in ls.split("+")] if ls else lengths
        if time.time() - T0 > args.deadline - 20:
            log(f"{name}: skipped (deadline)")
            results["models"][name] = {"skipped": "deadline"}
            save()
            continue
        cfg = load_config(name)
        if args.smoke:
            cfg = shrink_config(cfg)
        t = text_args(cfg)
        settle()
        pre_build = active()
        tb = time.time()
        model, wbytes = build_model(cfg)
        tokens_all = mx.random.randint(0, t.get("vocab_size", 1000) or 1000, (max(mlengths),)).astype(mx.int32)
        mx.eval(tokens_all)
        settle()
        baseline = active()
        rec = {
            "config_file": MODELS[name],
            "model_type": t.get("model_type"),
            "num_hidden_layers": t.get("num_hidden_layers"),
            "hidden_size": t.get("hidden_size"),
            "num_attention_heads": t.get("num_attention_heads"),
            "num_key_value_heads": t.get("num_key_value_heads"),
            "head_dim": t.get("head_dim"),
            "vocab_size": t.get("vocab_size"),
            "weights_bytes": int(wbytes),
            "active_before_build": pre_build,
            "baseline": baseline,
            "build_s": round(time.time() - tb, 2),
            "points": [],
        }
        results["models"][name] = rec
        log(f"== {name}: weights {GiB(wbytes):.2f} GiB, baseline {GiB(baseline):.2f} GiB, build {rec['build_s']} s")
        save()
        if args.blocks:
            rec["blocks"] = block_micro(model, cfg, step, args.repeats)
            save()
        last_wall = {}
        for L in mlengths:
            for rep in range(args.repeats):
                # projected wall time for this point
                if L in last_wall:
                    proj = last_wall[L]
                elif last_wall:
                    L0 = max(last_wall)
                    proj = last_wall[L0] * (L / L0) ** 1.7
                else:
                    proj = 0.0
                remaining = args.deadline - (time.time() - T0)
                if proj > remaining:
                    log(f"  {name} L={L} rep={rep}: skipped, projected {proj:.0f}s > remaining {remaining:.0f}s")
                    rec["points"].append({"tokens": L, "repeat": rep, "skipped": f"projected {proj:.0f}s > {remaining:.0f}s left"})
                    save()
                    continue
                settle()
                p = prefill_point(model, tokens_all, L, step, baseline, stream)
                p["repeat"] = rep
                rec["points"].append(p)
                last_wall[L] = p["wall_s"]
                log(
                    f"  {name} L={L} rep={rep}: peak/base {GiB(p['peak_over_baseline']):7.3f} GiB "
                    f"(step {p['peak_step_index']}/{p['n_chunks']}) kv {GiB(p['cache_nbytes']):6.3f} GiB "
                    f"max step transient {GiB(p['max_step_transient']):6.3f} GiB "
                    f"(step {p['max_transient_step_index']}) wall {p['wall_s']:.1f}s"
                )
                save()
        del model, tokens_all
        settle()
        rec["active_after_free"] = active()

    results["meta"]["total_s"] = round(time.time() - T0, 1)
    save()
    print_tables(results)
    log("wrote", outfile)


def print_tables(results):
    print("\n# prefill points (GiB = 2^30 B)", flush=True)
    print(f"{'model':18s} {'tokens':>7s} {'kv':>8s} {'peak/base':>28s} {'max step tr':>12s} {'step':>5s} {'wall':>6s}")
    for name, rec in results["models"].items():
        pts = [p for p in rec.get("points", []) if "peak_over_baseline" in p]
        for L in sorted({p["tokens"] for p in pts}):
            ps = [p for p in pts if p["tokens"] == L]
            peaks = " ".join(f"{GiB(p['peak_over_baseline']):.3f}" for p in ps)
            mt = max(ps, key=lambda p: p["max_step_transient"])
            print(
                f"{name:18s} {L:7d} {GiB(ps[0]['cache_nbytes']):8.3f} {peaks:>28s} "
                f"{GiB(mt['max_step_transient']):12.3f} {mt['max_transient_step_index']:5d} {ps[0]['wall_s']:6.1f}"
            )
    if results.get("sdpa"):
        print("\n# SDPA alone: transient over inputs (GiB), ratio to n_q*qL*kL*2")
        for r in results["sdpa"]:
            tm = r["transient_max"]
            print(
                f"{r['label']:16s} {r['n_q']:3d}/{r['n_kv']:<3d} D{r['Dk']}/{r['Dv']} kL={r['kL']:6d} "
                f"{r['mask']:8s} s={int(r['sinks'])} {GiB(tm or 0):8.3f} {r['ratio_to_scores_bf16']} {r['error'] or ''}"
            )
    for name, rec in results["models"].items():
        for b in rec.get("blocks", []):
            if "transient_max" in b:
                print(f"block {name:16s} {b['block']:22s} {b['class']:24s} {GiB(b['transient_max']):.3f} GiB")


if __name__ == "__main__":
    sys.exit(main())
