"""Exact parameter counts of what mlx-lm builds for a config (shapes only: nothing is evaluated).

For each config.json: build mlx-lm's Model lazily (parameters are unevaluated mx.random/zeros nodes,
so a 671B model costs no memory), count every parameter (= every tensor load_weights(strict=True)
requires of an unquantized checkpoint), the embedding + untied lm_head part, and the bytes that
mlx_lm.convert's default 4-bit quantization (group 64, with the model's own quant_predicate) would store.
"""
import json, sys
from pathlib import Path
import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten
sys.path.insert(0, "/work/main")
from omlx_profiles.live._resolve import get_classes

def count(cfg_path):
    config = json.loads(Path(cfg_path).read_text())
    Model, Args, mod = get_classes(config)
    args = Args.from_dict(config)
    model = Model(args)
    params = dict(tree_flatten(model.parameters()))
    total = sum(v.size for v in params.values())
    emb = sum(v.size for k, v in params.items() if "embed_tokens" in k or k.endswith("lm_head.weight") or "wte" in k or k.endswith("embedding.weight"))
    dtypes = {}
    for v in params.values():
        dtypes[str(v.dtype)] = dtypes.get(str(v.dtype), 0) + v.size
    return mod, total, emb, dtypes

if __name__ == "__main__":
    out = {}
    for p in sys.argv[1:]:
        try:
            mod, total, emb, dt = count(p)
            out[Path(p).stem] = {"module": mod, "params": total, "embedding_params": emb, "init_dtypes": dt}
            print(f"{Path(p).stem:40s} {mod:14s} {total:>16,} emb {emb:>14,} {dt}", flush=True)
        except Exception as e:
            print(f"{Path(p).stem:40s} ERROR {type(e).__name__}: {e}", flush=True)
    json.dump(out, open("/tmp/param_counts.json", "w"), indent=1)
