"""``omlx-profiles``: entry point. Exit codes: 0 ok, 1 does not fit / invalid profile, 2 usage or input error.

Every expected failure is printed as one ``error: ...`` line (or one line per profile issue); a
traceback only ever appears with ``OMLX_PROFILES_DEBUG=1``.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from .. import __version__
from ..errors import InputError, OmlxProfilesError, ProfileError, UnknownModelError, UnsupportedError

# Each name is a module cmd_<name>.py exposing register(subparsers).
COMMANDS = ("estimate", "fit", "chart", "resolve", "validate", "extract", "calibrate", "coverage", "schema")

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2

EPILOG = """exit codes: 0 ok; 1 does not fit, or a profile is invalid; 2 usage or input error.
examples:
  omlx-profiles estimate meta-llama/Llama-3.1-8B-Instruct --tokens 32k
  omlx-profiles resolve mlx-community/Llama-3.1-8B-Instruct-4bit --json
  omlx-profiles validate profiles/
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own usage errors: exit 2, one line, no traceback
        self.print_usage(sys.stderr)
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="omlx-profiles",
        description="Model memory profiles for MLX inference engines: exact KV bytes, prefill peak, fit.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        importlib.import_module(f".cmd_{name}", __package__).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except ProfileError as e:
        for issue in e.issues:
            print(f"error: {issue}", file=sys.stderr)
        return EXIT_FAIL
    except UnsupportedError as e:
        msg = str(e)
        print(msg if msg.startswith("unsupported") else f"unsupported: {msg}", file=sys.stderr)
        return EXIT_FAIL
    except (InputError, UnknownModelError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except OmlxProfilesError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as e:  # the last line of defence: no traceback for users
        if os.environ.get("OMLX_PROFILES_DEBUG"):
            raise
        print(f"error: internal error ({type(e).__name__}: {e}); rerun with OMLX_PROFILES_DEBUG=1 for details",
              file=sys.stderr)
        return EXIT_USAGE


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
