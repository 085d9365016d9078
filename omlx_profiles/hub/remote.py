"""Read a Hub repo's config.json, its safetensors index and each shard's *header*, never the tensors.

Why our own reads and not ``hf_hub_download``: a shard is 2-10 GB and we need its first few KB. Each
shard costs two HTTP range requests: ``bytes=0-7`` (the little-endian header length ``N``; the
``Content-Range`` total is the file size the header is checked against) and ``bytes=8-(8+N-1)`` (the
JSON header). A server that ignores ``Range`` and starts sending the whole file is read no further than
the bytes asked for, then closed. Everything else goes through ``huggingface_hub``: the endpoint
(``HF_ENDPOINT``), the token (``HF_TOKEN`` / the saved login), the HTTP client and its error mapping
(gated, missing repo / revision / file), so behaviour matches the field's own client.

``Fetcher.stats`` counts requests and body bytes received: the tests (and ``--explain``) show that only
headers were read.
"""
from __future__ import annotations

import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from ..errors import HubAccessError, HubNotFoundError, HubUnavailableError
from ..mlxlm.config import MAX_CONFIG_BYTES  # one limit for every config.json read
from ..estimate.safetensors import (INDEX_NAME, MAX_INDEX_BYTES, MAX_SHARDS, FileHeader, SafetensorsError,
                                  header_length, parse_header, parse_index)

#: shard headers fetched at once (a 1,000-shard index finishes in seconds; the Hub rate-limits far above)
WORKERS = 16


def _hf():
    try:
        import huggingface_hub  # noqa: F401
    except ImportError:
        raise HubUnavailableError("reading a model from the Hugging Face Hub needs the hub extra: "
                                  "pip install 'omlx-profiles[hub]'") from None
    import huggingface_hub

    return huggingface_hub


def endpoint() -> str:
    """``HF_ENDPOINT`` read at call time (huggingface_hub reads it once, at import)."""
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def timeout() -> float:
    try:
        return float(os.environ.get("HF_HUB_DOWNLOAD_TIMEOUT", "10"))
    except ValueError:
        return 10.0


@dataclass
class Stats:
    requests: int = 0
    bytes: int = 0  # response body bytes received
    range_requests: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, n: int, ranged: bool) -> None:
        with self._lock:
            self.requests += 1
            self.bytes += n
            self.range_requests += int(ranged)


@dataclass(frozen=True)
class RepoInfo:
    repo: str
    revision: str
    commit: str
    files: tuple[str, ...]
    gated: object = None


class Fetcher:
    """One repo at one revision; every request names it in errors."""

    def __init__(self, repo: str, revision: str | None = None, token: str | None = None):
        _hf()
        self.repo = repo
        self.revision = revision or "main"
        self.token = token
        self.endpoint = endpoint()
        self.timeout = timeout()
        self.stats = Stats()

    # -- plumbing --------------------------------------------------------------------------------
    def _headers(self, extra: dict | None = None) -> dict:
        from huggingface_hub.utils import build_hf_headers

        h = build_hf_headers(token=self.token, library_name="omlx-profiles")
        h.update(extra or {})
        return h

    def _get(self, url: str, what: str, *, limit: int, rng: tuple[int, int] | None = None):
        """GET at most ``limit`` body bytes; returns (status, headers, body). Maps failures to our errors."""
        from huggingface_hub.utils import get_session, hf_raise_for_status

        headers = self._headers({"Range": f"bytes={rng[0]}-{rng[1]}"} if rng else None)
        try:
            with get_session().stream("GET", url, headers=headers, timeout=self.timeout,
                                      follow_redirects=True) as r:
                if r.status_code >= 400:
                    r.read()
                    self.stats.add(len(r.content), rng is not None)
                    hf_raise_for_status(r)
                body = bytearray()
                for chunk in r.iter_bytes():
                    body += chunk
                    if len(body) >= limit:
                        break
                self.stats.add(len(body), rng is not None)
                return r.status_code, dict(r.headers), bytes(body[:limit])
        except Exception as e:  # noqa: BLE001 - mapped to a typed error below, or re-raised
            raise self._map(e, what) from None

    def _map(self, e: Exception, what: str) -> Exception:
        from huggingface_hub import errors as he

        where = f"{self.repo}@{self.revision}"
        page = f"{self.endpoint}/{self.repo}"
        if isinstance(e, (HubAccessError, HubNotFoundError, HubUnavailableError, SafetensorsError)):
            return e
        if isinstance(e, he.GatedRepoError):
            return HubAccessError(f"{where}: gated repo: accept its licence at {page} and set HF_TOKEN "
                                  "(or `hf auth login`) to a token that has access")
        if isinstance(e, he.RevisionNotFoundError):
            return HubNotFoundError(f"{where}: revision {self.revision!r} not found on {self.endpoint}")
        if isinstance(e, (he.RemoteEntryNotFoundError, he.EntryNotFoundError)):
            return HubNotFoundError(f"{where}: {what} not found in the repo")
        status = getattr(getattr(e, "response", None), "status_code", None)
        if isinstance(e, he.RepositoryNotFoundError) or status == 404:
            tok = "" if self.token or os.environ.get("HF_TOKEN") else " (a private repo needs HF_TOKEN)"
            return HubNotFoundError(f"{self.repo}: no such model repo on {self.endpoint}{tok}")
        if status in (401, 403):
            return HubAccessError(f"{where}: access denied ({status}) reading {what}: set HF_TOKEN to a token "
                                  "with read access")
        if isinstance(e, he.OfflineModeIsEnabled):
            return HubUnavailableError(f"{where}: HF_HUB_OFFLINE is set and it is not in the cache")
        if isinstance(e, he.HfHubHTTPError):
            return HubUnavailableError(f"{where}: the Hub answered {status} reading {what}")
        name = type(e).__name__
        if "Timeout" in name:
            return HubUnavailableError(f"{where}: timed out after {self.timeout:g} s reading {what} from "
                                       f"{self.endpoint} (HF_HUB_DOWNLOAD_TIMEOUT sets the limit)")
        if "Connect" in name or "Network" in name or "Transport" in name or "Protocol" in name or isinstance(e, OSError):
            return HubUnavailableError(f"{where}: cannot reach {self.endpoint} ({name}); with no network, "
                                       "a model read once before is answered from the cache")
        return e

    def _file_url(self, filename: str) -> str:
        from huggingface_hub import hf_hub_url

        return hf_hub_url(self.repo, filename, revision=self.commit_or_rev, endpoint=self.endpoint)

    commit_or_rev: str = "main"

    # -- the three reads -------------------------------------------------------------------------
    def info(self) -> RepoInfo:
        """Commit and file list of the revision (``/api/models/{repo}/revision/{rev}``)."""
        url = f"{self.endpoint}/api/models/{self.repo}/revision/{quote(self.revision, safe='')}"
        _, _, body = self._get(url, "the repo's file list", limit=20_000_000)
        try:
            data = json.loads(body.decode("utf-8"))
            sha = data["sha"]
            files = tuple(s["rfilename"] for s in data.get("siblings") or [])
            if not isinstance(sha, str) or not all(isinstance(f, str) for f in files):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            raise HubUnavailableError(f"{self.repo}@{self.revision}: the Hub's model info is not what huggingface_hub "
                                      f"expects (no commit sha / file list) at {url}") from None
        self.commit_or_rev = sha
        return RepoInfo(self.repo, self.revision, sha, files, data.get("gated"))

    def text(self, filename: str, limit: int) -> bytes:
        status, headers, body = self._get(self._file_url(filename), filename, limit=limit + 1)
        if len(body) > limit:
            raise SafetensorsError(f"hf://{self.repo}@{self.commit_or_rev[:12]}/{filename}: larger than {limit} bytes")
        return body

    def header(self, filename: str) -> tuple[FileHeader, int]:
        """One shard's header by two range requests; returns (header, file size)."""
        url = self._file_url(filename)
        where = f"hf://{self.repo}@{self.commit_or_rev[:12]}/{filename}"
        status, headers, head = self._get(url, filename, limit=8, rng=(0, 7))
        size = _total_size(headers, status)
        if size is None:
            raise SafetensorsError(f"{where}: the server sent no file size (Content-Range) for a range request; "
                                   "cannot check the header against the file")
        n = header_length(where, head, size)
        if n == 0:
            raw = b""
        else:
            status, headers, raw = self._get(url, filename, limit=n, rng=(8, 8 + n - 1))
            if status == 200:  # the range was ignored: the body started at byte 0
                raise SafetensorsError(f"{where}: the server ignored the range request; refusing to read the file")
        if len(raw) != n:
            raise SafetensorsError(f"{where}: truncated header ({len(raw)} of {n} bytes)")
        return parse_header(Path(filename), raw, size, where=where), size


def _total_size(headers: dict, status: int) -> int | None:
    cr = {k.lower(): v for k, v in headers.items()}.get("content-range", "")
    if "/" in cr:
        tail = cr.rsplit("/", 1)[1].strip()
        if tail.isdigit():
            return int(tail)
    return None


@dataclass(frozen=True)
class Fetched:
    info: RepoInfo
    config: dict
    config_bytes: bytes
    index: dict[str, str] | None
    shards: tuple[tuple[FileHeader, int], ...]
    stats: Stats


def shard_names(files: tuple[str, ...]) -> list[str]:
    """``model*.safetensors`` at the repo root: the files ``mlx_lm.load`` globs."""
    return sorted(f for f in files if "/" not in f and f.startswith("model") and f.endswith(".safetensors"))


def fetch(repo: str, revision: str | None = None, token: str | None = None) -> Fetched:
    """Config, index and every shard header of ``repo`` at ``revision`` (the tensors are never read)."""
    f = Fetcher(repo, revision, token)
    info = f.info()
    if "config.json" not in info.files:
        raise HubNotFoundError(f"{repo}@{f.revision}: no config.json in the repo (not a transformers / MLX model repo)")
    raw_config = f.text("config.json", MAX_CONFIG_BYTES)
    where = f"hf://{repo}@{info.commit[:12]}"
    try:
        config = json.loads(raw_config.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise SafetensorsError(f"{where}/config.json: not valid JSON ({e})") from None
    shards = shard_names(info.files)
    index = None
    if INDEX_NAME in info.files:
        index = parse_index(f"{where}/{INDEX_NAME}", f.text(INDEX_NAME, MAX_INDEX_BYTES))
        listed = set(index.values())
        absent = sorted(listed - set(info.files))
        if absent:
            raise SafetensorsError(f"{where}/{INDEX_NAME}: shard(s) {', '.join(absent[:3])}"
                                   f"{' ...' if len(absent) > 3 else ''} listed in the index are not in the repo")
        odd = sorted(listed - set(shards))
        if odd:
            raise SafetensorsError(f"{where}/{INDEX_NAME}: shard(s) {', '.join(odd[:3])} do not match "
                                   "model*.safetensors, the only files mlx-lm loads")
    if len(shards) > MAX_SHARDS:
        raise SafetensorsError(f"{where}: {len(shards)} weight files; at most {MAX_SHARDS} are read")
    with ThreadPoolExecutor(max_workers=min(WORKERS, max(1, len(shards)))) as ex:
        headers = tuple(ex.map(f.header, shards))
    if index is not None:
        by_file = {h.path.name: {t.name for t in h.tensors} for h, _ in headers}
        for tensor, fname in index.items():
            if tensor not in by_file.get(fname, ()):
                raise SafetensorsError(f"{where}/{INDEX_NAME}: tensor {tensor!r} is mapped to {fname} but that "
                                       "file does not hold it")
    if not isinstance(config, dict):
        raise SafetensorsError(f"{where}/config.json: must be a JSON object")
    return Fetched(info, config, raw_config, index, headers, f.stats)
