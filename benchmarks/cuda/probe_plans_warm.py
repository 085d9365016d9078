#!/usr/bin/env python3
"""The "plans warm" condition (session 10, s10-mla; issue 14 item 1): every chunk shape seen before it is measured.

Session 8 left six DeepSeek-family / gated-DeltaNet CUDA shapes above the band (Kimi-K2 32k / 64k at step 2048, 32k at
4096, 32k / 64k at 512; Qwen3-Next 8k at 512), measured alike idle, loaded and stalled. Its traces showed why for
Kimi: in a prompt's last chunk layer 0 meets a key length the process has not seen, and the host waits for the GPU
before it launches that layer's SDPA (session 9: building the cuDNN SDPA plan for a new shape blocks the host, ~400 ms
against 0.2 ms for a repeated shape). So the first prompt of a given length never runs ahead of the GPU at the start
of its last chunk, the chunk that peaks. An engine in steady state has met the shapes before (cuDNN's plan cache
holds 256 in MLX 0.32.4, keyed by the q / k / v / mask shapes and strides): that is the case the estimate bounds.

Per model (built once, a 64-token warm-up), per prompt length and prefill step, in this order:

* ``first``: the prompt as sessions 4-8 measured it (its last chunk's shape new to the process, earlier chunks maybe
  not): the throw-away run that puts every chunk's plan in the cache, traced and kept as one more sample;
* ``warm``: the same prompt again, idle GPU: every shape seen;
* ``warm_stalled``: again with session 8's stalls (stall.py: a spin kernel before every RMSNorm of a layer, a longer
  one at the chunk's first layer, every 8th gated-DeltaNet step), plans warm;
* ``warm_stalled_attn``: as ``warm_stalled`` plus a spin right before every attention's SDPA (stall.install_attention):
  the GPU cannot finish layer 0's SDPA before the host, woken when the score graph completes, launches the 12th
  graph, so the estimate's worst window (graphs 2-12 in flight, layer 0's score matrix alive) can form.

Writes ``$OUT/commits_<tag>.json`` (points as probe_commits.py, each with ``condition``), rewritten after each point.
CPU check: ``--smoke`` (shrunk configs, fp32, the stalls as identity ops).
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
import probe_commits as PC  # noqa: E402
import stall as ST  # noqa: E402

# (model, [(tokens, step), ...], conditions, stalls: (norm ms, chunk-start ms, attention ms) per step)
S10 = [
    ("kimi-k2-8l-16e", [(32768, 2048), (65536, 2048), (32768, 4096), (32768, 512), (65536, 512)],
     ("first", "warm", "warm_stalled_attn", "warm_stalled"),
     {2048: (10, 200, 20), 4096: (10, 200, 20), 512: (5, 100, 5)}),
    ("qwen3-next-80b-a3b-8l-64e", [(8192, 512)], ("first", "warm", "warm_stalled_attn"), {512: (5, 100, 5)}),
    ("deepseek-v3-8l-16e", [(8192, 2048)], ("first", "warm", "warm_stalled_attn"), {2048: (10, 200, 20)}),
]
# run 2 (after run 1: written with predictions-s10-mla.md's "Run 2"): the attention stall 100 ms, so the GPU holds
# layer 0's SDPA past the host's encoding of graph 13 also at 45k-64k keys (run 1's 20 ms lost that race by 0-4 ms
# in the last chunks); each stalled condition run twice where its chunk shapes are new to the stall kernels.
S10B = [
    ("kimi-k2-8l-16e", [(32768, 2048), (65536, 2048), (32768, 4096)],
     ("first", "warm_stalled_attn", "warm_stalled_attn"),
     {2048: (10, 200, 100), 4096: (10, 200, 100)}),
    ("deepseek-v3-8l-16e", [(8192, 2048), (32768, 2048)], ("first", "warm", "warm_stalled_attn", "warm_stalled_attn"),
     {2048: (10, 200, 100)}),
]
PLANS = {"s10": S10, "s10b": S10B}
# costly conditions left out where the cheaper ones answer the question (the device budget): warm_stalled only at
# the two short step-2048 / 4096 prompts (is the attention stall what makes the difference?)
SKIP = {("kimi-k2-8l-16e", 65536, 2048, "warm_stalled"), ("kimi-k2-8l-16e", 32768, 512, "warm_stalled"),
        ("kimi-k2-8l-16e", 65536, 512, "warm_stalled"),
        ("kimi-k2-8l-16e", 65536, 2048, "warm_stalled_attn", 1), ("deepseek-v3-8l-16e", 32768, 2048, "warm", 0),
        ("deepseek-v3-8l-16e", 32768, 2048, "warm_stalled_attn", 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tag", default="s10warm")
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--deadline", type=float, default=540.0)
    ap.add_argument("--plan", default="s10", choices=sorted(PLANS))
    ap.add_argument("--only", default="", help="comma-separated model names (default: all of S10)")
    ap.add_argument("--smoke", action="store_true", help="shrunk configs, short prompts, fp32, stalls as identities")
    a = ap.parse_args()
    T0 = time.time()
    mode = "ident" if a.smoke else "kernel"
    trace = PC.Trace(os.environ["COMMIT_TRACE"]) if os.environ.get("COMMIT_TRACE") else None
    out = {"mlx": mx.__version__, "device": str(mx.default_device()), "condition": "plans warm (s10-mla)",
           "env": {k: v for k, v in os.environ.items() if k.startswith("MLX_")}, "points": [], "skipped": []}
    Path(a.out).mkdir(parents=True, exist_ok=True)
    path = Path(a.out) / f"commits_{a.tag}.json"

    def save():
        path.write_text(json.dumps(out))

    if a.smoke:
        MP.DTYPE = mx.float32
    out["stall_self_test"] = ST.self_test(mode)
    print("stall self-test:", out["stall_self_test"], flush=True)
    stream = mx.new_stream(mx.default_device())
    only = set(filter(None, a.only.split(",")))
    for name, shapes, conds, stalls in PLANS[a.plan]:
        if only and name not in only:
            continue
        if time.time() - T0 > a.deadline:
            out["skipped"].append(name)
            print("deadline: skipping", name, flush=True)
            continue
        cfg = MP.load_config(name)
        if a.smoke:
            cfg = MP.shrink_config(cfg)
            t = cfg.get("text_config", cfg)
            t["num_hidden_layers"] = max(t["num_hidden_layers"], t.get("full_attention_interval", 0))
            stalls = {max(8, s // 64): v for s, v in stalls.items()}
            shapes = [(max(2, t // 256), max(8, s // 64)) for t, s in shapes]
        PC.settle()
        model, _ = MP.build_model(cfg)
        PC.settle()
        baseline = int(mx.get_active_memory())
        # installed after the baseline, switched off until a stalled condition (the norms then run as built)
        ST.ACTIVE[0] = False
        scfg = ST.install(model, 1.0, 8, 2.0, mode)
        scfg["attention_patched"] = ST.install_attention(mode)
        vocab = MP.text_args(cfg).get("vocab_size", 32000)
        toks = mx.random.randint(0, vocab, (max(t for t, _ in shapes),), key=mx.random.key(1)).astype(mx.int32)
        mx.eval(toks)
        warm = {}
        for tokens, step in shapes:
            norm_ms, chunk_ms, attn_ms = stalls[step]
            if step not in warm:  # the 64-token warm-up of every earlier session, once per step, idle then stalled
                w = PC.traced_prefill(model, toks, min(64, tokens), step, baseline, stream, trace)
                # the stall kernels are compiled per (size, spin time): build them all now, not inside a measurement
                _set(model, True, norm_ms, chunk_ms, attn_ms)
                PC.traced_prefill(model, toks, min(64, tokens), step, baseline, stream, trace)
                _set(model, False, norm_ms, 0.0, 0.0)
                warm[step] = [c.get("n_launch") for c in w]
            for ci, cond in enumerate(conds):
                rep = conds[:ci].count(cond)
                if ((name, tokens, step, cond) in SKIP or (name, tokens, step, cond, rep) in SKIP) and not a.smoke:
                    continue
                if time.time() - T0 > a.deadline:
                    out["skipped"].append(f"{name}@{tokens}:{step}:{cond}")
                    print("deadline: skipping", name, tokens, step, cond, flush=True)
                    continue
                stalled = cond.startswith("warm_stalled")
                _set(model, stalled, norm_ms, chunk_ms if stalled else 0.0,
                     attn_ms if cond == "warm_stalled_attn" else 0.0)
                chunks = PC.traced_prefill(model, toks, tokens, step, baseline, stream, trace)
                _set(model, False, norm_ms, 0.0, 0.0)
                pk = max(c["peak_over_baseline_mib"] for c in chunks)
                stall_cfg = dict(scfg, layer_ms=norm_ms, chunk_ms=chunk_ms,
                                 attn_ms=attn_ms if cond == "warm_stalled_attn" else 0.0) if stalled else None
                out["points"].append({"model": name, "layers": None, "tokens": tokens, "step": step, "repeat": rep,
                                      "condition": cond, "hooked": trace.hooked() if trace else None,
                                      "stall": stall_cfg, "warmup_graphs": warm[step],
                                      "peak_over_baseline_mib": pk, "chunks": chunks})
                save()
                last = chunks[-1]
                print(f"[{time.time() - T0:6.1f}s] {name} {tokens} step {step} {cond}: peak {pk / 1024:.3f} GiB (rep {rep}); "
                      f"last chunk {last.get('n_launch')} graphs, in flight at launch 12: "
                      f"{(last.get('launches') or [[0, 0, None]] * 13)[11][2] if len(last.get('launches') or []) > 11 else None}, "
                      f"wall {sum(c['wall_ms'] for c in chunks) / 1e3:.1f} s", flush=True)
        del model
        ST.uninstall_gdn()
        PC.settle()
    out["wall_s"] = round(time.time() - T0, 1)
    save()


def _set(model, active: bool, norm_ms: float, chunk_ms: float, attn_ms: float) -> None:
    """Switch the stalls on or off and set their spin times (the StalledNorm wrappers stall.install put in)."""
    ST.ACTIVE[0] = active
    ST.CHUNK_MS[0] = chunk_ms
    ST.ATTN_MS[0] = attn_ms
    for _, m in model.named_modules():
        if isinstance(m, ST.StalledNorm):
            m._ms = norm_ms


if __name__ == "__main__":
    main()
