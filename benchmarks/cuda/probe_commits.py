#!/usr/bin/env python3
"""Where MLX really commits CUDA graphs during a prefill chunk, and which single ops write in place.

Two probes for the CUDA prefill model (omlx_profiles/peak/transient.py):

* ``--donation``: one op at a time on evaluated inputs, the peak over what was held before: 0 when the op
  writes into its input's buffer (donation), the output's size when it allocates. Checks the item lists'
  claims: a fused rms_norm of a single-use input (Gemma's post-norms, q/k norms after a reshape) and a
  residual add allocate nothing; RoPE of a transposed (B, H, L, D) view allocates its output.
* ``--models``: generate_step's prefill (as measure_peaks.py) with ``commit_trace.so`` LD_PRELOADed
  (``COMMIT_TRACE`` = its path): per chunk, every CUDA graph launch (one per commit) and every GPU
  completion of a commit, each with MLX's active memory at that moment. So the number of graphs per chunk,
  how many were in flight when the host launched the next one, and the live bytes at each commit are
  measured instead of inferred.

Writes ``$OUT/commits_<tag>.json``; prints a summary line per chunk.
"""
from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import sys
import time
from pathlib import Path

import mlx.core as mx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import measure_peaks as MP  # noqa: E402  (model building and configs)
import stall as ST  # noqa: E402  (the "stalled" condition, session 8)

MiB = 2**20


def settle():
    gc.collect()
    mx.synchronize()
    mx.clear_cache()


# ------------------------------------------------------------------------------------------------
# donation: one op on evaluated inputs


def _one(label, build, expect_alloc):
    """build() returns (output, drop): ``drop`` names the inputs the caller must release before eval."""
    settle()
    y, keep = build()
    before = int(mx.get_active_memory())
    mx.reset_peak_memory()
    mx.eval(y)
    peak = max(int(mx.get_peak_memory()), before) - before
    out = {"case": label, "peak_over_inputs": peak, "output_bytes": int(y.nbytes), "expected_alloc": expect_alloc}
    print(json.dumps(out), flush=True)
    del y, keep
    return out


def donation(S=2048, h=5376, nq=32, D=128):
    """Gemma-3-27B widths (hidden 5376, 32 heads of 128), 2048 tokens."""
    dt = mx.bfloat16
    key = mx.random.key(0)
    x = mx.random.normal((1, S, h), key=key).astype(dt)
    W = (mx.random.normal((h, h), key=key) * 0.01).astype(dt)
    Wq = (mx.random.normal((h, nq * D), key=key) * 0.01).astype(dt)
    w = mx.ones((h,), dt)
    wd = mx.ones((D,), dt)
    mx.eval(x, W, Wq, w, wd)
    res = []

    def fresh(a):
        r = a
        mx.eval(r)
        return r

    def norm_single():
        r = fresh(x @ W)
        y = mx.fast.rms_norm(r, w, 1e-6)
        return y, None  # r's only reference is y's input list

    def norm_shared():
        r = fresh(x @ W)
        return mx.fast.rms_norm(r, w, 1e-6), r  # r kept: cannot be donated

    def add_single():
        r = fresh(x @ W)
        return x + r, None

    def qnorm_reshape():
        q = fresh(x @ Wq)
        return mx.fast.rms_norm(q.reshape(1, S, nq, D), wd, 1e-6), None

    def rope_transposed():
        q = fresh((x @ Wq).reshape(1, S, nq, D))
        return mx.fast.rope(q.transpose(0, 2, 1, 3), D, traditional=False, base=1e4, scale=1.0, offset=0), None

    def rope_contiguous():
        q = fresh((x @ Wq).reshape(1, S, nq, D).transpose(0, 2, 1, 3) * 1)  # a row-contiguous (B, H, L, D) copy
        return mx.fast.rope(q, D, traditional=False, base=1e4, scale=1.0, offset=0), None

    def gelu_mul():
        import mlx.nn as nn
        g = fresh(x @ W)
        u = fresh(x @ W)
        return nn.gelu_approx(g) * u, None

    for label, fn, exp in [
        ("rms_norm, single-use input", norm_single, 0),
        ("rms_norm, input kept alive", norm_shared, 1),
        ("residual add, single-use operand", add_single, 0),
        ("rms_norm of a reshaped single-use projection (q_norm)", qnorm_reshape, 0),
        ("rope of a transposed (B,H,L,D) view", rope_transposed, 1),
        ("rope of a row-contiguous single-use input", rope_contiguous, 0),
        ("gelu_approx(g) * u, both single-use", gelu_mul, 0),
    ]:
        res.append(_one(label, fn, exp))
    return res


# ------------------------------------------------------------------------------------------------
# element meter: how many graphs a chain of K identical blocks commits


def meter(trace, S=2048):
    """Chains of K identical blocks on evaluated inputs, one ``mx.eval``: the number of graph launches.
    Run with MLX_MAX_OPS_PER_BUFFER large, so only the element rule ends a graph: a graph ends after the
    op that takes its kernels' input elements past 1000 Mi, so K blocks of e elements each commit about
    K * e / 1001 Mi graphs, and the count measures what the blocks' kernels read (the model's ``elems``)."""
    import mlx.nn as nn
    from mlx_lm.models.activations import swiglu

    dt = mx.bfloat16
    key = mx.random.key(2)

    def rnd(*shape, scale=1.0):
        return (mx.random.normal(shape, key=key) * scale).astype(dt)

    h, I = (5376, 21504) if S == 2048 else (256, 512)  # Gemma-3-27B (or tiny, CPU check)
    nq, nkv, D = 32, 16, 128
    kL = 3071 if S == 2048 else S + 100
    res = []
    W = {}

    def case(label, K, inputs, step, ops_per_block):
        mx.eval(list(inputs.values()))
        settle()
        before = int(mx.get_active_memory())
        mx.reset_peak_memory()
        trace.start(0)
        y = inputs["x"]
        for _ in range(K):
            y = step(y, inputs)
        mx.eval(y)
        ev = trace.read()
        n = sum(1 for e in ev if e[2] == 0)
        nodes = [e[1] for e in ev if e[2] == 3]
        most, cur = 0, 0
        for e in ev:
            cur += 1 if e[2] == 0 else (-1 if e[2] == 1 else 0)
            most = max(most, cur)
        out = {"case": label, "K": K, "ops_per_block": ops_per_block, "launches": n, "most_in_flight": most,
               "nodes_per_graph": nodes,
               "peak_over_inputs": max(int(mx.get_peak_memory()), before) - before}
        print(json.dumps(out), flush=True)
        res.append(out)
        del y

    # elementwise chains on (S, I): gelu_approx (compiled), multiply, silu-swiglu (compiled)
    c = {"x": rnd(1, S, I), "u": rnd(1, S, I)}
    case("gelu_approx(y), (2048, 21504)", 240, c, lambda y, a: nn.gelu_approx(y), 1)
    case("y * u, (2048, 21504)", 120, c, lambda y, a: y * a["u"], 1)
    case("swiglu(y, u) (mlx-lm, compiled), (2048, 21504)", 120, c, lambda y, a: swiglu(y, a["u"]), 1)
    case("gelu_approx(y) * u, (2048, 21504)", 80, c, lambda y, a: nn.gelu_approx(y) * a["u"], 2)
    del c
    # Gemma MLP block: down(gelu(x Wg) * (x Wu))
    m = {"x": rnd(1, S, h), "g": rnd(h, I, scale=0.01), "u": rnd(h, I, scale=0.01), "d": rnd(I, h, scale=0.01)}
    case("gemma MLP: down(gelu_approx(x@Wg) * (x@Wu))", 24, m,
         lambda y, a: (nn.gelu_approx(y @ a["g"]) * (y @ a["u"])) @ a["d"], 4)
    case("llama MLP: down(swiglu(x@Wg, x@Wu))", 24, m, lambda y, a: swiglu(y @ a["g"], y @ a["u"]) @ a["d"], 4)
    del m
    # rms_norm of a transposed (B, H, L, D) view (Gemma's q_norm) and of a contiguous input
    q = {"x": rnd(1, S, nq, D), "w": mx.ones((D,), dt)}
    case("rms_norm(y.transpose(0,2,1,3)).transpose(0,2,1,3), (1,2048,32,128)", 200, q,
         lambda y, a: mx.fast.rms_norm(y.transpose(0, 2, 1, 3), a["w"], 1e-6).transpose(0, 2, 1, 3), 1)
    case("rms_norm(y), (1,2048,32,128)", 200, q, lambda y, a: mx.fast.rms_norm(y, a["w"], 1e-6), 1)
    del q
    # SDPA: cuDNN with a bool sliding mask (converted to additive), with an additive mask, fallback D 256
    rows = mx.arange(kL - S, kL)[:, None]
    cols = mx.arange(kL)[None]
    band = (rows >= cols) & (rows < cols + 1024)
    a = {"x": rnd(1, nq, S, D), "k": rnd(1, nkv, kL, D), "v": rnd(1, nkv, kL, D), "mb": band,
         "ma": mx.where(band, 0.0, -float("inf")).astype(dt)}
    sc = 1.0 / D ** 0.5
    case("sdpa cuDNN + bool (2048, 3071) mask, 32/16 D128", 24, a,
         lambda y, a: mx.fast.scaled_dot_product_attention(y, a["k"], a["v"], scale=sc, mask=a["mb"]), 4)
    case("sdpa cuDNN + additive bf16 (2048, 3071) mask, 32/16 D128", 24, a,
         lambda y, a: mx.fast.scaled_dot_product_attention(y, a["k"], a["v"], scale=sc, mask=a["ma"]), 1)
    case("sdpa cuDNN causal, 32/16 D128, kL 3071", 24, a,
         lambda y, a: mx.fast.scaled_dot_product_attention(y, a["k"], a["v"], scale=sc, mask="causal"), 1)
    del a
    f = {"x": rnd(1, 8, S, 256), "k": rnd(1, 4, 4 * S, 256), "v": rnd(1, 4, 4 * S, 256)}
    case("sdpa fallback causal 8/4 D256, kL 8192", 16, f,
         lambda y, a: mx.fast.scaled_dot_product_attention(y, a["k"], a["v"], scale=1 / 16, mask="causal"), 8)
    del f
    return res


# ------------------------------------------------------------------------------------------------
# commit trace


class Trace:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        libmlx = Path(mx.__file__).resolve().parent / "lib" / "libmlx.so"
        fn = ctypes.CDLL(str(libmlx))["_ZN3mlx4core17get_active_memoryEv"]
        self.lib.trace_set_mem_fn(ctypes.cast(fn, ctypes.c_void_p))
        self.lib.trace_n.restype = ctypes.c_long

    def hooked(self):
        return int(self.lib.trace_hooked())

    def start(self, mark):
        self.lib.trace_reset()
        self.lib.trace_mark(int(mark))

    def read(self):
        n = int(self.lib.trace_n())
        t, m, k, mk = ctypes.c_double(), ctypes.c_longlong(), ctypes.c_int(), ctypes.c_int()
        ev = []
        for i in range(n):
            self.lib.trace_get(ctypes.c_long(i), ctypes.byref(t), ctypes.byref(m), ctypes.byref(k), ctypes.byref(mk))
            ev.append((t.value, m.value, k.value))
        return ev


def chunk_summary(ev, before):
    """Launch and completion lists (ms from the mark, MiB over active-before) and the most graphs in flight
    when a graph was launched."""
    if not ev:
        return {}
    t0 = ev[0][0]
    launches, dones, inflight, most, nodes = [], [], 0, 0, -1
    for t, m, k in ev:
        if k == 3:
            nodes = m
        elif k == 0:
            inflight += 1
            most = max(most, inflight)
            launches.append([round((t - t0) * 1e3, 3), round((m - before) / MiB, 1), inflight, nodes])
            nodes = -1
        elif k == 1:
            inflight -= 1
            dones.append([round((t - t0) * 1e3, 3), round((m - before) / MiB, 1)])
    return {"n_launch": len(launches), "n_done": len(dones), "most_in_flight_at_launch": most,
            "max_mem_at_launch_mib": max((x[1] for x in launches), default=None),
            "launches": launches, "dones": dones}


def traced_prefill(model, tokens, n_tokens, step, baseline, stream, trace):
    from mlx_lm.models.cache import make_prompt_cache

    cache = make_prompt_cache(model)
    chunks, done = [], 0
    with mx.stream(stream):
        while n_tokens - done > 1:
            n = min(step, n_tokens - done - 1)
            before = int(mx.get_active_memory())
            mx.reset_peak_memory()
            if trace:
                trace.start(len(chunks))
            ST.COUNT.reset()
            t0 = time.time()
            model(tokens[None, done:done + n], cache=cache)
            mx.eval([c.state for c in cache])
            wall = time.time() - t0
            peak = max(int(mx.get_peak_memory()), before)
            ev = trace.read() if trace else []
            mx.clear_cache()
            c = {"start": done, "end": done + n, "peak_over_baseline_mib": round((peak - baseline) / MiB, 1),
                 "before_over_baseline_mib": round((before - baseline) / MiB, 1), "wall_ms": round(wall * 1e3, 2)}
            c.update(chunk_summary(ev, before))
            if ST.COUNT.n:
                c["stalls"] = ST.COUNT.n
                c["stall_bytes_bound"] = ST.COUNT.bytes
            chunks.append(c)
            done += n
    del cache
    settle()
    return chunks


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--donation", action="store_true")
    ap.add_argument("--meter", action="store_true", help="element meter chains (needs COMMIT_TRACE)")
    ap.add_argument("--models", default="", help="name@tokens[+tokens]:step[:repeats], comma separated")
    ap.add_argument("--tag", default="run")
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--deadline", type=float, default=400.0)
    ap.add_argument("--smoke", action="store_true", help="shrunk configs (CPU check of the script)")
    ap.add_argument("--warmup", type=int, default=0,
                    help="tokens of one untraced prefill (same step) run right after a model is built")
    ap.add_argument("--stall-layer-ms", type=float, default=0.0,
                    help="stalled condition (stall.py): spin this long before each layer's attention and MLP block")
    ap.add_argument("--stall-gdn-every", type=int, default=0, help="stall every Nth gated-DeltaNet token step")
    ap.add_argument("--stall-gdn-ms", type=float, default=0.0)
    ap.add_argument("--stall-mode", default="kernel", choices=["kernel", "ident"])
    a = ap.parse_args()
    T0 = time.time()
    stalled = a.stall_layer_ms > 0 or a.stall_gdn_every > 0
    out = {"mlx": mx.__version__, "device": str(mx.default_device()), "env": {k: v for k, v in os.environ.items()
                                                                              if k.startswith("MLX_")}}
    Path(a.out).mkdir(parents=True, exist_ok=True)
    path = Path(a.out) / f"commits_{a.tag}.json"

    def save():
        path.write_text(json.dumps(out))

    if a.donation:
        out["donation"] = donation(*((256, 512, 4, 128) if a.smoke else ()))
        save()
    trace = Trace(os.environ["COMMIT_TRACE"]) if os.environ.get("COMMIT_TRACE") else None
    if a.meter:
        out["meter"] = meter(trace, *((128,) if a.smoke else ()))
        save()
    if a.smoke:
        MP.DTYPE = mx.float32  # CPU gather_mm is fp32-only
    if stalled:
        out["stall_self_test"] = ST.self_test(a.stall_mode)
        print("stall self-test:", out["stall_self_test"], flush=True)
        save()
    if a.models:
        out["points"] = []
        stream = mx.new_stream(mx.default_device())
        for spec in a.models.split(","):
            name, rest = spec.split("@")
            parts = rest.split(":")
            lengths = [int(x) for x in parts[0].split("+")]
            step = int(parts[1]) if len(parts) > 1 else 2048
            reps = int(parts[2]) if len(parts) > 2 else 1
            depth = int(parts[3]) if len(parts) > 3 else 0  # keep the first `depth` layers (real widths)
            layer_ms = float(parts[4]) if len(parts) > 4 else a.stall_layer_ms  # per-spec stall (stalled runs)
            ST.CHUNK_MS[0] = float(parts[5]) if len(parts) > 5 else 0.0  # a long stall at each chunk's start
            if time.time() - T0 > a.deadline:
                print("deadline: skipping", spec, flush=True)
                continue
            cfg = MP.load_config(name)
            if a.smoke:
                cfg = MP.shrink_config(cfg)
            if depth:
                t = cfg.get("text_config", cfg)
                t["num_hidden_layers"] = depth
                for k in ("hybrid_override_pattern", "layer_types"):
                    if k in t and t[k]:
                        t[k] = t[k][:depth]
                name_tag = f"{name}-{depth}L"
            else:
                name_tag = name
            settle()
            model, weights = MP.build_model(cfg)
            settle()
            baseline = int(mx.get_active_memory())
            stall_cfg = None
            if stalled:  # after the baseline; adds no arrays (the norms keep their weights)
                stall_cfg = ST.install(model, layer_ms, a.stall_gdn_every, a.stall_gdn_ms, a.stall_mode)
                stall_cfg["chunk_ms"] = ST.CHUNK_MS[0]
                print("stall:", stall_cfg, flush=True)
            vocab = MP.text_args(cfg).get("vocab_size", 32000)
            toks = mx.random.randint(0, vocab, (max(lengths + [a.warmup]),), key=mx.random.key(1)).astype(mx.int32)
            mx.eval(toks)
            if a.warmup:
                w = traced_prefill(model, toks, a.warmup, step, baseline, stream, trace)
                out.setdefault("warmups", []).append({"model": name, "tokens": a.warmup, "step": step, "chunks": w})
                print(f"warm-up {name} {a.warmup} tokens: " + " ".join(
                    f"{i}:{c.get('n_launch')}/{c.get('most_in_flight_at_launch')}" for i, c in enumerate(w)), flush=True)
            for L in lengths:
                for r in range(reps):
                    if time.time() - T0 > a.deadline:
                        break
                    chunks = traced_prefill(model, toks, L, step, baseline, stream, trace)
                    pk = max(c["peak_over_baseline_mib"] for c in chunks)
                    out["points"].append({"model": name, "layers": depth or None, "tokens": L, "step": step, "repeat": r,
                                          "hooked": trace.hooked() if trace else None, "stall": stall_cfg,
                                          "peak_over_baseline_mib": pk, "chunks": chunks})
                    save()
                    print(f"[{time.time() - T0:6.1f}s] {name_tag} {L} step {step} rep {r}: peak {pk / 1024:.3f} GiB; "
                          + " ".join(f"{i}:{c.get('n_launch')}/{c.get('most_in_flight_at_launch')}/"
                                     f"{c['peak_over_baseline_mib'] / 1024:.2f}" for i, c in enumerate(chunks)),
                          flush=True)
            del model
            if stalled:
                ST.uninstall_gdn()
            settle()
    save()


if __name__ == "__main__":
    main()
