"""``omlx-profiles resolve ID [--json] [--explain] [--verify [--strict]]``: what matched and why.

``--explain`` shows where every field comes from: the YAML ``file:line`` (variant, ``base`` or family
defaults) for a registry profile, the config key (or mlx-lm default) for a config.json.
``--verify`` compares the profile with the live mlx-lm model (needs the mlx extra): built lazily from
``--config``/the model directory when the query is one, else from ``--against CONFIG`` (the real
checkpoint's config.json, which a YAML must match) or ``omlx_profiles.mlxlm.to_config``. ``--strict`` makes
a disagreement exit 1.
"""
from __future__ import annotations

import sys

from ..errors import InputError
from .common import add_model_args, print_json, registry, resolve_model


def register(sub) -> None:
    p = sub.add_parser("resolve", help="show which profile a model id resolves to, and why",
                       description="Resolve a model id (HF id, mlx-community repo, alias, local dir, config.json).",
                       epilog="examples:\n  omlx-profiles resolve mlx-community/Llama-3.1-8B-Instruct-4bit --json\n"
                              "  omlx-profiles resolve qwen3-8b --explain\n"
                              "  omlx-profiles resolve qwen3-8b --verify --against path/to/Qwen3-8B/config.json --strict")
    add_model_args(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--explain", action="store_true", help="show where every field comes from (provenance)")
    p.add_argument("--verify", action="store_true", help="compare the profile with the live mlx-lm model")
    p.add_argument("--against", metavar="CONFIG", help="with --verify: build the live model from this config.json "
                                                          "(or model directory)")
    p.add_argument("--strict", action="store_true", help="with --verify: a disagreement is an error (exit 1)")
    p.set_defaults(func=run)


def run(args) -> int:
    if getattr(args, "strict", False) and not getattr(args, "verify", False):
        raise InputError("--strict only applies with --verify")
    if getattr(args, "against", None) and not getattr(args, "verify", False):
        raise InputError("--against only applies with --verify")
    res = resolve_model(args)
    out = res.as_dict()
    if args.explain:
        from ..registry.provenance import explain

        out["provenance"] = explain(res, registry=registry(args))
    dis = None
    if getattr(args, "verify", False):
        from ..live.verify import verify_profile

        live_cfg = args.against or (res.matched if res.matched_by in ("config", "directory") else None)
        reg = registry(args) if res.matched_by not in ("config", "directory") else None
        dis = verify_profile(res.profile, config=live_cfg, registry=reg)
        out["verified"] = not dis
        out["disagreements"] = [d.as_dict() for d in dis]
    if args.json:
        print_json(out)
    else:
        print(f"{res.query} -> {res.profile.name} (family {res.profile.family})")
        print(f"  matched by {res.matched_by}: {res.matched}")
        if res.quant is not None and (res.quant.parts or res.quant.float_bits):
            print(f"  weights (from the id): {res.quant.label()}")
        elif res.weights_bits:
            print(f"  weights: {res.weights_bits}-bit")
        if res.origin:
            o = res.origin
            how = ("from the cache, no network" if o.get("from_cache")
                   else f"{o.get('requests')} requests, {o.get('bytes_read')} bytes read")
            print(f"  hub: {o['repo']} at {o['revision']} = commit {o['commit']} ({how})")
        print(f"  source: {res.profile.source}")
        for n in res.notes:
            print(f"  note: {n}")
        for field, src in (out.get("provenance") or {}).items():
            print(f"  {field}: {src}")
    if dis is not None:
        for d in dis:
            print(f"{'error' if args.strict else 'warning'}: {d}", file=sys.stderr)
        if not dis:
            print("verified: every cache entry of the live mlx-lm model agrees with the profile", file=sys.stderr)
        if dis and args.strict:
            return 1
    return 0
