#!/usr/bin/env python3
"""Held-out check 3 (session 13): prefill peaks of whole prompts and of requests AFTER A CACHED PREFIX, traced.

Why a new probe: ``probe_commits.py`` measures one prompt from an empty cache; the after-prefix points of
session 12 were the later chunks of a long prompt, so their new-token counts were whole chunks. The estimate's
prompt-direction bounds (issue 14 item 4) live *inside* a chunk block: a request of n new tokens (n not a
multiple of the step) after c cached tokens. Here the prefix is built first (c tokens in chunks of the step, the
cache as a previous request leaves it, untraced and unstalled), then the request is replayed as mlx-lm's
``generate_step`` prefills it: n - 1 tokens in chunks of the step (the last token goes to the decode step).

Measured per request: max over its chunks of ``mx.get_peak_memory()`` minus the active memory right before the
request (the prefix's cache excluded: what ``prefill_peak(Request(c + n, cached=c))`` reports). c = 0 is a plain
prompt (as probe_commits.py / heldout2).

Spec: ``name@c/n[+c/n...]:step[:repeats[:depth]]`` comma separated; ``--conditions idle,stalled`` measures every
point of a model in each condition in turn (stalls from ``stall.py``, switched by ``stall.ACTIVE``, installed
after the baseline; the prefix is always built with them off). Writes ``$OUT/prefix_<tag>.json``.
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
import probe_commits as PC  # noqa: E402  (Trace, chunk_summary, settle)
import stall as ST  # noqa: E402

MiB = 2**20


def build_config(name: str, depth: int) -> dict:
    cfg = MP.load_config(name)
    if cfg.get("model_type") == "lfm2_vl":  # mlx-lm's lfm2-vl wraps lfm2.Model (text only): build that
        cfg = dict(cfg["text_config"])
    t = cfg.get("text_config", cfg)
    if depth:
        t["num_hidden_layers"] = depth
        for k in ("hybrid_override_pattern", "layer_types"):
            if k in t and t[k]:
                t[k] = t[k][:depth]
    cfg.pop("quantization_config", None)
    t.pop("quantization_config", None)
    return cfg


def run_chunks(model, cache, toks, a, b, step, stream, trace=None, ref=None, traced=False):
    """Feed toks[a:b] in chunks of ``step``; per chunk the peak over ``ref`` (MiB) when traced."""
    out, done = [], a
    with mx.stream(stream):
        while done < b:
            n = min(step, b - done)
            before = int(mx.get_active_memory())
            mx.reset_peak_memory()
            if trace and traced:
                trace.start(len(out))
            ST.COUNT.reset()
            t0 = time.time()
            model(toks[None, done:done + n], cache=cache)
            mx.eval([c.state for c in cache])
            wall = time.time() - t0
            peak = max(int(mx.get_peak_memory()), before)
            ev = trace.read() if (trace and traced) else []
            mx.clear_cache()
            if traced:
                c = {"start": done, "end": done + n, "peak_over_ref_mib": round((peak - ref) / MiB, 1),
                     "before_over_ref_mib": round((before - ref) / MiB, 1), "wall_ms": round(wall * 1e3, 2)}
                c.update(PC.chunk_summary(ev, before))
                if ST.COUNT.n:
                    c["stalls"] = ST.COUNT.n
                out.append(c)
            done += n
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", required=True)
    ap.add_argument("--tag", default="s13")
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--deadline", type=float, default=400.0)
    ap.add_argument("--warmup", type=int, default=64)
    ap.add_argument("--conditions", default="idle")
    ap.add_argument("--stall-layer-ms", type=float, default=10.0)
    ap.add_argument("--stall-gdn-every", type=int, default=8)
    ap.add_argument("--stall-gdn-ms", type=float, default=2.0)
    ap.add_argument("--smoke", action="store_true", help="shrunk configs, fp32, 'ident' stalls (CPU check)")
    a = ap.parse_args()
    T0 = time.time()
    conds = a.conditions.split(",")
    mode = "ident" if a.smoke else "kernel"
    out = {"mlx": mx.__version__, "device": str(mx.default_device()), "points": [], "skipped": []}
    Path(a.out).mkdir(parents=True, exist_ok=True)
    path = Path(a.out) / f"prefix_{a.tag}.json"
    save = lambda: path.write_text(json.dumps(out))  # noqa: E731
    if a.smoke:
        MP.DTYPE = mx.float32
    trace = PC.Trace(os.environ["COMMIT_TRACE"]) if os.environ.get("COMMIT_TRACE") else None
    if "stalled" in conds:
        out["stall_self_test"] = ST.self_test(mode)
        print("stall self-test:", out["stall_self_test"], flush=True)
    stream = mx.new_stream(mx.default_device())
    from mlx_lm.models.cache import make_prompt_cache

    for spec in a.models.split(","):
        name, rest = spec.split("@")
        parts = rest.split(":")
        reqs = [tuple(int(x) for x in p.split("/")) for p in parts[0].split("+")]
        step = int(parts[1]) if len(parts) > 1 else 2048
        reps = int(parts[2]) if len(parts) > 2 else 1
        depth = int(parts[3]) if len(parts) > 3 else 0
        if time.time() - T0 > a.deadline:
            print("deadline: skipping", spec, flush=True)
            out["skipped"].append(spec)
            continue
        cfg = build_config(name, depth)
        if a.smoke:
            lt = cfg.get("layer_types")
            cfg = MP.shrink_config(cfg)
            if lt and "full_attention" in lt:  # keep one attention layer in the shrunk stack (lfm2 needs one)
                cfg["layer_types"] = lt[:lt.index("full_attention") + 1]
                cfg["num_hidden_layers"] = len(cfg["layer_types"])
                cfg["block_ff_dim"] = 256
                cfg["block_dim"] = cfg["hidden_size"]
        PC.settle()
        model, weights = MP.build_model(cfg)
        PC.settle()
        baseline = int(mx.get_active_memory())
        stall_cfg = None
        if "stalled" in conds:
            ST.ACTIVE[0] = False
            stall_cfg = ST.install(model, a.stall_layer_ms, a.stall_gdn_every, a.stall_gdn_ms, mode)
        vocab = MP.text_args(cfg).get("vocab_size", 32000)
        L = max([c + n for c, n in reqs] + [a.warmup])
        toks = mx.random.randint(0, vocab, (L,), key=mx.random.key(1)).astype(mx.int32)
        mx.eval(toks)
        if a.warmup:
            cache = make_prompt_cache(model)
            run_chunks(model, cache, toks, 0, a.warmup - 1, step, stream)
            del cache
            PC.settle()
        tag = f"{name}-{depth}L" if depth else name
        for cond in conds:
            for c, n in reqs:
                for r in range(reps):
                    if time.time() - T0 > a.deadline:
                        out["skipped"].append(f"{tag} {cond} {c}/{n} rep {r}")
                        break
                    ST.ACTIVE[0] = False
                    cache = make_prompt_cache(model)
                    if c:
                        run_chunks(model, cache, toks, 0, c, step, stream)
                    PC.settle()
                    ref = int(mx.get_active_memory())
                    ST.ACTIVE[0] = cond == "stalled"
                    ch = run_chunks(model, cache, toks, c, c + n - 1, step, stream, trace, ref, traced=True)
                    ST.ACTIVE[0] = False
                    pk = max(x["peak_over_ref_mib"] for x in ch)
                    out["points"].append({"model": name, "layers": depth or None, "cached": c, "new": n, "step": step,
                                          "condition": cond, "repeat": r, "stall": stall_cfg if cond == "stalled" else None,
                                          "prefix_held_mib": round((ref - baseline) / MiB, 1),
                                          "weights_bytes": weights, "peak_over_ref_mib": pk, "chunks": ch})
                    save()
                    print(f"[{time.time() - T0:6.1f}s] {tag} {cond} c={c} n={n} step {step} rep {r}: peak "
                          f"{pk / 1024:.3f} GiB (prefix {(ref - baseline) / 2**30:.3f}); "
                          + " ".join(f"{i}:{x.get('n_launch')}/{x.get('most_in_flight_at_launch')}/"
                                     f"{x['peak_over_ref_mib'] / 1024:.2f}" for i, x in enumerate(ch)), flush=True)
                    del cache
                    PC.settle()
        del model
        if stall_cfg:
            ST.uninstall_gdn()
        ST.ACTIVE[0] = True
        PC.settle()
    save()


if __name__ == "__main__":
    main()
