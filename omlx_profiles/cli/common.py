"""Arguments and steps shared by several commands: which model, which registry, JSON output."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..errors import InputError
from ..registry.index import Registry, Resolution, load_registry
from ..units import parse_size, parse_tokens


def add_registry_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profiles", action="append", default=[], metavar="DIR",
                   help="extra profile directory (repeatable; also OMLX_PROFILES_PATH); its entries override built-in ones")


def add_model_args(p: argparse.ArgumentParser, *, many: bool = False) -> None:
    if many:
        p.add_argument("model", nargs="*", metavar="MODEL", help="HF id, mlx-community repo, alias, or local model dir")
    else:
        p.add_argument("model", nargs="?", metavar="MODEL", help="HF id, mlx-community repo, alias, or local model dir")
    p.add_argument("--config", metavar="PATH", help="a config.json (or a directory holding one) instead of MODEL")
    add_registry_args(p)


def registry(args) -> Registry:
    return load_registry([Path(d) for d in args.profiles])


def resolve_model(args, query: str | None = None) -> Resolution:
    """MODEL from the registry, or --config / a local directory through config.json extraction."""
    query = query if query is not None else args.model
    config = getattr(args, "config", None)
    if config and query:
        raise InputError("give MODEL or --config, not both")
    if config:
        return _from_config(Path(config), args)
    if not query:
        raise InputError("give a MODEL id (or --config PATH)")
    reg = registry(args)
    try:
        return reg.resolve(query)
    except LookupError:
        p = _expand(query)
        if p is not None and _looks_like_path(query) and (p.is_dir() or p.suffix == ".json"):
            return _from_config(p, args, reg)
        raise


def _expand(q: str) -> Path | None:
    try:
        return Path(q).expanduser()
    except (RuntimeError, OSError, ValueError):  # ~nosuchuser, over-long or odd names: not a path
        return None


def _looks_like_path(q: str) -> bool:
    p = _expand(q)
    try:
        return p is not None and (q.startswith((".", "/", "~")) or p.exists())
    except OSError:
        return False


def _from_config(path: Path, args, reg: Registry | None = None) -> Resolution:
    from ..extraction import from_config as extract  # config.json extraction (no mlx)

    return extract.resolve_path(path, registry=reg or registry(args))


def tokens_arg(text: str) -> int:
    """A prompt length: at least one token (mlx-lm cannot run an empty prompt)."""
    try:
        v = parse_tokens(text)
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 token, got {text}")
    return v


def size_arg(text: str) -> int:
    try:
        return parse_size(text)
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def positive_int_arg(text: str) -> int:
    try:
        v = parse_tokens(text, "value")
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return v


def print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")
