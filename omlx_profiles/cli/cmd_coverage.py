"""``omlx-profiles coverage [--write|--check] [--json]``: every mlx-lm model_type and what the registry does with it."""
from __future__ import annotations

from dataclasses import asdict

from ..files import shown_path
from ..mlxlm.coverage import coverage_rows, render_markdown
from ..registry.paths import builtin_profiles_dir
from ..registry.index import load_registry
from .common import print_json

FILENAME = "COVERAGE.md"


def register(sub) -> None:
    p = sub.add_parser(
        "coverage", help="which mlx-lm model types are profiled and verified",
        description="List every mlx-lm 0.32 model_type as verified (profiled and checked against the live "
                    "model), not yet (with the cache layout it needs) or unsupported (why). Built-in registry only.",
        epilog="examples:\n  omlx-profiles coverage\n  omlx-profiles coverage --write   # profiles/COVERAGE.md\n"
               "  omlx-profiles coverage --check   # exit 1 if profiles/COVERAGE.md is stale",
        formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true", help=f"write profiles/{FILENAME}")
    g.add_argument("--check", action="store_true", help=f"exit 1 if profiles/{FILENAME} differs from a fresh run")
    g.add_argument("--json", action="store_true", help="rows as JSON (model_type, module, status, detail)")
    p.set_defaults(func=run)


def run(args) -> int:
    rows = coverage_rows(load_registry(include_env=False))
    if args.json:
        print_json([asdict(r) for r in rows])
        return 0
    text = render_markdown(rows)
    path = builtin_profiles_dir() / FILENAME
    if args.write:
        from ..outputs import write_output

        write_output(path, text, suffixes=(".md",), replace=True, what="coverage")
        print(f"wrote {shown_path(path)}")
        return 0
    if args.check:
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if current != text:
            print(f"error: {path} is stale; run `omlx-profiles coverage --write`")
            return 1
        return 0
    print(text, end="")
    return 0
