"""Draft profiles/mlx_lm/<module>.yaml for a plain ``KVCache x layers`` module from its installed ModelArgs.

    python tools/draft_recipe.py MODULE [MODULE ...]   # writes a draft; never overwrites an existing file

A draft is a claim, not knowledge: the args block comes from the dataclass (required fields, JSON-able
defaults), the head-dim rule from a look at the source, the live tiny config from the field types.
Run ``omlx-profiles verify-module MODULE`` and fix the file until it passes; only then is it verified.
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
TINY = {"hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size", "vocab_size",
        "max_position_embeddings", "rms_norm_eps", "rope_theta", "tie_word_embeddings", "num_hidden_layers",
        "model_type"}


def _jsonable(v):
    try:
        json.dumps(v)
        return True
    except TypeError:
        return False


def draft(module: str) -> dict:
    mod = importlib.import_module(f"mlx_lm.models.{module}")
    src = inspect.getsource(mod)
    args = mod.ModelArgs
    required, defaults, live = [], {}, {}
    for f in dataclasses.fields(args):
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.append(f.name)
            if f.name not in TINY:
                t = str(f.type)
                live[f.name] = (False if "bool" in t else 1.0e-5 if "float" in t else None if "Optional" in t
                                or "Dict" in t or "dict" in t else (32 if "head_dim" in f.name else 2) if "int" in t else None)
        elif f.default is not dataclasses.MISSING and _jsonable(f.default):
            defaults[f.name] = f.default
    if "args.head_dim or" in src or "head_dim or " in src:
        hd = "optional"
    elif "hidden_size // " in src and "head_dim" not in [f.name for f in dataclasses.fields(args)]:
        hd = "derived"
    elif "= args.head_dim" in src:
        hd = "explicit"
    else:
        hd = "derived"
    rec = {"module": module, "mlx_lm": "0.32.2",
           "args": {"class": f"{module}.ModelArgs", "required": required, "defaults": defaults, "head_dim": hd,
                    "kv_from_heads": "num_key_value_heads is None" in src},
           "layout": {"uniform": "full"}, "kinds": {"full": {"cache": "full"}},
           "live": {"config": live}}
    return rec


def main(argv: list[str]) -> int:
    for m in argv:
        out = ROOT / "profiles" / "mlx_lm" / f"{m}.yaml"
        if out.exists():
            print(f"exists: {out}")
            continue
        out.write_text(yaml.safe_dump(draft(m), sort_keys=False, width=110), encoding="utf-8")
        print(f"drafted: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
