"""A compiled copy of the registry: the resolved profiles as plain JSON, reused while nothing changed.

Why: validating profile YAML needs pydantic, and importing pydantic and building the schema models
costs ~0.2 s of CPU per process - most of an ``estimate`` run. A process that only *reads* the
registry (the CLI's estimate / fit / chart / resolve, an engine's admission path) gets the same
``Profile`` objects from a JSON file written by the last full load, without importing pydantic or
yaml.

Correctness: the file is keyed by a hash of the *contents* of every profile file loaded (built-in and
user directories, in order), the stat of the package modules that turn YAML into profiles, and the
package version; any change gives a new key and a full, validated load. Only a load that raised no
issue (strict) is written. The file lives in ``$OMLX_PROFILES_CACHE`` or
``$XDG_CACHE_HOME/omlx-profiles`` (``~/.cache/omlx-profiles``); ``OMLX_PROFILES_CACHE=off`` disables
it, and any error reading or writing it falls back to the full load silently (the cache is an
optimisation, never a source of truth).

A compiled ``Profile`` has ``variant=None`` (provenance needs the full load) and its ``mla`` / ``moe``
/ ``weights`` are read-only attribute views (``Frozen``) of the validated models' fields; a compiled
kernel table is a ``Frozen`` view too (methods of the pydantic models are not there: callers use plain
functions such as ``peak.routes.window_for``). Nothing uses it unless asked: ``load_registry(compiled=True)``
and ``enable()`` (the CLI's estimate / fit / chart do both).
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import fields
from pathlib import Path

from . import __version__
from .profile import CacheEntry, LayerType, Profile, StateTensorSpec

FORMAT = 1
ENV = "OMLX_PROFILES_CACHE"
#: Modules whose code decides what a YAML file resolves to: a change to any of them invalidates.
CODE = ("schema_models.py", "loader.py", "profile.py", "registry.py", "yaml_io.py", "compiled.py")
MAX_CACHE_BYTES = 50_000_000

# Opt-in per process: the CLI's read-only commands turn it on; library users and tests get the full,
# validated objects unless they ask (``load_registry(compiled=True)`` / ``enable()``).
_ENABLED = [False]


def enable(on: bool = True) -> None:
    """Let other loaders of this process (the kernel tables) use compiled copies too."""
    _ENABLED[0] = bool(on)


def enabled() -> bool:
    return _ENABLED[0] and cache_dir() is not None


class Frozen:
    """Read-only attribute view of a validated pydantic model's fields (``profile.mla.kv_lora_rank``)."""

    __slots__ = ("_d",)

    def __init__(self, d: dict):
        object.__setattr__(self, "_d", d)

    def __getattr__(self, k: str):
        try:
            v = object.__getattribute__(self, "_d")[k]
        except KeyError:
            raise AttributeError(k) from None
        return _wrap(v)

    def __setattr__(self, k, v):
        raise AttributeError("compiled profile fields are read-only")

    def __eq__(self, other):
        return isinstance(other, Frozen) and self._d == other._d

    def __hash__(self):
        return hash(json.dumps(self._d, sort_keys=True))

    def model_dump(self, **_) -> dict:
        return json.loads(json.dumps(self._d))

    # mapping access too, for fields that are dicts in the model (``transient: {bf16: 2.0}``)
    def __getitem__(self, k):
        return _wrap(self._d[k])

    def get(self, k, default=None):
        return _wrap(self._d[k]) if k in self._d else default

    def keys(self):
        return self._d.keys()

    def values(self):
        return [_wrap(v) for v in self._d.values()]

    def items(self):
        return [(k, _wrap(v)) for k, v in self._d.items()]

    def __contains__(self, k):
        return k in self._d

    def __iter__(self):
        return iter(self._d)

    def __len__(self):
        return len(self._d)

    def __repr__(self) -> str:
        return f"Frozen({self._d!r})"


def _wrap(v):
    if isinstance(v, dict):
        return Frozen(v)
    if isinstance(v, list):
        return tuple(_wrap(x) for x in v)
    return v


def cache_dir() -> Path | None:
    env = os.environ.get(ENV, "")
    if env.lower() in ("off", "0", "no", "false"):
        return None
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "omlx-profiles"


def key(sources: list[list[Path]]) -> str:
    """Hash of every profile file's bytes (in load order) + the resolving code's stat + version."""
    h = hashlib.sha256()
    h.update(f"{FORMAT}|{__version__}|".encode())
    for i, paths in enumerate(sources):
        for p in paths:
            data = Path(p).read_bytes()
            h.update(f"{i}|{p}|{len(data)}|".encode())
            h.update(data)
    pkg = Path(__file__).resolve().parent
    for name in CODE:
        st = os.stat(pkg / name)
        h.update(f"{name}|{st.st_mtime_ns}|{st.st_size}|".encode())
    return h.hexdigest()[:32]


def _enc(v):
    if hasattr(v, "model_dump"):
        return {"$m": v.model_dump(mode="json")}
    if isinstance(v, Frozen):
        return {"$m": v.model_dump()}
    if isinstance(v, tuple):
        return {"$t": [_enc(x) for x in v]}
    if isinstance(v, list):
        return [_enc(x) for x in v]
    if isinstance(v, dict):
        return {"$d": {str(k): _enc(x) for k, x in v.items()}}
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise TypeError(f"cannot compile a {type(v).__name__}")  # a new kind of field: no cache, full load


def _dec(v):
    if isinstance(v, dict):
        if "$m" in v:
            return Frozen(v["$m"])
        if "$t" in v:
            return tuple(_dec(x) for x in v["$t"])
        if "$d" in v:
            return {k: _dec(x) for k, x in v["$d"].items()}
        raise ValueError("bad cache entry")
    if isinstance(v, list):
        return [_dec(x) for x in v]
    return v


def dump_profile(p: Profile) -> dict:
    """Every ``Profile`` field but ``variant``; the layer types as rows of ``CacheEntry`` fields."""
    out = {}
    for f in fields(Profile):
        if f.name == "variant":
            continue
        v = getattr(p, f.name)
        if f.name == "layer_types":
            out[f.name] = {k: [[_entry_field(e, g.name) for g in fields(CacheEntry)] for e in lt.entries]
                           for k, lt in v.items()}
        else:
            out[f.name] = _enc(v)
    return out


def _entry_field(e: CacheEntry, name: str):
    if name == "tensors":
        return [[_enc(getattr(t, g.name)) for g in fields(StateTensorSpec)] for t in e.tensors]
    return _enc(getattr(e, name))


def load_profile(d: dict) -> Profile:
    kw = {k: _dec(v) for k, v in d.items() if k != "layer_types"}
    names = [g.name for g in fields(CacheEntry)]
    lts = {}
    for k, rows in d["layer_types"].items():
        entries = []
        for row in rows:
            e = dict(zip(names, (_dec(x) for x in row)))
            e["tensors"] = tuple(StateTensorSpec(*t) for t in e.get("tensors", ()))  # _dec made tuples
            entries.append(CacheEntry(**e))
        lts[k] = LayerType(k, tuple(entries))
    kw["layer_types"] = lts
    return Profile(**kw)


def dump_registry(reg) -> dict:
    return {
        "format": FORMAT,
        "profiles": {n: dump_profile(p) for n, p in reg.profiles.items()},
        "index": reg._index, "repo_index": reg._repo_index,
        "ambiguous_repos": getattr(reg, "_ambiguous_repos", {}),
        "model_types": reg.model_types, "notes": reg.notes,
    }


def load_registry_dict(data: dict):
    from .registry import Registry

    if data.get("format") != FORMAT:
        raise ValueError("cache format")
    reg = Registry()
    reg.profiles = {n: load_profile(p) for n, p in data["profiles"].items()}
    reg._index = {k: tuple(v) for k, v in data["index"].items()}
    reg._repo_index = dict(data["repo_index"])
    if hasattr(reg, "_ambiguous_repos"):
        reg._ambiguous_repos = {k: tuple(v) for k, v in data.get("ambiguous_repos", {}).items()}
    reg.model_types = {k: list(v) for k, v in data["model_types"].items()}
    reg.notes = list(data["notes"])
    return reg


def cached_model(kind: str, paths: list[Path], build):
    """``build()`` -> a validated pydantic model (e.g. a kernel table), or a ``Frozen`` view of the last
    one built from the same files. Keyed like the registry (file contents + code stat + version)."""
    d = cache_dir()
    if d is None:
        return build()
    try:
        path = d / f"{kind}-{key([list(paths)])}.json"
    except OSError:
        return build()
    try:
        if path.stat().st_size <= MAX_CACHE_BYTES:
            data = json.loads(path.read_bytes())
            if data.get("format") == FORMAT:
                return Frozen(data["model"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    model = build()
    try:
        d.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"format": FORMAT, "model": model.model_dump(mode="json", by_alias=False)},
                                  separators=(",", ":")))
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):
        pass
    return model


def cached_registry(sources: list[list[Path]], build):
    """``build()`` (the full, validated load), or the compiled copy of its last result for these files."""
    d = cache_dir()
    if d is None:
        return build()
    try:
        path = d / f"registry-{key(sources)}.json"
    except OSError:
        return build()
    try:
        if path.stat().st_size <= MAX_CACHE_BYTES:
            return load_registry_dict(json.loads(path.read_bytes()))
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        pass  # missing, stale format or damaged: rebuild below
    reg = build()
    try:
        d.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(dump_registry(reg), separators=(",", ":")))
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):
        pass
    return reg
