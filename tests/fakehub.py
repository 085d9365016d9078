"""A local stand-in for the Hugging Face Hub: the endpoints huggingface_hub and omlx_profiles.hub call.

* ``GET /api/models/{org}/{name}[/revision/{rev}]`` -> ``{"id", "sha", "siblings": [{"rfilename"}]}``;
* ``GET|HEAD /{org}/{name}/resolve/{rev}/{file}`` with ``Range: bytes=a-b`` (206 + ``Content-Range``),
  ``ETag``, ``X-Repo-Commit``, ``Accept-Ranges``; errors carry huggingface_hub's ``X-Error-Code``
  (``RepoNotFound``, ``RevisionNotFound``, ``EntryNotFound``, ``GatedRepo``) so its own error mapping runs.

Files are virtual: a prefix of real bytes (a safetensors header, a config) and a total size; bytes past
the prefix are zeros made on demand, so a "10 GB" shard costs nothing and every byte sent is counted
(``Hub.log``): a test can assert that no tensor byte left the server.
"""
from __future__ import annotations

import hashlib
import json
import re
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse

# element bits per safetensors dtype, written out here (not imported) so the sizes the tests expect do
# not come from the code under test
BITS = {"BOOL": 8, "U8": 8, "I8": 8, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8, "I16": 16, "U16": 16,
        "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "I64": 64, "F64": 64, "F4": 4}


@dataclass
class VFile:
    prefix: bytes
    size: int

    def read(self, a: int, b: int) -> bytes:  # inclusive range, clipped
        b = min(b, self.size - 1)
        if a > b:
            return b""
        head = self.prefix[a:b + 1]
        return head + b"\0" * (b + 1 - a - len(head))


@dataclass
class Repo:
    files: dict[str, VFile]
    sha: str = ""
    gated: bool = False  # needs a token ("Bearer good")
    revisions: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        if not self.sha:
            self.sha = hashlib.sha1(repr(sorted(self.files)).encode()).hexdigest()
        self.revisions.setdefault("main", self.sha)
        self.revisions.setdefault(self.sha, self.sha)


@dataclass
class Req:
    method: str
    path: str
    range: str | None
    status: int
    sent: int  # body bytes


class Hub:
    def __init__(self):
        self.repos: dict[str, Repo] = {}
        self.log: list[Req] = []
        self.delay = 0.0  # seconds before answering (timeout tests)
        self.ignore_range = False
        self._lock = threading.Lock()
        hub = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def do_HEAD(self):
                hub._serve(self, head=True)

            def do_GET(self):
                hub._serve(self, head=False)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        # a client that closes early (a timeout test, a refused header) is expected: no stack on stderr
        self.server.handle_error = lambda request, client_address: None
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *a):
        self.server.shutdown()
        self.server.server_close()

    # ----------------------------------------------------------------------------------------------
    def add(self, repo_id: str, files: dict[str, bytes | VFile], **kw) -> Repo:
        vf = {k: (v if isinstance(v, VFile) else VFile(v, len(v))) for k, v in files.items()}
        r = Repo(vf, **kw)
        self.repos[repo_id] = r
        return r

    def sent(self) -> int:
        return sum(r.sent for r in self.log)

    def _reply(self, h, status, body=b"", headers=None, head=False, rng=None):
        h.send_response(status)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        sent = 0
        if not head and body:
            try:
                h.wfile.write(body)
                sent = len(body)
            except (BrokenPipeError, ConnectionResetError):
                pass
        with self._lock:
            self.log.append(Req(h.command, h.path, rng, status, sent))

    def _error(self, h, status, code, head):
        self._reply(h, status, json.dumps({"error": code}).encode(),
                    {"X-Error-Code": code, "X-Error-Message": code, "Content-Type": "application/json"}, head)

    def _serve(self, h, head: bool):
        if self.delay:
            time.sleep(self.delay)
        path = unquote(urlparse(h.path).path)
        rng = h.headers.get("Range")
        auth = h.headers.get("Authorization", "")
        m = re.match(r"^/api/models/([^/]+/[^/]+)(?:/revision/(.+))?$", path)
        if m:
            repo = self.repos.get(m.group(1))
            if repo is None:
                return self._error(h, 401 if not auth else 404, "RepoNotFound", head)
            if repo.gated and auth != "Bearer good":
                return self._error(h, 403 if auth else 401, "GatedRepo", head)
            rev = m.group(2) or "main"
            sha = repo.revisions.get(rev)
            if sha is None:
                return self._error(h, 404, "RevisionNotFound", head)
            body = json.dumps({"id": m.group(1), "modelId": m.group(1), "sha": sha, "private": False,
                               "gated": repo.gated, "siblings": [{"rfilename": f} for f in sorted(repo.files)]}).encode()
            return self._reply(h, 200, body, {"Content-Type": "application/json"}, head)
        m = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
        if not m:
            return self._error(h, 404, "NotFound", head)
        repo = self.repos.get(m.group(1))
        if repo is None:
            return self._error(h, 401 if not auth else 404, "RepoNotFound", head)
        if repo.gated and auth != "Bearer good":
            return self._error(h, 403 if auth else 401, "GatedRepo", head)
        sha = repo.revisions.get(m.group(2))
        if sha is None:
            return self._error(h, 404, "RevisionNotFound", head)
        f = repo.files.get(m.group(3))
        if f is None:
            return self._error(h, 404, "EntryNotFound", head)
        base = {"ETag": f'"{hashlib.sha1(f.prefix).hexdigest()}"', "X-Repo-Commit": sha, "Accept-Ranges": "bytes",
                "Content-Type": "application/octet-stream"}
        mr = re.match(r"^bytes=(\d+)-(\d+)$", rng or "")
        if mr and not self.ignore_range:
            a, b = int(mr.group(1)), int(mr.group(2))
            if a >= f.size:
                return self._reply(h, 416, b"", {**base, "Content-Range": f"bytes */{f.size}"}, head, rng)
            body = f.read(a, b)
            return self._reply(h, 206, body, {**base, "Content-Range": f"bytes {a}-{a + len(body) - 1}/{f.size}"},
                               head, rng)
        if f.size > 50_000_000:  # a whole virtual shard: never expected, send a bounded slice
            body = f.read(0, 1_000_000)
        else:
            body = f.read(0, f.size - 1)
        return self._reply(h, 200, body, base, head, rng)


# --------------------------------------------------------------------------------------------------
# synthetic checkpoints
# --------------------------------------------------------------------------------------------------
def nbytes(dtype: str, shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return -(-n * BITS[dtype] // 8)


def shard(tensors: list[tuple[str, str, list[int]]], metadata: dict | None = None) -> tuple[VFile, int]:
    """A virtual safetensors file holding ``tensors`` (name, dtype, shape); returns (file, data bytes)."""
    header: dict = {"__metadata__": metadata or {"format": "mlx"}}
    off = 0
    for name, dt, shape in tensors:
        n = nbytes(dt, shape)
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    raw = json.dumps(header).encode()
    return VFile(struct.pack("<Q", len(raw)) + raw, 8 + len(raw) + off), off


def linear(name: str, out_f: int, in_f: int, q: dict | None, act: str = "BF16") -> list[tuple[str, str, list[int]]]:
    """One Linear's stored tensors the way mlx.nn.quantize writes them for ``q`` (None: unquantized)."""
    if q is None:
        return [(f"{name}.weight", act, [out_f, in_f])]
    bits, g, mode = q["bits"], q["group_size"], q.get("mode", "affine")
    w = (f"{name}.weight", "U32", [out_f, in_f * bits // 32])
    if mode == "affine":
        return [w, (f"{name}.scales", act, [out_f, in_f // g]), (f"{name}.biases", act, [out_f, in_f // g])]
    return [w, (f"{name}.scales", "U8", [out_f, in_f // g])]  # mxfp4 / nvfp4 / mxfp8: one byte per group


def llama_like(config: dict, q: dict | None, per_layer: dict[int, dict] | None = None) -> list:
    """The tensors of a llama-shaped decoder (dims from ``config``), quantized like mlx_lm.convert."""
    hd = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    h, inter, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    nh, nkv = config["num_attention_heads"], config.get("num_key_value_heads", config["num_attention_heads"])
    out = []
    out += linear("model.embed_tokens", v, h, q)
    for i in range(config["num_hidden_layers"]):
        lq = (per_layer or {}).get(i, q)
        p = f"model.layers.{i}"
        out += linear(f"{p}.self_attn.q_proj", nh * hd, h, lq)
        out += linear(f"{p}.self_attn.k_proj", nkv * hd, h, lq)
        out += linear(f"{p}.self_attn.v_proj", nkv * hd, h, lq)
        out += linear(f"{p}.self_attn.o_proj", h, nh * hd, lq)
        out += linear(f"{p}.mlp.gate_proj", inter, h, lq)
        out += linear(f"{p}.mlp.up_proj", inter, h, lq)
        out += linear(f"{p}.mlp.down_proj", h, inter, lq)
        out += [(f"{p}.input_layernorm.weight", "BF16", [h]), (f"{p}.post_attention_layernorm.weight", "BF16", [h])]
    out.append(("model.norm.weight", "BF16", [h]))
    if not config.get("tie_word_embeddings", False):
        out += linear("lm_head", v, h, q)
    return out


def checkpoint(tensors: list, n_shards: int, *, pad: int = 0) -> tuple[dict[str, VFile], int]:
    """``tensors`` split over ``n_shards`` files + an index when sharded; returns (files, total data bytes).

    ``pad`` adds that many virtual bytes after each shard's data (a shard larger than its tensors is legal
    in safetensors; the sum must still count only the tensors).
    """
    files: dict[str, VFile] = {}
    total = 0
    per = -(-len(tensors) // n_shards)
    wm = {}
    for k in range(n_shards):
        chunk = tensors[k * per:(k + 1) * per]
        name = "model.safetensors" if n_shards == 1 else f"model-{k + 1:05d}-of-{n_shards:05d}.safetensors"
        vf, data = shard(chunk)
        vf.size += pad
        files[name] = vf
        total += data
        for t in chunk:
            wm[t[0]] = name
    if n_shards > 1:
        files["model.safetensors.index.json"] = VFile(json.dumps({"metadata": {"total_size": total},
                                                                  "weight_map": wm}).encode(), 0)
        files["model.safetensors.index.json"].size = len(files["model.safetensors.index.json"].prefix)
    return files, total


def config_file(config: dict) -> VFile:
    raw = json.dumps(config).encode()
    return VFile(raw, len(raw))
