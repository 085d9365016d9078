"""``omlx-profiles verify-module MODULE [...]``: the live check of mlx-lm module recipes.

Builds each module's tiny model with mlx-lm itself (random weights, this machine's MLX) from
``profiles/mlx_lm/<module>.yaml`` and compares every layer's resident cache bytes with the estimate
(``live.recipe_check``). mlx / mlx-lm are imported inside ``run()`` only (the ``mlx`` extra).
"""
from __future__ import annotations

import argparse

from ..errors import InputError, UnsupportedError
from ..mlxlm.recipes import recipes
from .common import print_json


def register(sub) -> None:
    p = sub.add_parser(
        "verify-module", help="check mlx-lm module recipes against the live mlx-lm model (needs mlx)",
        description="Build each module's tiny mlx-lm model from profiles/mlx_lm/<module>.yaml (random weights) and "
                    "compare every layer's resident cache bytes with the estimate at N = 1, 255, 256, 257 and 3000, "
                    "generate_step (prefill step 256) and one direct call, plus kv_bits 4 / 8.",
        epilog="examples:\n  omlx-profiles verify-module olmo3\n  omlx-profiles verify-module --all --json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("modules", nargs="*", metavar="MODULE", help="mlx-lm module names (profiles/mlx_lm/<MODULE>.yaml)")
    p.add_argument("--all", action="store_true", help="every recipe")
    p.add_argument("--quick", action="store_true", help="skip N=3000")
    p.add_argument("--json", action="store_true", help="results as JSON")
    p.add_argument("--record", action="store_true",
                   help="record the outcome in profiles/mlx_lm/LIVE_RESULTS.json (what coverage calls verified): "
                        "passed modules are added, failed ones removed")
    p.set_defaults(func=run)


def run(args) -> int:
    known = recipes()
    names = sorted(known) if args.all else list(args.modules)
    if not names:
        raise InputError("name at least one MODULE (or --all)")
    unknown = [m for m in names if m not in known]
    if unknown:
        raise InputError(f"no module recipe for {', '.join(map(repr, unknown))} (profiles/mlx_lm/<module>.yaml); "
                         f"recipes: {', '.join(sorted(known))}")
    try:
        from ..live.recipe_check import check_module
    except ImportError as e:
        # a missing optional package is the install, not the input: "unsupported", exit 1, as every command
        raise UnsupportedError(f"verify-module needs mlx and mlx-lm installed (pip install 'omlx-profiles[mlx]'): {e}") from None
    results = {}
    for m in names:
        res = check_module(m, long=False if args.quick else None)
        results[m] = res.as_dict()
        if not args.json:
            state = "ok" if res.passed else "FAILED"
            print(f"{m}: {state} ({res.runs} runs, {res.layers} layer comparisons, kv_bits {res.quantized}, "
                  f"{res.seconds:.1f}s)")
            for p in res.problems[:10]:
                print(f"  {p}")
    if args.record:
        _record(results)
    if args.json:
        print_json(results)
    return 0 if all(r["passed"] for r in results.values()) else 1


def _record(results: dict) -> None:
    import json

    from ..mlxlm.recipes import recipes_dir
    from ..outputs import write_output

    path = recipes_dir() / "LIVE_RESULTS.json"
    data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"mlx_lm": "0.32.2", "verified": []}
    done = set(data.get("verified", []))
    done |= {m for m, r in results.items() if r["passed"]}
    done -= {m for m, r in results.items() if not r["passed"]}
    data["verified"] = sorted(done)
    write_output(path, json.dumps(data, indent=1) + "\n", suffixes=(".json",), replace=True, what="live results")
    print(f"recorded {path}")
