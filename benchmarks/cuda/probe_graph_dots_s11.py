"""Where MLX's CUDA backend ends each graph of gpt-oss-20b's prefill calls around S-1 (session 11, issue 14 item 1).

Why: the replay (``executor.graph_ends``) commits 30 graphs for a 2048-token prompt's one 2,047-token call and 36
for a 2049-token prompt's 2,048-token call; MLX committed 36 at both (traced, session 9/10). Our graph 4 ends on
layer 1's MoE sort by crossing the 1001 Mi-element rule by 0.017% at 2,048 tokens and misses it at 2,047, so every
later boundary shifts and each 11-graph window spans more layers (9.234 GiB estimated against 7.32 measured). MLX
writes every committed CUDA graph as a DOT file when MLX_SAVE_CUDA_GRAPHS_DOT_FILE is set (device.cpp,
CommandEncoder::commit; one counter per process), so the kernels of each graph show where MLX really ends it.

Unlike probe_graph_dots_s8.py this runs several prompts in one process (a fresh cache each, after a 64-token
warm-up that removes the first call's excess) and records, per chunk, the DOT counter range and the peak over the
memory active before the prompt (informational only: writing a DOT file per commit slows the host).

Run: ``MLX_SAVE_CUDA_GRAPHS_DOT_FILE=$OUT/dots/oss/g python3 probe_graph_dots_s11.py --model gpt-oss-20b
--prompts 2048:2048,2049:2048,2048:2048,2049:2048,8192:2048``.
"""
from __future__ import annotations

import argparse
import gc
import glob
import json
import os
import sys
import time
from pathlib import Path

import mlx.core as mx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import measure_peaks as MP  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--layers", type=int, default=0, help="0: the config's own layer count")
    ap.add_argument("--prompts", required=True, help="tokens:step,tokens:step,...")
    ap.add_argument("--smoke", action="store_true", help="shrunk config, fp32 (CPU check of the script)")
    a = ap.parse_args()
    from mlx_lm.models.cache import make_prompt_cache

    cfg = dict(MP.load_config(a.model))
    if a.smoke:
        cfg = MP.shrink_config(cfg)
        MP.DTYPE = mx.float32
    if a.layers:
        cfg["num_hidden_layers"] = a.layers
        if isinstance(cfg.get("layer_types"), list):
            cfg["layer_types"] = cfg["layer_types"][:a.layers]
    model, weights = MP.build_model(cfg)
    prefix = os.environ.get("MLX_SAVE_CUDA_GRAPHS_DOT_FILE", "")

    def n_dots():
        return len(glob.glob(prefix + "_*.dot")) if prefix else 0

    prompts = [tuple(int(x) for x in p.split(":")) for p in a.prompts.split(",")]
    vocab = cfg.get("vocab_size") or cfg.get("text_config", {}).get("vocab_size") or 32000
    toks = mx.random.randint(0, vocab, (max(t for t, _ in prompts),))
    mx.eval(toks)
    stream = mx.new_stream(mx.default_device())
    out = {"model": a.model, "layers": cfg.get("text_config", cfg).get("num_hidden_layers"), "weights": weights, "prompts": []}
    od = Path(os.environ.get("OUT", "."))
    od.mkdir(parents=True, exist_ok=True)
    with mx.stream(stream):
        c0 = make_prompt_cache(model)
        model(toks[None, :64], cache=c0)
        mx.eval([c.state for c in c0])
        del c0
        mx.synchronize()
        out["warmup_dots"] = n_dots()
        for tokens, step in prompts:
            gc.collect()
            mx.clear_cache()
            cache = make_prompt_cache(model)
            base = mx.get_active_memory()
            rec = {"tokens": tokens, "step": step, "base_active": base, "chunks": []}
            done = 0
            while tokens - done > 1:
                n = min(step, tokens - done - 1)
                first = n_dots()
                mx.reset_peak_memory()
                t0 = time.time()
                model(toks[None, done:done + n], cache=cache)
                mx.eval([c.state for c in cache])
                mx.synchronize()
                rec["chunks"].append({"start": done, "end": done + n, "dots": [first + 1, n_dots()],
                                      "peak_over_base": mx.get_peak_memory() - base, "s": time.time() - t0})
                print(json.dumps({"tokens": tokens, **rec["chunks"][-1]}), flush=True)
                mx.clear_cache()
                done += n
            out["prompts"].append(rec)
            del cache
            (od / f"dots_s11_{a.model}.json").write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
