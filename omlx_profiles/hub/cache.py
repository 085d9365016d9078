"""What one Hub read learned, kept under huggingface_hub's cache directory so the next call needs no network.

Layout (beside huggingface_hub's own ``models--org--name`` folders, under ``HF_HUB_CACHE``)::

    omlx-profiles/models--{org}--{name}/refs/{revision}   the commit a branch / tag resolved to
    omlx-profiles/models--{org}--{name}/{commit}.json     config.json, shard sizes and headers (names,
                                                          dtypes, shapes: a few KB per shard)

A commit never changes, so a record is reused as is; a branch (``main``) is answered from the commit
it pointed to when it was read (``--hub-refresh`` / ``refresh=True`` asks the Hub again). With
``HF_HUB_OFFLINE=1`` only the cache is read. A record that does not parse is a cache miss (refetched
when online, an error offline), never a silent number.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
import time
from pathlib import Path

from ..estimate.safetensors import DTYPE_BITS, CheckpointHeaders, FileHeader, TensorInfo, tensor_nbytes

FORMAT = 1
_SHA = re.compile(r"^[0-9a-f]{40}$")


def hub_cache_dir() -> Path:
    """``HF_HUB_CACHE``, else ``HF_HOME/hub``, else ``~/.cache/huggingface/hub`` (huggingface_hub's order)."""
    env = os.environ.get("HF_HUB_CACHE")
    if env:
        return Path(env).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "hub"


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def repo_dir(repo: str) -> Path:
    return hub_cache_dir() / "omlx-profiles" / ("models--" + repo.replace("/", "--"))


def _ref_name(revision: str) -> str:
    return revision.replace("%", "%25").replace("/", "%2F")


def lookup(repo: str, revision: str) -> dict | None:
    """The cached record of ``repo`` at ``revision`` (a commit, or the commit a branch last resolved to)."""
    d = repo_dir(repo)
    commit = revision if _SHA.match(revision) else None
    if commit is None:
        try:
            commit = (d / "refs" / _ref_name(revision)).read_text("ascii").strip()
        except (OSError, UnicodeDecodeError):
            return None
        if not _SHA.match(commit):
            return None
    try:
        with open(d / f"{commit}.json", "rb") as f:
            rec = json.loads(f.read(200_000_000).decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(rec, dict) or rec.get("format") != FORMAT or rec.get("commit") != commit:
        return None
    return rec


def store(rec: dict) -> Path | None:
    """Write a record and its ref atomically; a read-only cache only costs the next call a refetch."""
    d = repo_dir(rec["repo"])
    try:
        (d / "refs").mkdir(parents=True, exist_ok=True)
        target = d / f"{rec['commit']}.json"
        _atomic_write(target, json.dumps(rec, separators=(",", ":")).encode("utf-8"))
        if rec["revision"] != rec["commit"]:
            _atomic_write(d / "refs" / _ref_name(rec["revision"]), rec["commit"].encode("ascii"))
        return target
    except OSError:
        return None


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def record(fetched) -> dict:
    """The cache record of a ``remote.Fetched``."""
    info = fetched.info
    return {
        "format": FORMAT, "repo": info.repo, "revision": info.revision, "commit": info.commit,
        "fetched_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "config": fetched.config,
        "index": fetched.index is not None,
        "files": [{"name": h.path.name, "size": size, "header_bytes": h.header_bytes, "metadata": h.metadata,
                   "tensors": [[t.name, t.dtype, list(t.shape)] for t in h.tensors]}
                  for h, size in fetched.shards],
        "stats": {"requests": fetched.stats.requests, "range_requests": fetched.stats.range_requests,
                  "bytes": fetched.stats.bytes},
    }


def headers_of(rec: dict, where: str) -> CheckpointHeaders | None:
    """The record's shards as ``CheckpointHeaders`` (``None`` when there are none, or it does not parse)."""
    files = []
    try:
        for f in rec["files"]:
            tensors = []
            for name, dtype, shape in f["tensors"]:
                if dtype not in DTYPE_BITS or not all(type(x) is int and x >= 0 for x in shape):
                    return None
                tensors.append(TensorInfo(str(name), dtype, tuple(shape), tensor_nbytes(dtype, tuple(shape))))
            files.append(FileHeader(Path(str(f["name"])), int(f["header_bytes"]), tuple(tensors),
                                    dict(f.get("metadata") or {})))
    except (KeyError, TypeError, ValueError):
        return None
    if not files:
        return None
    return CheckpointHeaders(where, tuple(files), Path("model.safetensors.index.json") if rec.get("index") else None)
