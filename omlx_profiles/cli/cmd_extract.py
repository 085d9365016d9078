"""``omlx-profiles extract PATH [--write FILE] [--force] [--verify [--strict]]``: a YAML skeleton from a config.

PATH is a config.json or a model directory holding one. Without ``--write`` the skeleton goes to stdout.
``--write`` writes exactly that file (never anywhere else, never through a symlink) and refuses to
replace an existing file unless ``--force``. ``--verify`` builds the mlx-lm model from the config
lazily (nothing allocated: needs the mlx extra) and compares its caches with the extracted profile;
``--strict`` turns a disagreement into exit 1.
"""
from __future__ import annotations

import sys
from pathlib import Path

from ..errors import InputError, OmlxProfilesError
from ..files import shown_path
from .common import add_registry_args, print_json, registry


def register(sub) -> None:
    p = sub.add_parser(
        "extract", help="write a profile YAML skeleton from a config.json or model directory",
        description="Read a config.json the way mlx-lm 0.32 does and print (or --write) a profile file that "
                    "validates, with provenance comments and TODOs for what the config does not say.",
        epilog="examples:\n  omlx-profiles extract path/to/Qwen3-8B/\n"
               "  omlx-profiles extract config.json --write profiles/qwen3-8b.yaml\n"
               "  omlx-profiles extract config.json --verify --strict",
        formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    p.add_argument("path", metavar="PATH", help="config.json, or a model directory holding one")
    p.add_argument("--write", metavar="FILE", help="write the skeleton to FILE (a new .yaml file)")
    p.add_argument("--force", action="store_true", help="with --write: replace FILE if it exists")
    p.add_argument("--name", metavar="NAME", help="variant name (default: from _name_or_path or the directory)")
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), help="activation dtype when the config has none")
    p.add_argument("--json", action="store_true", help="print the extraction (payload, provenance, notes) as JSON")
    p.add_argument("--verify", action="store_true", help="compare with the live mlx-lm model built from the config")
    p.add_argument("--strict", action="store_true", help="with --verify: a disagreement is an error (exit 1)")
    add_registry_args(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..extraction.from_config import extract_path, slug
    from ..extraction.match import match_registry
    from ..extraction.skeleton import render

    if args.force and not args.write:
        raise InputError("--force only applies with --write FILE")
    if args.strict and not args.verify:
        raise InputError("--strict only applies with --verify")
    ex, lc = extract_path(args.path, dtype=args.dtype)
    if args.name:
        ex.name = slug(args.name)
        if ex.name != args.name:
            raise InputError(f"--name {args.name!r} is not a variant name (lowercase letters, digits, '.', '_', '-')")
    if args.dtype:
        ex.dtype_assumed = False
    profile = ex.profile()
    text = render(ex, origin=str(args.path))
    _check_roundtrip(text, ex)

    hints = list(ex.ids)
    if lc.path.name == "config.json" and lc.path.parent.name:
        hints.append(lc.path.parent.name)
    try:
        _, reg_notes = match_registry(profile, registry(args), hints)
    except OmlxProfilesError as e:
        reg_notes = [f"registry not consulted: {e}"]

    dis = None
    if args.verify:
        from ..live.verify import verify_profile

        dis = verify_profile(profile, config=lc.data)

    if args.json:
        print_json({"path": str(lc.path), "variant": ex.name, "family": ex.family, "model_type": ex.model_type,
                    "payload": ex.payload, "provenance": ex.provenance, "notes": ex.notes,
                    "registry": reg_notes, "verified": None if dis is None else not dis,
                    "disagreements": None if dis is None else [d.as_dict() for d in dis]})
    elif args.write:
        dest = _write(args.write, text, force=args.force)  # the text: Path() drops a trailing '/'
        print(f"wrote {shown_path(dest)} (variant {ex.name}, family {ex.family}); review its TODO lines, then run "
              f"`omlx-profiles validate {shown_path(dest)}`")
    else:
        sys.stdout.write(text)
    for n in reg_notes:
        print(f"note: {n}", file=sys.stderr)
    if dis is not None:
        if dis:
            for d in dis:
                print(f"{'error' if args.strict else 'warning'}: {d}", file=sys.stderr)
            if args.strict:
                return 1
        else:
            print("verified: every cache entry of the live mlx-lm model agrees with the profile", file=sys.stderr)
    return 0


def _check_roundtrip(text: str, ex) -> None:
    """The emitted YAML must parse back to exactly the extracted payload (guards the emitter)."""
    from ..schema.family import ProfileFile
    from ..registry.yaml_safe import load_yaml_text

    data = load_yaml_text(text, "<extract>")
    pf = ProfileFile.model_validate(data)
    v = pf.variants[0]
    got = {k: getattr(v, k) for k in v.model_fields_set if k in ex.payload}
    from ..schema.family import CompleteVariant

    want = CompleteVariant.model_validate(ex.payload)
    for k in ex.payload:
        if getattr(want, k) != got.get(k):
            raise OmlxProfilesError(f"internal error: the skeleton's {k!r} does not read back as extracted")


def _write(dest: str, text: str, *, force: bool) -> Path:
    from ..outputs import write_output

    return write_output(dest, text, suffixes=(".yaml", ".yml"), replace=force, what="--write")
