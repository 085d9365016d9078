"""Session 7 (issue 17): which ops of a real mlx-lm layer allocate on CUDA, and why the session-3 donation
probe disagreed with MLX's source.

Source (ml-explore/mlx v0.32.x, mlx/backend/cuda/eval.cpp, device.cpp, worker.cpp, mlx/transforms.cpp):
``gpu::eval`` adds every input of an op (except one it donated) to the command encoder's ``temporaries_`` as
a ``shared_ptr<array::Data>``; they are released by the encoder's worker thread only after the GPU finished
the committed graph. ``array::is_donatable`` needs ``data.use_count() == 1``. ``eval_impl`` evaluates a
``Synchronizer`` whose inputs are the arrays passed to ``mx.eval``, so those arrays are temporaries too: right
after ``mx.eval(r)`` returns (the GPU signalled the event), the worker may not yet have dropped ``r``'s data,
and an op on ``r`` built at once cannot donate it. The session-3 probe (probe_commits.py --donation) built its
operands exactly so (``fresh()``), so its "allocates" results may be that race, not the model's behaviour.

Parts (all in one device call, see run_s7_shard.sh):
* ``--race``: the session-3 cases at Llama tensor-rank widths, each built right after the operand's eval
  ("immediate", as in session 3) and after ``mx.synchronize()`` (the worker has run: "settled"), plus the
  producer and consumer in one graph ("same_graph").
* ``--blocks``: real mlx-lm layers (random weights, real or rank widths), ONE CUDA graph per eval (run with
  MLX_MAX_OPS_PER_BUFFER / MLX_MAX_MB_PER_BUFFER huge: nothing completes, nothing is freed while the graph is
  encoded, so the peak over what was held = the sum of every allocation). Variants differ by one op, so each
  difference is that op's allocation: attention -> + residual add 1 -> + norm2 + MLP -> + add 2; RoPE (and
  Qwen3's q/k norms) replaced by identity.
* ``--prefill``: the Llama-3.1-8B tensor-rank shapes as one process (32 layers, 16 q / 4 kv heads, D 128,
  intermediate 7168) with commit_trace.so: generate_step's prefill at 8k / 32k, step 2048, after a 64-token
  warm-up, idle and with ``gpu_hog.py`` loading the GPU (``--tag``).
"""
from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import sys
import time
from pathlib import Path

import mlx.core as mx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import measure_peaks as MP  # noqa: E402

MiB = 2**20
DT = mx.bfloat16


def settle():
    gc.collect()
    mx.synchronize()
    mx.clear_cache()


def rnd(*shape, scale=1.0, seed=0):
    return (mx.random.normal(shape, key=mx.random.key(seed)) * scale).astype(DT)


def peak_of(outs_fn):
    """Everything evaluated before is settled; the peak over the active memory while ``outs_fn()``'s arrays are
    evaluated in one ``mx.eval``."""
    settle()
    outs = outs_fn()
    mx.synchronize()
    before = int(mx.get_active_memory())
    mx.reset_peak_memory()
    mx.eval(outs)
    peak = max(int(mx.get_peak_memory()), before) - before
    del outs
    settle()
    return peak


# ------------------------------------------------------------------------------------------------
# race: the session-3 single-op cases, immediate vs settled vs same graph


def race(S=2048, h=4096, nq=16, D=128):
    x = rnd(1, S, h)
    W = rnd(h, h, scale=0.01, seed=1)
    Wq = rnd(h, nq * D, scale=0.01, seed=2)
    w, wd = mx.ones((h,), DT), mx.ones((D,), DT)
    mx.eval(x, W, Wq, w, wd)
    res = []

    def one(label, make_operand, op, mode, expect_source):
        settle()
        if mode == "same_graph":
            before = int(mx.get_active_memory())
            mx.reset_peak_memory()
            y = op(make_operand())
            mx.eval(y)
            peak = max(int(mx.get_peak_memory()), before) - before
            operand_bytes = None
        else:
            r = make_operand()
            mx.eval(r)
            if mode == "settled":
                mx.synchronize()
            y = op(r)
            operand_bytes = int(r.nbytes)
            del r
            before = int(mx.get_active_memory())
            mx.reset_peak_memory()
            mx.eval(y)
            peak = max(int(mx.get_peak_memory()), before) - before
        out = {"case": label, "mode": mode, "peak_mib": round(peak / MiB, 3), "output_mib": round(y.nbytes / MiB, 3),
               "operand_mib": None if operand_bytes is None else round(operand_bytes / MiB, 3),
               "source_says": expect_source}
        print(json.dumps(out), flush=True)
        res.append(out)
        del y

    cases = [
        ("residual add x + r, r single-use", lambda: x @ W, lambda r: x + r, "donates r"),
        ("rms_norm, single-use input", lambda: x @ W, lambda r: mx.fast.rms_norm(r, w, 1e-6), "donates"),
        ("rms_norm of a reshaped projection (q_norm)", lambda: (x @ Wq).reshape(1, S, nq, D),
         lambda q: mx.fast.rms_norm(q, wd, 1e-6), "donates"),
        ("rope of a transposed (B,H,L,D) view", lambda: (x @ Wq).reshape(1, S, nq, D),
         lambda q: mx.fast.rope(q.transpose(0, 2, 1, 3), D, traditional=False, base=1e4, scale=1.0, offset=0),
         "donates (ndim 4: layout_ok, is_donatable)"),
    ]
    for label, mk, op, src in cases:
        for mode in ("immediate", "settled", "same_graph"):
            one(label, mk, op, mode, src)
    return res


def workspaces(S=2048, h=4096, nq=16, nkv=4, D=128, I=7168, kL=(2048, 8192, 32768)):
    """cuBLASLt matmuls and cuDNN SDPA may allocate a workspace through MLX's allocator (cublas_utils.cpp /
    cudnn_utils.cpp -> allocate_workspace: ``encoder.add_temporary``, held until the graph completes; up to
    32 MiB per matmul on Hopper). One op on evaluated inputs: peak over inputs minus the output."""
    res = []
    x = rnd(1, S, h)
    mx.eval(x)
    for label, (k_in, n_out) in {"q_proj": (h, nq * D), "k_proj": (h, nkv * D), "o_proj": (nq * D, h),
                                 "gate/up": (h, I), "down": (I, h)}.items():
        W = rnd(n_out, k_in, scale=0.01, seed=7)
        a = x if k_in == h else rnd(1, S, k_in, seed=8)
        mx.eval(W, a)
        for rep in range(2):
            pk = peak_of(lambda: [a @ W.T])
            out = {"case": f"matmul {label} ({S}x{k_in} @ {k_in}x{n_out})", "rep": rep, "peak_mib": round(pk / MiB, 3),
                   "output_mib": round(S * n_out * 2 / MiB, 3)}
            print(json.dumps(out), flush=True)
            res.append(out)
        del W, a
    for L in kL:
        q = rnd(1, nq, S, D, seed=9)
        k, v = rnd(1, nkv, L, D, seed=10), rnd(1, nkv, L, D, seed=11)
        mx.eval(q, k, v)
        pk = peak_of(lambda: [mx.fast.scaled_dot_product_attention(q, k, v, scale=D ** -0.5, mask="causal")])
        out = {"case": f"sdpa causal {nq}/{nkv} D{D} qL {S} kL {L}", "peak_mib": round(pk / MiB, 3),
               "output_mib": round(nq * S * D * 2 / MiB, 3)}
        print(json.dumps(out), flush=True)
        res.append(out)
        del q, k, v
    return res


# ------------------------------------------------------------------------------------------------
# blocks: one graph per eval, variants that differ by one op


def cfg_for(kind):
    if kind == "llama-rank":  # Llama-3.1-8B, one rank of two (tensor): heads and intermediate halved
        c = MP.load_config("llama-3.1-8b")
        c.update(num_attention_heads=16, num_key_value_heads=4, intermediate_size=7168, head_dim=128)
    elif kind == "llama":
        c = MP.load_config("llama-3.1-8b")
    elif kind == "phi3":
        c = MP.load_config("phi-3-mini-4k-instruct")
    elif kind == "qwen3-rank":  # Qwen3-30B-A3B, one rank of two: 16 q / 2 kv heads
        c = MP.load_config("qwen3-30b-a3b")
        c.update(num_attention_heads=16, num_key_value_heads=2, moe_intermediate_size=384)
    else:
        raise SystemExit(kind)
    return c


def make_cache(n_kv, D, offset):
    from mlx_lm.models.cache import KVCache

    c = KVCache()
    if offset:
        k, v = rnd(1, n_kv, offset, D, seed=5), rnd(1, n_kv, offset, D, seed=6)
        c.update_and_fetch(k, v)
        mx.eval(c.keys, c.values)
        del k, v
    return c


class Identity:
    def __call__(self, x, *a, **k):
        return x


def blocks(kinds, S=2048, offsets=(0, 6144), smoke=False):
    from mlx_lm.models.base import create_attention_mask

    res = []
    for kind in kinds:
        cfg = copy.deepcopy(cfg_for(kind))
        if smoke:
            cfg = MP.shrink_config(cfg)
            if kind != "qwen3-rank":
                cfg.pop("head_dim", None)
        cfg["num_hidden_layers"] = 4
        settle()
        model, _ = MP.build_model(cfg)
        layers = model.model.layers if hasattr(model, "model") else model.layers
        n_kv = cfg["num_key_value_heads"]
        D = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
        h = cfg["hidden_size"]
        x = rnd(1, S, h, seed=3)
        mx.eval(x)
        moe = "qwen3" in kind
        for off in offsets:
            def run(label, fn, n_caches=1, patch=None):
                caches = [make_cache(n_kv, D, off) for _ in range(n_caches)]
                saved = []
                if patch:
                    for obj, attr, val in patch:
                        saved.append((obj, attr, getattr(obj, attr)))
                        setattr(obj, attr, val)
                mask = create_attention_mask(x, caches[0])
                try:
                    pk = peak_of(lambda: fn(mask, caches))
                finally:
                    for obj, attr, val in saved:
                        setattr(obj, attr, val)
                out = {"model": kind, "offset": off, "S": S, "variant": label, "peak_mib": round(pk / MiB, 3)}
                print(json.dumps(out), flush=True)
                res.append(out)
                del caches

            L0, L1 = layers[0], layers[1]

            def attn(mask, c):
                return [L0.self_attn(L0.input_layernorm(x), mask, c[0])]

            def add1(mask, c):
                r = L0.self_attn(L0.input_layernorm(x), mask, c[0])
                return [x + r]

            def add1_mlp(mask, c):
                r = L0.self_attn(L0.input_layernorm(x), mask, c[0])
                hh = x + r
                return [hh, L0.mlp(L0.post_attention_layernorm(hh))]

            def block(mask, c):
                return [L0(x, mask, c[0])]

            def block_state(mask, c):  # prefill-style: only the cache state is asked for
                L0(x, mask, c[0])
                return [c[0].state]

            def two_blocks(mask, c):
                return [L1(L0(x, mask, c[0]), mask, c[1])]

            def two_blocks_state(mask, c):
                L1(L0(x, mask, c[0]), mask, c[1])
                return [c[0].state, c[1].state]

            run("attn", attn)
            if moe:
                patch_n = [(L0.self_attn, "q_norm", Identity()), (L0.self_attn, "k_norm", Identity())]
                run("attn, q/k norm identity", attn, patch=patch_n)
            run("attn, rope identity", attn, patch=[(L0.self_attn, "rope", Identity())])
            run("attn + add1", add1)
            if not moe:
                run("attn + add1 + norm2 + mlp", add1_mlp)
                run("block", block)
                run("block, rope identity", block, patch=[(L0.self_attn, "rope", Identity())])
                run("block, cache state only", block_state)
                run("two blocks", two_blocks, 2)
                run("two blocks, cache state only", two_blocks_state, 2)
        del model, layers, x
        settle()
    return res


# ------------------------------------------------------------------------------------------------
# prefill: the rank-shaped Llama as one process, traced


def prefill(lengths, step, warmup, repeats, smoke=False):
    import probe_commits as PC

    trace = PC.Trace(os.environ["COMMIT_TRACE"]) if os.environ.get("COMMIT_TRACE") else None
    cfg = copy.deepcopy(cfg_for("llama-rank"))
    if smoke:
        cfg = MP.shrink_config(cfg)
        cfg.pop("head_dim", None)
    settle()
    model, weights = MP.build_model(cfg)
    settle()
    baseline = int(mx.get_active_memory())
    toks = mx.random.randint(0, cfg["vocab_size"], (max(lengths + [warmup]),), key=mx.random.key(1)).astype(mx.int32)
    mx.eval(toks)
    stream = mx.new_stream(mx.default_device())
    pts = []

    class NoTrace:
        def start(self, m):
            pass

        def read(self):
            return []

        def hooked(self):
            return 0

    tr = trace or NoTrace()
    if warmup:
        PC.traced_prefill(model, toks, warmup, step, baseline, stream, tr)
    for L in lengths:
        for r in range(repeats):
            chunks = PC.traced_prefill(model, toks, L, step, baseline, stream, tr)
            pk = max(c["peak_over_baseline_mib"] for c in chunks)
            pts.append({"model": "llama-3.1-8b-tp2rank", "tokens": L, "step": step, "repeat": r, "hooked": tr.hooked(),
                        "weights": weights, "peak_over_baseline_mib": pk, "chunks": chunks})
            print(f"prefill {L} rep {r}: peak {pk / 1024:.3f} GiB; " + " ".join(
                f"{i}:{c.get('n_launch')}/{c.get('most_in_flight_at_launch')}/{c['peak_over_baseline_mib'] / 1024:.2f}"
                for i, c in enumerate(chunks)), flush=True)
    del model
    settle()
    return pts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--race", action="store_true")
    ap.add_argument("--blocks", default="", help="comma list: llama-rank,llama,phi3,qwen3-rank")
    ap.add_argument("--prefill", default="", help="lengths, e.g. 8192+32768")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=64)
    ap.add_argument("--tag", default="s7")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    a = ap.parse_args()
    out = {"mlx": mx.__version__, "device": str(mx.default_device()),
           "env": {k: v for k, v in os.environ.items() if k.startswith("MLX_")}}
    Path(a.out).mkdir(parents=True, exist_ok=True)
    path = Path(a.out) / f"donation_{a.tag}.json"
    S = 256 if a.smoke else 2048
    if a.race:
        out["race"] = race(*((S, 512, 4, 128) if a.smoke else ()))
        path.write_text(json.dumps(out))
        out["workspaces"] = workspaces(*((S, 512, 4, 2, 32, 256, (256, 512)) if a.smoke else ()))
        path.write_text(json.dumps(out))
    if a.blocks:
        out["blocks"] = blocks(a.blocks.split(","), S=S, offsets=(0, 3 * S), smoke=a.smoke)
        path.write_text(json.dumps(out))
    if a.prefill:
        lengths = [int(x) for x in a.prefill.split("+")]
        out["prefill"] = prefill(lengths, 256 if a.smoke else 2048, a.warmup, a.repeats, smoke=a.smoke)
        path.write_text(json.dumps(out))
    path.write_text(json.dumps(out))


if __name__ == "__main__":
    main()
