"""What the op-at-a-time probes (``probe_mla.py``, ``probe_dsa.py``) share: the command line, the sweep over
key lengths under a deadline, one measured row per case, one attention module with a pre-filled cache, and
the JSON file. Each probe keeps only its ops and how it fills its cache.

Why a module: the two probes were the same script around different expressions; a fix to the measuring
(a repeat, the deadline, what a row reports) must reach both.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Callable, Iterable

import mlx.core as mx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import measure_peaks as MP  # noqa: E402


def parse_args(doc: str, *, deadline: float, module: str, module_help: str | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tag", default="run")
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--smoke", action="store_true", help="tiny shapes (CPU check of the script)")
    ap.add_argument("--deadline", type=float, default=deadline)
    ap.add_argument("--module", default=module, help=module_help)
    return ap.parse_args()


def run(a: argparse.Namespace, prefix: str, smoke: Callable[[], dict], full: Callable[[float], dict]) -> None:
    """``smoke()`` or ``full(t0)`` gives the result sections; written to ``<out>/<prefix>_<tag>.json``."""
    t0 = time.time()
    res = {"mlx": mx.__version__, "device": str(mx.default_device())}
    res.update(smoke() if a.smoke else full(t0))
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / f"{prefix}_{a.tag}.json").write_text(json.dumps(res))


def random_of(seed: int, dt) -> Callable[..., mx.array]:
    """``rnd(*shape)``: normal values of dtype ``dt`` from one fixed key (every case sees the same inputs)."""
    key = mx.random.key(seed)
    return lambda *shape: mx.random.normal(shape, key=key).astype(dt)


def within(kLs: Iterable[int], deadline: float, t0: float):
    """The key lengths, stopping once ``deadline`` seconds have passed since ``t0``."""
    for kL in kLs:
        if time.time() - t0 > deadline:
            return
        yield kL


def measured(fn: Callable, repeats: int, row: dict, per: int, ratio_key: str, with_result: bool = False) -> dict:
    """``row`` + the largest transient over ``repeats`` runs of ``fn``, that over ``per`` bytes (or elements)
    as ``ratio_key``, the result's bytes if asked, the wall times; printed as it comes."""
    r = MP.measure(fn, repeats)
    tr = max(x["transient"] for x in r)
    row = {**row, "transient": tr, ratio_key: round(tr / per, 3)}
    if with_result:
        row["result_bytes"] = r[0]["result_bytes"]
    row["ms"] = [x["ms"] for x in r]
    print(json.dumps(row), flush=True)
    return row


def module_sweep(name: str, kLs, L: int, fill: Callable, keys: tuple[str, str], *, repeats=2, deadline=1e12,
                 t0=0.0, smoke=False) -> list[dict]:
    """``layers[0].self_attn`` of config ``name`` (one layer), one prefill call of ``L`` tokens per key length
    ``kL`` on a cache already holding ``kL - L`` rows. ``fill(model, cfg, kL, L)`` -> (the cache the mask is made for,
    ``step(attn, x, mask)``: one call from the pre-filled state, so every repeat sees the same kL; what it
    returns is evaluated). ``keys``: the row's names for the (heads x L x kL) bf16 score bytes and the ratio."""
    from mlx_lm.models.base import create_attention_mask

    cfg = MP.load_config(name)
    cfg = MP.shrink_config(cfg) if smoke else dict(cfg)
    cfg["num_hidden_layers"] = 1
    model, _ = MP.build_model(cfg)
    attn = model.layers[0].self_attn
    out = []
    for kL in within(kLs, deadline, t0):
        cache, step = fill(model, cfg, kL, L)
        x = mx.random.normal((1, L, cfg["hidden_size"])).astype(MP.DTYPE)
        mx.eval(x)
        mask = create_attention_mask(x, cache, return_array=True)
        mx.eval(mask)

        def fn():
            return step(attn, x, mask)

        sc = cfg["num_attention_heads"] * L * kL * 2
        out.append(measured(fn, repeats, {"case": f"{name} layers[0].self_attn", "L": L, "kL": kL, keys[0]: sc},
                            sc, keys[1]))
        del cache, step, x, mask
        MP.settle()
    del model, attn
    MP.settle()
    return out
