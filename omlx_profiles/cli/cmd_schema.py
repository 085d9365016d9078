"""``omlx-profiles schema [--write]``: print or regenerate the JSON Schema in schema/."""
from __future__ import annotations

from ..registry.paths import schema_dir
from ..schema.export import drifted, render, schemas, write_schemas


def register(sub) -> None:
    p = sub.add_parser("schema", help="print or write the JSON Schema generated from the models",
                       description="Print the JSON Schema of profile files, or --write schema/*.json.",
                       epilog="examples:\n  omlx-profiles schema --write\n  omlx-profiles schema --check")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true", help="write schema/profile.schema.json and schema/kernels.schema.json")
    g.add_argument("--check", action="store_true", help="exit 1 if the committed files drifted from the models")
    p.set_defaults(func=run)


def run(args) -> int:
    d = schema_dir()
    if args.write:
        for path in write_schemas(d):
            print(f"wrote {path}")
        return 0
    if args.check:
        bad = drifted(d)
        for name in bad:
            print(f"error: {d / name} differs from the models; run `omlx-profiles schema --write`")
        return 1 if bad else 0
    print(render(schemas()["profile.schema.json"]), end="")
    return 0
