"""``omlx-profiles validate [PATH...] [--format text|github|json|sarif]``: schema + semantic checks; exit 0
clean, 1 otherwise. The formats (``issue_formats``) carry the same issues to a terminal, a GitHub workflow,
a script or code scanning."""
from __future__ import annotations

import sys
from pathlib import Path

from ..registry.check import validate_paths
from . import issue_formats


def register(sub) -> None:
    p = sub.add_parser("validate", help="check profile files (default: the built-in registry)",
                       description="Validate profile YAML files (family files, kernels/*.yaml, calibration/*/*.yaml): "
                                   "every problem is printed as file:line: field: sentence, or in a format for CI.",
                       epilog="examples:\n  omlx-profiles validate\n  omlx-profiles validate profiles/ my-profiles/qwen.yaml\n"
                              "  omlx-profiles validate --format github my-profiles/     # annotations in a GitHub workflow\n"
                              "  omlx-profiles validate --format sarif my-profiles/ > omlx.sarif   # for code scanning")
    p.add_argument("paths", nargs="*", metavar="PATH", help="files or directories (default: built-in profiles/)")
    p.add_argument("--format", choices=issue_formats.FORMATS, default="text",
                   help="text (default): file:line: field: sentence on stderr; github: workflow annotations; "
                        "json: a list of {file, line, column, field, message, severity}; sarif: SARIF 2.1.0")
    p.add_argument("--with-siblings", action="store_true",
                   help="also load the other family files of each given file's directory, as the registry would "
                        "(the pre-commit hook passes it: it hands over only the staged files)")
    p.set_defaults(func=run)


def run(args) -> int:
    issues, count = validate_paths([Path(p) for p in args.paths] or None, with_siblings=args.with_siblings)
    fmt = args.format
    if fmt == "text":
        for issue in issues:
            print(f"error: {issue}", file=sys.stderr)
    else:
        recs = issue_formats.records(issues)
        if fmt == "github":
            sys.stdout.write(issue_formats.github(recs))
        elif fmt == "json":
            sys.stdout.write(issue_formats.as_json(recs))
        else:
            from .. import __version__

            sys.stdout.write(issue_formats.sarif(recs, __version__))
    if issues:
        print(f"{len(issues)} problem(s) found", file=sys.stderr)
        return 1
    print(f"ok: {count} variant(s) valid", file=sys.stdout if fmt == "text" else sys.stderr)
    return 0
