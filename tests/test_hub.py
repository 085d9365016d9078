"""Any Hub id (#15): config.json + safetensors headers by range request, against a local fake Hub.

No network: ``tests/fakehub.py`` serves real configs (tests/configs) and synthetic shards whose sizes
the test computes itself; every byte the server sends is counted, so "only headers were read" is a
measured fact, and "exact weights" is compared with the shards' data sections as served.
"""
from __future__ import annotations

import copy
import json
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("huggingface_hub")

from omlx_profiles import Estimator, load_registry  # noqa: E402
from omlx_profiles.errors import (HubAccessError, HubNotFoundError, HubUnavailableError, UnknownModelError,  # noqa: E402
                                  UnsupportedError)
from omlx_profiles.hub import resolve_hub  # noqa: E402
from omlx_profiles.estimate.safetensors import SafetensorsError  # noqa: E402
from omlx_profiles.estimate.weights import estimate_weights  # noqa: E402

from .fakehub import Hub, VFile, checkpoint, config_file, linear, llama_like, shard  # noqa: E402

CONFIGS = Path(__file__).resolve().parent / "configs"


def cfg(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


@pytest.fixture
def hub(monkeypatch, tmp_path):
    from huggingface_hub import constants

    # huggingface_hub reads HF_HUB_OFFLINE once, when first imported (mlx_lm imports it in other tests,
    # under the suite-wide HF_HUB_OFFLINE=1 of conftest.py); this process is online for these tests
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    with Hub() as h:
        monkeypatch.setenv("HF_ENDPOINT", h.url)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
        monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "5")
        yield h


@pytest.fixture(scope="module")
def reg():
    return load_registry(include_env=False)


def publish(hub: Hub, repo: str, config: dict, tensors: list, n_shards: int = 1, pad: int = 0, **kw) -> int:
    files, total = checkpoint(tensors, n_shards, pad=pad)
    files["config.json"] = config_file(config)
    files["README.md"] = VFile(b"# a model card", 14)
    hub.add(repo, files, **kw)
    return total


def header_budget(hub: Hub, repo: str) -> int:
    """Bytes a headers-only reader may receive: the model info, config, index and 8 + N of each shard."""
    r = hub.repos[repo]
    allowed = 0
    for name, f in r.files.items():
        if name.endswith(".safetensors"):
            (n,) = struct.unpack("<Q", f.prefix[:8])
            allowed += 8 + n
        elif name in ("config.json", "model.safetensors.index.json"):
            allowed += f.size
    return allowed


def info_bytes(hub: Hub) -> int:
    return sum(q.sent for q in hub.log if q.path.startswith("/api/"))


def quantized(config: dict, q: dict | None) -> dict:
    c = copy.deepcopy(config)
    if q is not None:
        c["quantization"] = dict(q)
        c["quantization_config"] = dict(q)
    return c


MODES = [
    ("affine-4bit-g64", {"group_size": 64, "bits": 4}),
    ("affine-2bit-g32", {"group_size": 32, "bits": 2}),
    ("affine-3bit-g64", {"group_size": 64, "bits": 3}),
    ("affine-5bit-g64", {"group_size": 64, "bits": 5}),
    ("affine-6bit-g128", {"group_size": 128, "bits": 6}),
    ("affine-8bit-g64", {"group_size": 64, "bits": 8}),
    ("mxfp4", {"group_size": 32, "bits": 4, "mode": "mxfp4"}),
    ("nvfp4", {"group_size": 16, "bits": 4, "mode": "nvfp4"}),
    ("mxfp8", {"group_size": 32, "bits": 8, "mode": "mxfp8"}),
    ("bf16", None),
]


@pytest.mark.parametrize("label,q", MODES, ids=[m[0] for m in MODES])
def test_exact_weights_from_headers_only(hub, reg, label, q):
    config = quantized(cfg("qwen3-0.6b"), q)
    tensors = llama_like(config, q)
    repo = f"mlx-community/Qwen3-0.6B-{label}"
    total = publish(hub, repo, config, tensors, n_shards=3)
    res = resolve_hub(repo, registry=reg)
    w = estimate_weights(res)
    assert w.exact and w.bytes == total  # the shards' data sections, as served
    assert w.files == 3 and w.tensors == len(tensors)
    # only headers: every shard request is a range inside 8 + N, and the bytes sent fit that budget
    shard_reqs = [r for r in hub.log if r.path.endswith(".safetensors")]
    assert shard_reqs and all(r.range for r in shard_reqs) and len(shard_reqs) == 6
    assert hub.sent() - info_bytes(hub) <= header_budget(hub, repo)
    assert hub.sent() < total / 100


def test_mixed_per_layer_quantization(hub, reg):
    q4 = {"group_size": 64, "bits": 4}
    q8 = {"group_size": 64, "bits": 8}
    config = quantized(cfg("qwen3-0.6b"), q4)
    per = {i: q8 for i in range(0, config["num_hidden_layers"], 4)}
    for i in per:
        for m in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                  "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"):
            config["quantization"][f"model.layers.{i}.{m}"] = q8
    tensors = llama_like(config, q4, per_layer=per)
    total = publish(hub, "mlx-community/Qwen3-0.6B-mixed_4_8", config, tensors, n_shards=2)
    w = estimate_weights(resolve_hub("mlx-community/Qwen3-0.6B-mixed_4_8", registry=reg))
    assert w.exact and w.bytes == total
    assert w.bits is None and w.mode == "mixed" and "8-bit, group 64 x 49 modules" in w.reason


def test_profile_is_the_configs_and_matches_the_registry(hub, reg):
    """The Hub path builds the same cache layout as the registry profile of the same checkpoint (which
    the live tests check against mlx-lm)."""
    config = cfg("qwen3-8b")
    q = {"group_size": 64, "bits": 4}
    publish(hub, "mlx-community/Qwen3-8B-4bit", quantized(config, q), llama_like(config, q)[:40], n_shards=1)
    res = resolve_hub("mlx-community/Qwen3-8B-4bit", registry=reg)
    ref = reg.resolve("Qwen/Qwen3-8B").profile
    for n in (1, 4096, 32768):
        assert Estimator(res.profile).kv_bytes(n) == Estimator(ref).kv_bytes(n)
    prov = res.explain()
    assert prov["num_kv_heads"].startswith("hf://mlx-community/Qwen3-8B-4bit@")
    assert "config.json" in prov["num_kv_heads"] and "safetensors headers" in prov["weights"]
    assert res.matched_by == "hub" and res.origin["commit"] == hub.repos["mlx-community/Qwen3-8B-4bit"].sha


def test_second_call_is_served_by_the_cache_even_offline(hub, reg, monkeypatch):
    config = cfg("llama-3.2-1b-instruct")
    total = publish(hub, "someone/Llama-3.2-1B-x", config, llama_like(config, None), n_shards=2)
    first = resolve_hub("someone/Llama-3.2-1B-x", registry=reg)
    n = len(hub.log)
    second = resolve_hub("someone/Llama-3.2-1B-x", registry=reg)
    assert len(hub.log) == n and second.origin["from_cache"] and not first.origin["from_cache"]
    assert estimate_weights(second).bytes == total == estimate_weights(first).bytes
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    assert estimate_weights(resolve_hub("someone/Llama-3.2-1B-x", registry=reg)).bytes == total
    with pytest.raises(HubUnavailableError, match="HF_HUB_OFFLINE"):
        resolve_hub("someone/never-read", registry=reg)
    # a commit-pinned read is cached under the commit, a revision not read before is not
    with pytest.raises(HubUnavailableError):
        resolve_hub("someone/Llama-3.2-1B-x", revision="v2", registry=reg)
    assert resolve_hub("someone/Llama-3.2-1B-x", revision=first.origin["commit"], registry=reg).origin["from_cache"]


def test_damaged_cache_record_is_a_miss(hub, reg):
    config = cfg("qwen3-0.6b")
    publish(hub, "a/b", config, llama_like(config, None)[:5])
    r = resolve_hub("a/b")
    rec = Path(r.origin["cache"]) / f"{r.origin['commit']}.json"
    rec.write_text('{"format": 1, "commit": "' + r.origin["commit"] + '", "files": [{"tensors": [["x", "Q9", [1]]]}]}')
    n = len(hub.log)
    again = resolve_hub("a/b")
    assert not again.origin["from_cache"] and len(hub.log) > n


def test_revisions_and_tokens(hub, reg, monkeypatch):
    config = cfg("qwen3-0.6b")
    total = publish(hub, "org/gated", config, llama_like(config, None)[:7], gated=True)
    with pytest.raises(HubAccessError, match="gated.*HF_TOKEN"):
        resolve_hub("org/gated")
    monkeypatch.setenv("HF_TOKEN", "bad")
    with pytest.raises(HubAccessError):
        resolve_hub("org/gated")
    monkeypatch.setenv("HF_TOKEN", "good")
    assert estimate_weights(resolve_hub("org/gated")).bytes == total
    r = hub.repos["org/gated"]
    r.revisions["v1.0"] = r.sha
    assert resolve_hub("org/gated@v1.0").origin["revision"] == "v1.0"
    with pytest.raises(HubNotFoundError, match="revision 'nope'"):
        resolve_hub("org/gated", revision="nope")


def test_missing_repo_and_files(hub, reg):
    with pytest.raises(HubNotFoundError, match="no such model repo"):
        resolve_hub("nobody/nothing")
    hub.add("org/noconfig", {"model.safetensors": shard([("w", "BF16", [2, 2])])[0]})
    with pytest.raises(HubNotFoundError, match="no config.json"):
        resolve_hub("org/noconfig")
    # the index names a shard the repo does not have
    config = cfg("qwen3-0.6b")
    files, _ = checkpoint(llama_like(config, None)[:10], 2)
    del files["model-00002-of-00002.safetensors"]
    files["config.json"] = config_file(config)
    hub.add("org/partial", files)
    with pytest.raises(SafetensorsError, match="not in the repo"):
        resolve_hub("org/partial")
    # no weights at all: a profile, weights unknown with the reason
    hub.add("org/configonly", {"config.json": config_file(config)})
    res = resolve_hub("org/configonly", registry=reg)
    assert res.checkpoint is None and "no model*.safetensors" in res.explain()["weights"]


def test_uncovered_model_type_says_which(hub):
    hub.add("org/whisper", {"config.json": config_file({"model_type": "whisper", "d_model": 512})})
    with pytest.raises(UnsupportedError, match="whisper"):
        resolve_hub("org/whisper")


def test_no_network_and_timeout(hub, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(HubUnavailableError, match="cannot reach"):
        resolve_hub("org/any")
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "0.3")
    hub.delay = 1.0
    t = time.perf_counter()
    with pytest.raises(HubUnavailableError, match="timed out"):
        resolve_hub("org/any")
    assert time.perf_counter() - t < 5


def _lying(hub: Hub, repo: str, blob: bytes, size: int | None = None):
    hub.add(repo, {"config.json": config_file(cfg("qwen3-0.6b")),
                   "model.safetensors": VFile(blob, len(blob) if size is None else size)})


@pytest.mark.parametrize("case,blob,size,msg", [
    ("truncated", b"\x10\x00\x00", None, "truncated"),
    ("beyond-file", struct.pack("<Q", 5000) + b"{}", None, "runs past the end"),
    ("negative", struct.pack("<q", -8) + b"{}", None, "exceeds"),
    ("huge", struct.pack("<Q", 10**12) + b"{}", 2 * 10**12, "exceeds"),
    ("not-json", struct.pack("<Q", 6) + b"{nope}", None, "not valid JSON"),
    ("not-utf8", struct.pack("<Q", 4) + b"\xff\xfe\xfd\xfc", None, "UTF-8"),
    ("offsets-beyond", struct.pack("<Q", 64) + json.dumps(
        {"w": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}}).encode().ljust(64), 8 + 64 + 4, "data ends"),
    ("shape-vs-offsets", struct.pack("<Q", 64) + json.dumps(
        {"w": {"dtype": "BF16", "shape": [8], "data_offsets": [0, 8]}}).encode().ljust(64), 8 + 64 + 8, "needs 16"),
])
def test_lying_headers_are_refused_without_reading_data(hub, case, blob, size, msg):
    _lying(hub, f"liar/{case}", blob, size)
    with pytest.raises(SafetensorsError, match=msg) as e:
        resolve_hub(f"liar/{case}")
    assert f"hf://liar/{case}@" in str(e.value) and "model.safetensors" in str(e.value)
    shard_bytes = sum(r.sent for r in hub.log if r.path.endswith(".safetensors"))
    assert shard_bytes <= 8 + min(len(blob), 10_000)


def test_server_ignoring_range_is_refused(hub):
    config = cfg("qwen3-0.6b")
    publish(hub, "org/norange", config, llama_like(config, None)[:3])
    hub.ignore_range = True
    with pytest.raises(SafetensorsError, match="Content-Range|ignored"):
        resolve_hub("org/norange")


def test_thousand_shard_index_is_fast(hub, reg):
    config = cfg("qwen3-0.6b")
    tensors = [(f"model.layers.{i}.t", "BF16", [16, 8]) for i in range(2000)]
    total = publish(hub, "org/many", config, tensors, n_shards=1000)
    t = time.perf_counter()
    res = resolve_hub("org/many")
    dt = time.perf_counter() - t
    w = estimate_weights(res)
    assert w.exact and w.bytes == total and w.files == 1000
    shard_reqs = [r for r in hub.log if r.path.endswith(".safetensors")]
    assert len(shard_reqs) == 2000 and all(r.range for r in shard_reqs)
    assert dt < 30, f"1,000 shard headers took {dt:.1f} s"
    seen = len(hub.log)
    t = time.process_time()
    again = resolve_hub("org/many")
    cpu = time.process_time() - t
    # from the cache: no shard header is read again (the property; a wall-time bound measured the machine's load)
    assert not [r.path for r in hub.log[seen:] if r.path.endswith(".safetensors")], hub.log[seen:][:5]
    assert estimate_weights(again).bytes == total and cpu < 1.0, f"{cpu:.2f} s of CPU"


def test_registry_unknown_id_falls_back_to_the_hub_in_the_api(hub, monkeypatch):
    import omlx_profiles

    config = cfg("smollm3-3b")
    publish(hub, "someone/SmolLM3-3B-custom-4bit", config, llama_like(config, None)[:4])
    res = omlx_profiles.resolve("someone/SmolLM3-3B-custom-4bit")
    assert res.matched_by == "hub"
    assert omlx_profiles.resolve("Qwen/Qwen3-8B").matched_by == "id"  # registry first, no request
    with pytest.raises(UnknownModelError, match="not on the Hub either"):
        omlx_profiles.resolve("someone/not-there")
    with pytest.raises(UnknownModelError):
        omlx_profiles.resolve("someone/not-there", hub=False)


# --------------------------------------------------------------------------------------------------
# the CLI, as a user runs it (subprocess: a fresh interpreter, its own environment)
# --------------------------------------------------------------------------------------------------
def _cli(env: dict, *argv: str) -> tuple[int, str, str, float]:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "omlx_profiles.cli.main", *argv], capture_output=True, text=True,
                       env=env, timeout=120)
    return p.returncode, p.stdout, p.stderr, time.perf_counter() - t


def test_cli_estimate_hub_id_then_offline(hub, tmp_path):
    config = cfg("qwen3-30b-a3b")
    q = {"group_size": 64, "bits": 4}
    tensors = [("model.embed_tokens.weight", "U32", [151936, 256])] + linear("lm_head", 151936, 2048, q)
    repo = "mlx-community/Qwen3-30B-A3B-Instruct-2507-4bit"
    total = publish(hub, repo, quantized(config, q), tensors, n_shards=4)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_ENDPOINT=hub.url, HF_HUB_CACHE=str(tmp_path / "cli-cache"))
    code, out, err, _ = _cli(env, "estimate", repo, "--tokens", "32k", "--hub", "--json")
    assert code == 0, err
    online = json.loads(out)
    assert online["weights_bytes"] == total
    n = len(hub.log)
    env["HF_HUB_OFFLINE"] = "1"
    env["HF_ENDPOINT"] = "http://127.0.0.1:9"
    code, out, err, t_hub = _cli(env, "estimate", repo, "--tokens", "32k", "--json")  # no --hub: cache fallback
    assert code == 0, err
    assert json.loads(out)["weights_bytes"] == total and len(hub.log) == n
    assert json.loads(out)["kv_bytes"] == online["kv_bytes"]
    code, out, err, t_reg = _cli(env, "estimate", "Qwen/Qwen3-8B", "--tokens", "32k", "--json")
    assert code == 0, err
    # the same order of time as a registry id (interpreter start dominates both)
    assert t_hub < 2 * t_reg + 1.0, (t_hub, t_reg)
    code, out, err, _ = _cli(env, "fit", repo, "--budget", "64GiB", "--json")
    assert code in (0, 1), err
    fit = json.loads(out)
    assert fit["weights_bytes"] == total and fit["weights"]["exact"] and fit["weights"]["files"] == 4
    png = tmp_path / "c.png"
    code, out, err, _ = _cli(env, "chart", repo, "--budget", "64GiB", "-o", str(png))
    assert code in (0, 1) and png.is_file(), err
    code, out, err, _ = _cli(env, "resolve", repo, "--explain")
    assert code == 0 and "no network" in out and "safetensors headers" in out and "hf://" in out
    code, out, err, _ = _cli(env, "estimate", "someone/never-read", "--tokens", "1k")
    assert code == 2 and "HF_HUB_OFFLINE" in err and "Traceback" not in err and "internal error" not in err


def test_fp8_checkpoint_is_counted_dequantized_never_under(hub, reg):
    """mlx-lm dequantizes block-fp8 checkpoints to bf16 in the model's sanitize (deepseek_v3.py): the stored
    sum (1 byte per weight) would under-count; the answer is an upper bound at 2 bytes, labelled so."""
    config = copy.deepcopy(cfg("qwen3-0.6b"))
    config["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128],
                                     "activation_scheme": "dynamic"}
    tensors, f8, other = [], 0, 0
    for t in llama_like(config, None):
        name, dt, shape = t
        if len(shape) == 2 and "embed" not in name:
            tensors.append((name, "F8_E4M3", shape))
            tensors.append((name + "_scale_inv", "F32", [-(-shape[0] // 128), -(-shape[1] // 128)]))
            f8 += shape[0] * shape[1]
        else:
            tensors.append(t)
            n = 1
            for d in shape:
                n *= d
            other += 2 * n
    stored = publish(hub, "Qwen/Qwen3-0.6B-FP8", config, tensors, n_shards=2)
    w = estimate_weights(resolve_hub("Qwen/Qwen3-0.6B-FP8", registry=reg))
    assert w.bytes == 2 * f8 + other and w.bytes > stored
    assert not w.exact and "upper bound" in w.reason and w.bits == 16


def test_cli_sentences_for_hub_failures(hub, monkeypatch):
    from .conftest import run_cli

    config = cfg("qwen3-0.6b")
    publish(hub, "org/gated", config, llama_like(config, None)[:3], gated=True)
    code, out, err = run_cli("estimate", "org/gated", "--tokens", "1k")
    assert code == 2 and "gated repo" in err and "HF_TOKEN" in err
    code, out, err = run_cli("estimate", "nobody/nothing", "--tokens", "1k")
    assert code == 2 and "not on the Hub either" in err
    code, out, err = run_cli("resolve", "Qwen/Qwen3-8B", "--revision", "nope")
    assert code == 2 and "no such model repo" in err
    hub.add("org/whisper", {"config.json": config_file({"model_type": "whisper", "d_model": 8})})
    code, out, err = run_cli("estimate", "org/whisper", "--tokens", "1k")
    assert code == 1 and err.startswith("unsupported") and "whisper" in err
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    code, out, err = run_cli("estimate", "org/elsewhere", "--tokens", "1k")
    assert code == 2 and "cannot reach" in err
    for e in (err,):
        assert "Traceback" not in e and "internal error" not in e
