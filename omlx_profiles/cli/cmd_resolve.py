"""``omlx-profiles resolve ID [--json] [--explain]``: what matched and why."""
from __future__ import annotations

from .common import add_model_args, print_json, resolve_model


def register(sub) -> None:
    p = sub.add_parser("resolve", help="show which profile a model id resolves to, and why",
                       description="Resolve a model id (HF id, mlx-community repo, alias, local dir, config.json).",
                       epilog="examples:\n  omlx-profiles resolve mlx-community/Llama-3.1-8B-Instruct-4bit --json\n"
                              "  omlx-profiles resolve qwen3-8b --explain")
    add_model_args(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--explain", action="store_true", help="show where every field comes from (provenance)")
    p.set_defaults(func=run)


def run(args) -> int:
    res = resolve_model(args)
    out = res.as_dict()
    if args.explain:
        from ..provenance import explain

        out["provenance"] = explain(res, args)
    if args.json:
        print_json(out)
        return 0
    print(f"{res.query} -> {res.profile.name} (family {res.profile.family})")
    print(f"  matched by {res.matched_by}: {res.matched}")
    if res.weights_bits:
        print(f"  weights: {res.weights_bits}-bit")
    print(f"  source: {res.profile.source}")
    for n in res.notes:
        print(f"  note: {n}")
    for field, src in (out.get("provenance") or {}).items():
        print(f"  {field}: {src}")
    return 0
