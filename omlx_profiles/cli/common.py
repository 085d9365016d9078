"""Arguments and steps shared by several commands: which model, which registry, JSON output."""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from ..errors import InputError, NotMLXCheckpointError
from ..files import user_path
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
    g = p.add_argument_group("Hugging Face Hub (the hub extra; ids the registry does not know are read from the Hub)")
    g.add_argument("--hub", action="store_true",
                   help="read MODEL from the Hub even if the registry knows it (config.json + safetensors headers)")
    g.add_argument("--revision", metavar="REV", help="Hub branch, tag or commit (implies --hub)")
    g.add_argument("--hub-refresh", action="store_true",
                   help="ask the Hub again instead of answering a branch from the cache")
    add_registry_args(p)


def registry(args) -> Registry:
    """The registry of this command's ``--profiles``, built once per command: ``resolve --explain --verify``
    asks for it three times (resolving, provenance, verification) and each build parses every file."""
    reg = getattr(args, "_registry", None)
    if reg is None:
        reg = load_registry([Path(d) for d in args.profiles])
        args._registry = reg
    return reg


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
    hub = bool(getattr(args, "hub", False) or getattr(args, "revision", None) or getattr(args, "hub_refresh", False))
    if hub:
        return _from_hub(query, args, reg)
    local = _local_model(query)
    if local is not None:
        # files on disk win over a registry id the directory happens to be named like: its config.json is
        # the checkpoint in question (match_registry's notes list every field where the two disagree)
        res = _from_config(local, args, reg)
        try:
            same = reg.resolve(query)
        except (LookupError, InputError):  # a directory name no id could have (control characters): no twin
            return res
        note = (f"{query!r} is a local {'directory' if local.is_dir() else 'file'}: its config.json is used, not "
                f"the registry profile {same.profile.name!r} that the name also matches")
        return dataclasses.replace(res, notes=(note, *res.notes))
    try:
        res = reg.resolve(query)
    except LookupError as e:
        if isinstance(e, NotMLXCheckpointError) or not _hub_candidate(query):
            raise
        return _hub_fallback(query, args, reg, e)
    if res.matched_by in ("quantized-repo", "repo-name", "base-architecture"):
        from ..hub import prefer_cached

        return prefer_cached(res, reg)
    return res


def _hub_candidate(query: str) -> bool:
    from ..hub import looks_like_repo

    return looks_like_repo(query) and not query.startswith((".", "/", "~"))


def _from_hub(query: str, args, reg: Registry) -> Resolution:
    from ..hub import resolve_hub

    return resolve_hub(query, getattr(args, "revision", None), registry=reg,
                       refresh=bool(getattr(args, "hub_refresh", False)))


def _hub_fallback(query: str, args, reg: Registry, unknown: LookupError) -> Resolution:
    from ..hub import fallback

    return fallback(query, reg, unknown, refresh=bool(getattr(args, "hub_refresh", False)))


def _local_model(query: str) -> Path | None:
    """``query`` as a local model: an existing directory holding a config.json (a FIFO or other
    non-regular config.json is reported by the extractor) or a ``.json`` file; else ``None``."""
    p = _expand(query)
    try:
        if p is None or not p.exists():
            return None
        if p.is_dir():
            return p if (p / "config.json").exists() or (p / "config.json").is_symlink() or _looks_like_path(query) \
                else None
        return p if p.suffix == ".json" else None
    except (OSError, ValueError):
        return None


def _expand(q: str) -> Path | None:
    try:
        return user_path(q)
    except InputError:  # a NUL: not a path
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


def count_arg(text: str) -> int:
    """A token count where 0 means "none": ``--cached`` (no prefix: ``Request(cached=0)``, the facade's
    ``cached_tokens=0``) and ``--kv-start`` (quantize from the first call: ``KVQuant(start=0)``, mlx-lm's
    ``--quantized-kv-start 0``), 0 .. 2^30 as in the Python API, so a script can pass ``--cached $N`` for any N
    the API takes. Both shared the prompt-length rule (at least 1) and refused 0: one contract for the same
    number, in docs/errors.md."""
    try:
        return parse_tokens(text)
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


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


WEIGHT_BITS = (2, 3, 4, 5, 6, 8, 16)


def add_weights_args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--weights-bits", type=int, choices=WEIGHT_BITS, metavar="BITS",
                   help="weights quantized to BITS (2-8; 16 = bf16) instead of what the model id / checkpoint says")
    g.add_argument("--weights", type=size_arg, metavar="SIZE", dest="weights_size",
                   help="the weights' size as you know it (e.g. 4.5GB), when the profile has no parameter count")
    p.add_argument("--reserve", type=size_arg, metavar="SIZE",
                   help="memory kept free inside the budget (default 512MiB + 5%% of the budget: "
                        "MLX's cache-GC threshold and the runtime; see README)")


def add_request_args(p: argparse.ArgumentParser) -> None:
    """The request shape shared by fit and chart (estimate has the same flags)."""
    p.add_argument("--chunk", type=positive_int_arg, default=2048, help="prefill step size (default 2048, mlx-lm's)")
    p.add_argument("--cached", type=count_arg, default=0, metavar="N",
                   help="tokens already in the cache (prefix cache): widen attention, add no KV (default 0: none)")
    p.add_argument("--backend", choices=("metal", "cuda", "cpu"), help="MLX backend whose kernels run the prefill")
    p.add_argument("--mlx-version", metavar="V", help="MLX version (kernel routes change between versions)")
    add_weights_args(p)


def fit_request(args):
    """The flags of ``add_request_args`` as plain values (``estimate.fit.FitRequest``)."""
    from ..estimate.fit import FitRequest

    return FitRequest(chunk=args.chunk, cached=args.cached, backend=args.backend, mlx_version=args.mlx_version,
                      weights_bits=getattr(args, "weights_bits", None))


def model_dir(args, res) -> Path | None:
    """The local model directory MODEL (or --config) points at, for exact weights from safetensors."""
    for cand in (getattr(args, "config", None), getattr(args, "model", None) if isinstance(getattr(args, "model", None), str) else None,
                 res.query):
        if not cand:
            continue
        p = user_path(cand)
        if p.is_file() and p.name.endswith(".json"):
            p = p.parent
        if p.is_dir():
            return p
    return None


def weights_of(args, res):
    """The weights term from ``--weights`` / ``--weights-bits`` / a local model directory, else the profile."""
    from ..estimate.weights import weights_for

    return weights_for(res, given=getattr(args, "weights_size", None), bits=getattr(args, "weights_bits", None),
                       model_dir=model_dir(args, res))


def print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")
