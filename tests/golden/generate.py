"""Dump every number the package can print to one JSON document: the golden file of the estimator.

Why: the package is being moved into layers (issue 12) while other work changes it in parallel. A move
must not change one byte of any estimate; this dump, committed as ``tests/golden/estimates.json`` and
compared byte for byte by ``tests/test_golden.py``, is the check. A change that alters numbers *on
purpose* regenerates it in the same commit and says why (see ``tests/golden/README.md``):

    .venv/bin/python tests/golden/generate.py --write

What is dumped (the grid is in ``GRID``; errors are dumped too, as ``"error: Type: message"``):

* per registry variant: the weights term; resident KV (total + bytes per layer) for every N x chunk,
  the direct schedule and kv_bits 4/8; the prefill peak (``Breakdown.as_dict()``) for every backend x N x
  chunk x cached; MLX-version, NAX and dtype variants of one request; ``build_estimate`` (the JSON
  ``estimate`` prints) with a budget; ``fit`` (the longest prompt in a budget) on metal;
* every calibration point's estimate (``profiles/calibration``), as the calibration tests compute it;
* the oMLX facade (``omlx_profiles.compat``): the per-request estimates on a small grid for a few
  variants per backend and for the seed's ``set_model_info`` entry point.

It is a *regression* oracle (today's output), not a truth oracle: the truth tests (live mlx-lm caches,
measured peaks) stay where they are. All imports of the package sit in ``_api()`` so a move of a
module changes one line here, never the output.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "estimates.json"

GRID = {
    "backends": ["metal", "cuda", "cpu"],
    "tokens": [1, 1000, 8192, 32768, 131072],
    "chunks": [512, 2048],
    "cached": [0, 4096],
    "kv_bits": [4, 8],
    "kv_quant_tokens": 8192,
    "versions": {"metal": [None, "0.32.2", "0.32.3", "0.32.4", "0.31.0"], "cuda": ["0.32.4"], "cpu": ["0.32.4"]},
    "one_request": {"tokens": 32768, "chunk": 2048, "cached": 0},
    "budget": 64 * 1024**3,
    "facade_variants": ["llama-3.1-8b-instruct", "gemma-3-27b-it", "deepseek-v3", "qwen3-next-80b-a3b-instruct",
                        "nemotron-h-56b-base-8k", "gpt-oss-20b", "lfm2-1.2b"],
    "facade_tokens": [1, 1000, 8192, 32768],
    "facade_mlx_version": "0.32.4",
}


def _api():
    """Every package name the dump uses, in one place (a module move edits only this function)."""
    import omlx_profiles
    from omlx_profiles import compat
    from omlx_profiles.estimate.fit import FitRequest, compute_fit
    from omlx_profiles.kv.bytes import KVQuant, kv_report
    from omlx_profiles.estimate.calibration import calibration_files, load_calibration, profile_for_point
    from omlx_profiles.peak.prefill import Request, prefill_peak
    from omlx_profiles.estimate.report import EstimateOptions, build_estimate
    from omlx_profiles.estimate.budget import reserve_for
    from omlx_profiles.estimate.weights import estimate_weights

    return argparse.Namespace(
        load_registry=omlx_profiles.load_registry, compat=compat, compute_fit=compute_fit, FitRequest=FitRequest, KVQuant=KVQuant,
        kv_report=kv_report, calibration_files=calibration_files, load_calibration=load_calibration,
        profile_for_point=profile_for_point, Request=Request, prefill_peak=prefill_peak,
        EstimateOptions=EstimateOptions, build_estimate=build_estimate, estimate_weights=estimate_weights,
        reserve_for=reserve_for)


def _clean(v):
    """JSON-able and machine-independent: paths relative to the repository, tuples as lists."""
    if isinstance(v, str):
        return v.replace(str(REPO), "<repo>")
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def _try(fn):
    from omlx_profiles.errors import OmlxProfilesError

    try:
        return _clean(fn())
    except (OmlxProfilesError, ValueError, LookupError) as e:
        return _clean(f"error: {type(e).__name__}: {e}")


def _kv(api, p, n, chunk, **kw):
    r = api.kv_report(p, n, chunk=chunk, **kw)
    return [r.total, [l.nbytes for l in r.layers]]


def _peak(api, p, n, chunk, cached, backend, **kw):
    """The breakdown without its prose (the prose is dumped once per variant, in ``estimate``)."""
    d = api.prefill_peak(p, api.Request(n, cached=cached, chunk=chunk), backend=backend, **kw).as_dict()
    d.pop("explanation")
    return d


def variant(api, reg, name: str) -> dict:
    p = reg.profiles[name]
    res = reg.resolve(name)
    g = GRID
    out: dict = {"weights": _try(lambda: api.estimate_weights(res).as_dict())}
    kv = {}
    for n in g["tokens"]:
        for c in g["chunks"]:
            kv[f"{n}/{c}"] = _try(lambda: _kv(api, p, n, c))
        kv[f"{n}/direct"] = _try(lambda: _kv(api, p, n, 2048, schedule="direct"))
    for b in g["kv_bits"]:
        kv[f"{g['kv_quant_tokens']}/2048/kv{b}"] = _try(lambda: _kv(api, p, g["kv_quant_tokens"], 2048,
                                                                    quant=api.KVQuant(b)))
    out["kv"] = kv
    peak = {}
    for be in g["backends"]:
        for n in g["tokens"]:
            for c in g["chunks"]:
                for cached in g["cached"]:
                    peak[f"{be}/{n}/{c}/{cached}"] = _try(lambda: _peak(api, p, n, c, cached, be))
    one = g["one_request"]
    for be, versions in g["versions"].items():
        for v in versions:
            peak[f"{be}/{one['tokens']}/{one['chunk']}/0/mlx={v}"] = _try(
                lambda: _peak(api, p, one["tokens"], one["chunk"], 0, be, mlx_version=v))
    peak["metal/32768/2048/0/nax"] = _try(lambda: _peak(api, p, 32768, 2048, 0, "metal", nax=True))
    peak["cpu/8192/2048/0/fp32"] = _try(lambda: _peak(api, p, 8192, 2048, 0, "cpu", dtype="fp32"))
    peak["cpu/8192/direct"] = _try(lambda: api.prefill_peak(
        p, api.Request(8192, schedule="direct"), backend="cpu").as_dict())
    out["peak"] = peak
    opts = api.EstimateOptions(tokens=one["tokens"], chunk=one["chunk"], budget=g["budget"])
    out["estimate"] = _try(lambda: api.build_estimate(res, opts))
    out["fit"] = _try(lambda: api.compute_fit(res, api.FitRequest(), g["budget"], api.estimate_weights(res),
                                              api.reserve_for(g["budget"])))
    return out


def calibration(api) -> dict:
    out = {}
    profiles: dict = {}
    for path in api.calibration_files():
        f = api.load_calibration(path)
        for i, pt in enumerate(f.points):
            key = (pt.config_path, pt.profile_id, json.dumps(pt.config, sort_keys=True), pt.dtype)
            if key not in profiles:
                profiles[key] = _try(lambda: api.profile_for_point(pt))
            prof = profiles[key]
            name = f"{path.parent.name}/{path.stem}#{i}:{pt.model}:{pt.chunk}:{pt.tokens}:{pt.cached}"
            if isinstance(prof, str):
                out[name] = prof
                continue
            out[name] = _try(lambda: api.prefill_peak(
                prof, api.Request(pt.tokens, cached=pt.cached, chunk=pt.chunk), backend=f.backend,
                mlx_version=f.mlx or None, dtype=pt.dtype).as_dict())
    return out


def _monitor_grid(api, mon) -> dict:
    g = GRID
    out = {"block_64": _try(lambda: mon.estimate_block_memory(64)),
           "block_64_override": _try(lambda: mon.estimate_block_memory(64, num_layers=2, num_kv_heads=2,
                                                                       head_dim=64, dtype_size=2)),
           "chunk_transient_2048_8192": _try(lambda: mon.estimate_chunk_transient_bytes(2048, 8192)),
           "chunk_transient_512_40000": _try(lambda: mon.estimate_chunk_transient_bytes(512, 40000)),
           "blocks_to_free_1GiB": _try(lambda: mon.estimate_blocks_to_free(1024**3, 64))}
    for n in g["facade_tokens"]:
        out[f"prompt_kv/{n}"] = _try(lambda: mon.estimate_prompt_kv_bytes(n))
        for c in g["chunks"]:
            for cached in g["cached"]:
                out[f"prefill/{n}/{c}/{cached}"] = _try(
                    lambda: mon.estimate_prefill_peak_bytes(n, c, cached_tokens=cached))
    return out


SEEDS = {"seed-dense": dict(num_layers=32, num_kv_heads=8, head_dim=128),
         "seed-full": dict(num_layers=28, num_kv_heads=4, head_dim=128, num_attention_heads=28,
                           num_kv_cache_layers=20, hidden_size=3584, intermediate_size=18944)}


def facade_keys() -> list[str]:
    """The facade section's entries, in ``facade``'s order: one per backend x variant or seed, and two constants."""
    g = GRID
    return [f"{be}/{name}" for be in g["backends"] for name in (*g["facade_variants"], *SEEDS)] + \
        ["unfused_sdpa_call", "mla_kv_per_token"]


def facade_entry(api, reg, key: str):
    """One entry of the facade section: each is independent (its own ``MemoryMonitor``), so the test can compare
    them one by one (pytest-xdist workers share them) and ``facade`` is just all of them."""
    c = api.compat
    g = GRID
    if key == "unfused_sdpa_call":
        return c.estimate_unfused_sdpa_call_bytes(32, 2048, 8192, 128)
    if key == "mla_kv_per_token":
        return c.estimate_mla_kv_bytes_per_token(
            {"kv_lora_rank": 512, "qk_rope_head_dim": 64, "index_head_dim": 128}, [object()] * 3, 2)
    be, name = key.split("/", 1)
    mon = c.MemoryMonitor(1 << 34, backend=be, mlx_version=g["facade_mlx_version"], max_memory=1 << 36)
    if name in SEEDS:
        mon.set_model_info(**SEEDS[name])
        return _monitor_grid(api, mon)
    res = _try(lambda: mon.set_profile(reg.profiles[name]))
    return res if isinstance(res, str) else _monitor_grid(api, mon)


def facade(api, reg) -> dict:
    return {key: facade_entry(api, reg, key) for key in facade_keys()}


def build() -> dict:
    api = _api()
    reg = api.load_registry([], include_env=False)
    return {
        "grid": GRID,
        "variants": {name: variant(api, reg, name) for name in sorted(reg.profiles)},
        "calibration": calibration(api),
        "facade": facade(api, reg),
    }


def dumps(doc: dict, depth: int = 0) -> str:
    """Sorted JSON, one grid entry per line (diffs name the entry that changed; 4 levels are expanded)."""
    if not isinstance(doc, dict) or depth >= 4 or not doc:
        return json.dumps(doc, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    pad = " " * (depth + 1)
    body = ",\n".join(f"{pad}{json.dumps(k)}: {dumps(v, depth + 1)}" for k, v in sorted(doc.items()))
    text = "{\n" + body + "\n" + " " * depth + "}"
    return text + "\n" if depth == 0 else text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"write {GOLDEN.relative_to(REPO)}")
    ap.add_argument("--check", action="store_true", help="exit 1 when the committed file differs")
    a = ap.parse_args(argv)
    text = dumps(build())
    if a.write:
        GOLDEN.write_text(text)
        print(f"wrote {GOLDEN.relative_to(REPO)} ({len(text):,} bytes)")
        return 0
    if a.check:
        same = GOLDEN.is_file() and GOLDEN.read_text() == text
        print("golden: identical" if same else "golden: DIFFERS")
        return 0 if same else 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
