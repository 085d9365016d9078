#!/usr/bin/env python3
"""One rank of a tensor-sharded mlx-lm model at real dims on CUDA (issue 17, two H200s over NCCL).

Launched once per GPU by MLX's own launcher, which sets ``CUDA_VISIBLE_DEVICES``, ``MLX_RANK``,
``MLX_WORLD_SIZE``, ``NCCL_HOST_IP`` / ``NCCL_PORT``::

    python3 -c 'from mlx._distributed_utils.launch import main; main()' --backend nccl -n 2 -- \\
        python3 benchmarks/cuda/measure_sharded.py --models llama-3.1-8b@8192+32768 --out $OUT

Why a script of its own next to ``measure_peaks.py`` (whose prefill replay it reuses): the rank must
shard the model *before* its parameters are evaluated, as ``mlx_lm.utils.sharded_load`` does, so that
only its share is ever materialized; and every rank must run the same models and lengths in the same
order, because every ``all_sum`` in the sharded projections must be matched by the other rank.

Per model: ``_get_classes`` + ``from_dict`` (random weights, real dims, real layer counts),
``set_dtype(bfloat16)``, ``model.shard(group)``, parameters evaluated in batches, ``gc`` +
``mx.clear_cache()``; the active memory then is the rank's **baseline** (its weights + the token array).
Then ``measure_peaks.prefill_point`` replays ``generate_step``'s prefill on a fresh stream (chunks of
``--step``, ``mx.eval([c.state for c in cache])``, ``mx.clear_cache()``; the last token alone) and records
per chunk the peak (``mx.get_peak_memory()`` after ``mx.reset_peak_memory()``) and, at the end, the
resident KV (``sum(c.nbytes for c in cache)``). ``--repeats`` repeats per length, in succession.

Writes ``<out>/sharded_rank<r>.json`` after every point (a killed run still returns data).
Self-contained apart from ``measure_peaks.py`` beside it: MLX + mlx-lm only.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import mlx.core as mx
from mlx.utils import tree_flatten

sys.path.insert(0, str(Path(__file__).resolve().parent))
import measure_peaks as mp  # noqa: E402  (the prefill replay and config table of the single-GPU runs)


def build_sharded(cfg: dict, group) -> tuple:
    """The model with random bf16 weights, sharded over ``group`` before anything is evaluated."""
    from mlx_lm.utils import _get_classes

    model_class, args_class = _get_classes(config=cfg)
    model = model_class(args_class.from_dict(cfg))
    model.set_dtype(mp.DTYPE)
    model.eval()
    model.shard(group)
    flat = tree_flatten(model.parameters())
    batch, size = [], 0
    for _, p in flat:
        batch.append(p)
        size += p.size
        if size > 2**28:
            mx.eval(batch)
            batch, size = [], 0
    mx.eval(batch)
    flat = tree_flatten(model.parameters())
    return model, int(sum(p.nbytes for _, p in flat))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", required=True, help="name@L1+L2,... (names from measure_peaks.MODELS)")
    ap.add_argument("--step", type=int, default=2048)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--backend", default="nccl", help="mx.distributed backend (ring for a CPU smoke run)")
    ap.add_argument("--smoke", action="store_true", help="tiny shrunk configs on the CPU (ring backend)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--warmup", type=int, default=0, help="tokens of one prefill right after each model is built")
    args = ap.parse_args(argv)
    # COMMIT_TRACE (the LD_PRELOAD'ed commit_trace.so, see probe_commits.py): every CUDA graph launch and
    # completion per chunk, so a rank's graphs in flight can be compared with one process's (session 5)
    trace = None
    if os.environ.get("COMMIT_TRACE"):
        import probe_commits as pc

        trace = pc.Trace(os.environ["COMMIT_TRACE"])

    if args.smoke:
        mx.set_default_device(mx.cpu)
        mp.DTYPE = mx.float32  # CPU gather_mm is fp32-only (as in measure_peaks --smoke)
    group = mx.distributed.init(backend=args.backend, strict=True)
    rank, size = group.rank(), group.size()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    outfile = out / f"sharded_rank{rank}.json"
    info = {}
    try:
        info = dict(mx.device_info())
    except Exception as e:  # noqa: BLE001 (older MLX: informational only)
        info = {"error": repr(e)}
    import mlx_lm

    res = {"meta": {"rank": rank, "size": size, "backend": args.backend, "mlx": mx.__version__,
                    "mlx_lm": mlx_lm.__version__, "device": str(mx.default_device()),
                    "device_info": {k: (v if isinstance(v, (int, float, str)) else str(v)) for k, v in info.items()},
                    "step": args.step, "repeats": args.repeats, "parallel": "tensor"},
           "models": {}}

    def save():
        tmp = outfile.with_suffix(".tmp")
        tmp.write_text(json.dumps(res, indent=1))
        tmp.replace(outfile)

    def log(*a):
        print(f"[rank {rank} {time.time() - mp.T0:7.1f}s]", *a, flush=True)

    stream = mx.new_stream(mx.default_device())
    for spec in args.models.split(","):
        name, _, ls = spec.partition("@")
        lengths = [int(x) for x in ls.split("+")] if ls else [8192, 32768]
        cfg = mp.load_config(name)
        if args.smoke:
            cfg = mp.shrink_config(cfg)
        t = mp.text_args(cfg)
        mp.settle()
        pre = mp.active()
        tb = time.time()
        model, wbytes = build_sharded(cfg, group)
        mx.random.seed(0)  # the same prompt on every rank
        tokens_all = mx.random.randint(0, t.get("vocab_size", 1000) or 1000, (max(lengths),)).astype(mx.int32)
        mx.eval(tokens_all)
        mp.settle()
        baseline = mp.active()
        rec = {"config_file": mp.MODELS[name], "model_type": t.get("model_type"), "weights_bytes": wbytes,
               "active_before_build": pre, "baseline": baseline, "build_s": round(time.time() - tb, 2),
               "points": []}
        res["models"][name] = rec
        log(f"== {name}: rank weights {mp.GiB(wbytes):.2f} GiB, baseline {mp.GiB(baseline):.2f} GiB, "
            f"build {rec['build_s']} s")
        save()
        if args.warmup:
            mp.prefill_point(model, tokens_all, args.warmup, args.step, baseline, stream)
            mp.settle()
        for L in lengths:
            for rep in range(args.repeats):
                if trace is not None:
                    chunks = pc.traced_prefill(model, tokens_all, L, args.step, baseline, stream, trace)
                    rec.setdefault("traced", []).append({"tokens": L, "repeat": rep, "chunks": chunks})
                    log(f"   {L:6d} rep {rep} traced: peak/base {max(c['peak_over_baseline_mib'] for c in chunks) / 1024:.3f}"
                        " GiB; " + " ".join(f"{i}:{c['n_launch']}/{c['most_in_flight_at_launch']}"
                                             for i, c in enumerate(chunks)))
                    save()
                    continue
                p = mp.prefill_point(model, tokens_all, L, args.step, baseline, stream)
                p["repeat"] = rep
                rec["points"].append(p)
                log(f"   {L:6d} rep {rep}: peak/base {mp.GiB(p['peak_over_baseline']):.3f} GiB, "
                    f"KV {p['cache_nbytes']:,} B, held after {mp.GiB(p['held_after_over_baseline']):.3f} GiB, "
                    f"{p['wall_s']} s")
                save()
        del model, tokens_all
        mp.settle()
    # a last collective so neither rank exits while the other still needs it
    mx.eval(mx.distributed.all_sum(mx.array([1.0]), group=group))
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
