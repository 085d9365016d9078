"""Which kernels MLX's CUDA backend puts in each committed graph of a prefill chunk (session 8, issue 17).

Why: the replay (``executor.graph_ends``) itemizes 24 kernel nodes per Qwen3-8B layer where the traces
(commits_heldout2.json) count ~27, and the traced graphs hold slightly more layers than the replayed ones at
long context (5 layers per 3 graphs vs 1.56-1.58 per graph at 64k), which is what the idle points that go under
without the residual-add margin need. MLX writes every committed CUDA graph as a DOT file when
MLX_SAVE_CUDA_GRAPHS_DOT_FILE is set (device.cpp, CommandEncoder::commit), so one run shows the kernels per
layer and where each graph ends.

Run (one model per process: the variable is read once): ``MLX_SAVE_CUDA_GRAPHS_DOT_FILE=$OUT/dots/qwen3/g
python3 probe_graph_dots_s8.py --model qwen3-8b --layers 3 --tokens 8192 --step 2048``; the script marks each
chunk by printing the DOT counter range it produced (files g_<n>.dot).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from pathlib import Path

import mlx.core as mx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import measure_peaks as MP  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--step", type=int, default=2048)
    a = ap.parse_args()
    from mlx_lm.models.cache import make_prompt_cache

    cfg = dict(MP.load_config(a.model))
    cfg["num_hidden_layers"] = a.layers
    model, weights = MP.build_model(cfg)
    prefix = os.environ.get("MLX_SAVE_CUDA_GRAPHS_DOT_FILE", "")
    def n_dots():
        return len(glob.glob(prefix + "_*.dot")) if prefix else 0
    toks = mx.random.randint(0, cfg["vocab_size"], (a.tokens,))
    mx.eval(toks)
    stream = mx.new_stream(mx.default_device())
    out = {"model": a.model, "layers": a.layers, "tokens": a.tokens, "step": a.step, "chunks": []}
    with mx.stream(stream):
        # warm-up: 64 tokens (the estimate is for a warm process)
        c0 = make_prompt_cache(model)
        model(toks[None, :64], cache=c0)
        mx.eval([c.state for c in c0])
        del c0
        mx.synchronize()
        cache = make_prompt_cache(model)
        done = 0
        while a.tokens - done > 1:
            n = min(a.step, a.tokens - done - 1)
            first = n_dots()
            model(toks[None, done:done + n], cache=cache)
            mx.eval([c.state for c in cache])
            mx.synchronize()
            out["chunks"].append({"start": done, "end": done + n, "dots": [first + 1, n_dots()]})
            print(json.dumps(out["chunks"][-1]), flush=True)
            done += n
    Path(os.environ.get("OUT", ".")).mkdir(parents=True, exist_ok=True)
    (Path(os.environ.get("OUT", ".")) / f"dots_{a.model}.json").write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
