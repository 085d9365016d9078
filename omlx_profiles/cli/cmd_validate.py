"""``omlx-profiles validate [PATH...]``: schema + semantic checks; exit 0 clean, 1 otherwise."""
from __future__ import annotations

import sys
from pathlib import Path

from ..registry.check import validate_paths


def register(sub) -> None:
    p = sub.add_parser("validate", help="check profile files (default: the built-in registry)",
                       description="Validate profile YAML files: every problem is printed as file:line: field: sentence.",
                       epilog="examples:\n  omlx-profiles validate\n  omlx-profiles validate profiles/ my-profiles/qwen.yaml")
    p.add_argument("paths", nargs="*", metavar="PATH", help="files or directories (default: built-in profiles/)")
    p.set_defaults(func=run)


def run(args) -> int:
    issues, count = validate_paths([Path(p) for p in args.paths] or None)
    for issue in issues:
        print(f"error: {issue}", file=sys.stderr)
    if issues:
        print(f"{len(issues)} problem(s) found", file=sys.stderr)
        return 1
    print(f"ok: {count} variant(s) valid")
    return 0
