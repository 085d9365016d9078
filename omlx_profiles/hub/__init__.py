"""Any model on the Hugging Face Hub, from its config.json and safetensors headers (the ``hub`` extra).

``resolve_hub("mlx-community/Qwen3-30B-A3B-Instruct-2507-4bit")`` reads the repo's file list, its
``config.json``, its ``model.safetensors.index.json`` and each ``model*.safetensors`` shard's header by
HTTP range requests (``remote``), builds the profile by the same extraction a local config.json gets
(``extract.extract_config``), and keeps the headers for exact weights (``weights.estimate_weights``
sums the stored tensors, every dtype and quantization mode). The result is cached (``cache``), so the
next call reads no network and costs what a registry id costs.

Why not for every id: the registry answers offline, instantly, with reviewed data; the Hub is asked for
ids the registry does not know, or when the caller asks (``--hub``, ``revision=``).
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from ..errors import HubUnavailableError, InputError
from ..registry import Registry, Resolution
from ..estimate.safetensors import CheckpointHeaders
from . import cache

_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_PREFIXES = ("hf://", "https://huggingface.co/", "http://huggingface.co/", "huggingface.co/")


@dataclass(frozen=True)
class RemoteCheckpoint:
    """A Hub checkpoint's shard headers and config, what ``weights`` needs for exact bytes."""

    headers: CheckpointHeaders
    config: dict


def repo_id(query: str) -> tuple[str, str | None]:
    """``org/name`` (and a revision from ``org/name@rev``) of a Hub id; ``InputError`` if it is not one."""
    q = query.strip()
    for p in _PREFIXES:
        if q.lower().startswith(p):
            q = q[len(p):]
            break
    rev = None
    if "@" in q:
        q, rev = q.split("@", 1)
        if not rev or len(rev) > 200 or any(c.isspace() for c in rev):
            raise InputError(f"{query!r}: a revision after '@' must be a branch, tag or commit")
    q = q.rstrip("/")
    if not _REPO.match(q) or "--" in q or ".." in q or q.endswith(".git"):
        raise InputError(f"{query!r} is not a Hugging Face model id (expected org/name)")
    return q, rev


def looks_like_repo(query: str) -> bool:
    try:
        repo_id(query)
    except InputError:
        return False
    return True


def resolve_hub(query: str, revision: str | None = None, *, registry: Registry | None = None,
                refresh: bool = False, token: str | None = None) -> Resolution:
    """The profile of a Hub repo (see the module doc). Raises ``HubError`` subclasses (access, not found,
    unavailable), ``SafetensorsError`` for a header that lies, ``UnsupportedError`` naming a model type
    this package (or mlx-lm) does not cover."""
    from ..extraction.from_config import extract_config
    from ..registry.naming import parse_id

    repo, at = repo_id(query)
    revision = revision or at or "main"
    rec = None if refresh else cache.lookup(repo, revision)
    headers = None
    if rec is not None and rec.get("files"):
        headers = cache.headers_of(rec, f"hf://{repo}@{str(rec.get('commit'))[:12]}")
        if headers is None:
            rec = None  # a damaged record: a miss
    from_cache = rec is not None
    if rec is None:
        if cache.offline():
            raise HubUnavailableError(
                f"{repo}@{revision}: HF_HUB_OFFLINE is set and this model is not in the cache "
                f"({cache.repo_dir(repo)}); read it once with the network on")
        from .remote import fetch

        fetched = fetch(repo, revision, token)
        rec = cache.record(fetched)
        rec["cached_at"] = str(cache.store(rec) or "")
    commit = rec["commit"]
    where = f"hf://{repo}@{commit[:12]}"
    parsed = None
    try:
        parsed = parse_id(repo)
    except LookupError:
        pass
    ex = extract_config(rec["config"], source=f"{where}/config.json", name_hint=repo.rsplit("/", 1)[1])
    if repo not in ex.ids:
        ex.ids.append(repo)
    profile = ex.profile()
    notes = list(ex.notes)
    if registry is not None:
        from ..extraction.match import match_registry

        hints = [h for h in (parsed.stems if parsed else ())] + list(ex.ids)
        profile, mnotes = match_registry(profile, registry, hints)
        notes.extend(mnotes)
    if headers is None:
        headers = cache.headers_of(rec, where)
    stats = rec.get("stats") or {}
    prov = dict(profile.provenance)
    if headers is not None:
        prov["weights"] = (f"{where}: safetensors headers of {len(headers.files)} shard(s), {headers.tensor_count} "
                           f"tensors ({stats.get('range_requests', '?')} range requests, "
                           f"{stats.get('bytes', '?')} bytes read; tensor data never read)")
    else:
        prov["weights"] = f"{where}: no model*.safetensors in the repo, so no exact weights"
        notes.append(f"{where} holds no model*.safetensors (mlx-lm loads only those): weights from the profile")
    prov["origin"] = (f"cache {cache.repo_dir(repo)} (fetched {rec.get('fetched_at')}; no network used)"
                      if from_cache else f"Hugging Face Hub {repo} at {revision} = commit {commit}")
    profile = dataclasses.replace(profile, provenance=prov)
    origin = {"repo": repo, "revision": revision, "commit": commit, "from_cache": from_cache,
              "cache": str(cache.repo_dir(repo)), "requests": 0 if from_cache else stats.get("requests"),
              "bytes_read": 0 if from_cache else stats.get("bytes")}
    quant = parsed.quant if parsed else None
    return Resolution(profile, query, "hub", f"{repo}@{commit}", weights_bits=ex.weights_bits or (quant.bits if quant else None),
                      notes=tuple(notes), quant=quant,
                      checkpoint=RemoteCheckpoint(headers, rec["config"]) if headers is not None else None,
                      origin=origin)


#: registry matches by name only (a converted repo, another org, a base architecture): a Hub record of the
#: very repo, already in the cache, knows more (its own config and exact weights) and costs no network.
NAME_MATCHES = ("quantized-repo", "repo-name", "base-architecture")


def prefer_cached(res: Resolution, registry: Registry | None = None) -> Resolution:
    """``res`` from the registry, or the cached Hub record of the same repo when ``res`` matched by name only."""
    if res.matched_by not in NAME_MATCHES or not looks_like_repo(res.query):
        return res
    repo, at = repo_id(res.query)
    if cache.lookup(repo, at or "main") is None:
        return res
    try:
        return resolve_hub(res.query, registry=registry)
    except Exception:  # noqa: BLE001 - a cache record that no longer resolves: the registry's answer stands
        return res


def fallback(query: str, registry: Registry, unknown: LookupError, *, refresh: bool = False) -> Resolution:
    """An id the registry does not know (``unknown`` is its error): the Hub, cache first. If the Hub cannot
    answer, the registry's ``UnknownModelError`` with the reason added (what to install, what failed)."""
    import importlib.util

    from ..errors import HubNotFoundError, HubUnavailableError, UnknownModelError

    sugg = list(getattr(unknown, "suggestions", []) or [])
    repo, at = repo_id(query)
    if importlib.util.find_spec("huggingface_hub") is None and (refresh or cache.lookup(repo, at or "main") is None):
        raise UnknownModelError(query, sugg, "not in the registry; install the hub extra "
                                "(pip install 'omlx-profiles[hub]') to read it from the Hugging Face Hub") from None
    try:
        return resolve_hub(query, registry=registry, refresh=refresh)
    except HubNotFoundError as e:
        raise UnknownModelError(query, sugg, f"not in the registry, and not on the Hub either ({e})") from None
    except HubUnavailableError as e:
        raise UnknownModelError(query, sugg, f"not in the registry, and the Hub cannot be read ({e})") from None


__all__ = ["NAME_MATCHES", "fallback", "prefer_cached", "RemoteCheckpoint", "looks_like_repo", "repo_id", "resolve_hub"]
