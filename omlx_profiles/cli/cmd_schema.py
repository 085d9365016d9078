"""``omlx-profiles schema [--write [DIR] | --check [DIR]]``: print, write or check the JSON Schemas.

``--check DIR`` is for repositories that vendor the schemas (``schema --write schema/`` once, then
``schema --check schema/`` in CI): it fails when the installed omlx-profiles generates different files,
so a vendored copy never silently validates against last year's rules.
"""
from __future__ import annotations

import sys
from pathlib import Path

from ..files import shown_path
from ..registry.paths import schema_dir
from ..schema.export import (CALIBRATION, KERNELS, MODULE, MODULE_INDEX, NAMING, PROFILE, SCHEMA_VERSION, SHARDING, drifted, render, schemas,
                              version_dir, write_schemas)

_NAMES = {"profile": PROFILE, "kernels": KERNELS, "calibration": CALIBRATION, "sharding": SHARDING, "naming": NAMING,
          "module": MODULE, "module-index": MODULE_INDEX}


def register(sub) -> None:
    p = sub.add_parser("schema", help="print, write or check the JSON Schemas generated from the models",
                       description=f"Print a JSON Schema (schema version {SCHEMA_VERSION}), write them all to "
                                   f"DIR/{version_dir()}/, or check that DIR/{version_dir()}/ matches the models. "
                                   "DIR defaults to the package's own schema/ directory.",
                       epilog="examples:\n  omlx-profiles schema --write\n  omlx-profiles schema --check\n"
                              "  omlx-profiles schema --write vendor/omlx-schema   # vendor them in your repository\n"
                              "  omlx-profiles schema --check vendor/omlx-schema   # in CI: fails when they drift\n"
                              "  omlx-profiles schema --name calibration")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--write", nargs="?", const=True, metavar="DIR", help="write DIR/v<N>/*.schema.json")
    g.add_argument("--check", nargs="?", const=True, metavar="DIR",
                   help="exit 1 if DIR/v<N>/*.schema.json is missing or differs from the models")
    p.add_argument("--name", choices=sorted(_NAMES), default="profile", help="which schema to print (default profile)")
    p.set_defaults(func=run)


def _dir(value, what: str) -> Path:
    """``--write`` / ``--check`` alone: the installed schema/ folder; with DIR: DIR as the user wrote it
    (``~`` expanded: ``Path('~/x')`` made a directory literally named ``~`` in the working directory)."""
    if value is True:
        return schema_dir()
    from ..files import user_path

    return user_path(value, what)


def run(args) -> int:
    if args.write is not None:
        d = _dir(args.write, "--write")
        try:
            written = write_schemas(d)
        except OSError as e:
            print(f"error: cannot write {d}: {e.strerror or e}", file=sys.stderr)
            return 2  # the environment refused (docs/errors.md), as for every other command
        for path in written:
            print(f"wrote {shown_path(path)}")
        return 0
    if args.check is not None:
        d = _dir(args.check, "--check")
        bad = drifted(d)
        for name in bad:
            print(f"error: {d / name} is missing or differs from the models of this omlx-profiles; "
                  f"run `omlx-profiles schema --write {d}`", file=sys.stderr)
        if not bad:
            print(f"ok: {d / version_dir()} matches schema version {SCHEMA_VERSION}")
        return 1 if bad else 0
    print(render(schemas()[_NAMES[args.name]]), end="")
    return 0
