"""Weights from safetensors headers (exact) and from a profile's parameter count (approximate).

Truth here is the bytes of the arrays written into real safetensors files (numpy ``nbytes``, and
files written by the ``safetensors`` package and by MLX itself where installed), never a number
copied from our own output.
"""
from __future__ import annotations

import json
import struct
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from omlx_profiles import load_registry
from omlx_profiles.errors import InputError
from omlx_profiles.estimate.safetensors import (
    MAX_HEADER_BYTES, SafetensorsError, read_checkpoint, read_header, tensor_nbytes,
)
from omlx_profiles.estimate.weights import Quantization, WeightsInfo, config_quantization, estimate_weights

_NP_DTYPE = {np.float32: "F32", np.float16: "F16", np.int32: "I32", np.uint32: "U32", np.int8: "I8",
             np.uint8: "U8", np.int64: "I64", np.float64: "F64", np.bool_: "BOOL"}


def write_safetensors(path: Path, tensors: dict[str, np.ndarray], metadata: dict | None = None,
                      bf16: set[str] = frozenset()) -> int:
    """A spec-conformant writer (header JSON, 8-byte aligned, then the raw data). Returns data bytes.

    ``bf16`` names tensors to store as BF16 (given as uint16 arrays, the raw bf16 bit patterns).
    """
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        dt = "BF16" if name in bf16 else _NP_DTYPE[arr.dtype.type]
        data = arr.tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    return off


def _tiny_tensors(seed=0, layers=2, hidden=64, inter=128, vocab=96):
    rng = np.random.default_rng(seed)
    bf = lambda *s: rng.integers(0, 2**16, size=s, dtype=np.uint16)  # noqa: E731  (raw bf16 bits)
    t, names = {}, set()
    t["model.embed_tokens.weight"] = bf(vocab, hidden)
    for i in range(layers):
        for k, shape in {"self_attn.q_proj": (hidden, hidden), "self_attn.k_proj": (hidden // 2, hidden),
                         "self_attn.v_proj": (hidden // 2, hidden), "self_attn.o_proj": (hidden, hidden),
                         "mlp.gate_proj": (inter, hidden), "mlp.up_proj": (inter, hidden),
                         "mlp.down_proj": (hidden, inter)}.items():
            t[f"model.layers.{i}.{k}.weight"] = bf(*shape)
        t[f"model.layers.{i}.input_layernorm.weight"] = bf(hidden)
        t[f"model.layers.{i}.post_attention_layernorm.weight"] = bf(hidden)
    t["model.norm.weight"] = bf(hidden)
    t["lm_head.weight"] = bf(vocab, hidden)
    t["extra.fp32_table"] = rng.standard_normal((3, 5)).astype(np.float32)
    names = {k for k in t if k != "extra.fp32_table"}
    return t, names


@pytest.fixture(scope="module")
def reg():
    return load_registry()


@pytest.fixture
def llama(reg):
    return reg.resolve("meta-llama/Llama-3.1-8B-Instruct")


def model_dir(tmp_path: Path, shards: int = 1, config: dict | None = None) -> tuple[Path, int]:
    d = tmp_path / f"model-{shards}"
    d.mkdir()
    tensors, bf = _tiny_tensors()
    expected = sum(a.nbytes for a in tensors.values())
    (d / "config.json").write_text(json.dumps(config or {"model_type": "llama"}))
    if shards == 1:
        write_safetensors(d / "model.safetensors", tensors, {"format": "pt"}, bf16=bf)
        return d, expected
    items = list(tensors.items())
    weight_map = {}
    for s in range(shards):
        part = dict(items[s::shards])
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        write_safetensors(d / fname, part, bf16=bf & part.keys())
        weight_map.update({k: fname for k in part})
    (d / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": expected}, "weight_map": weight_map}))
    return d, expected


# ---------------------------------------------------------------------------- exact, from headers
def test_single_file_exact(tmp_path, llama):
    d, expected = model_dir(tmp_path)
    w = estimate_weights(llama, model_dir=d)
    assert (w.bytes, w.exact, w.label) == (expected, True, "exact")
    assert w.files == 1 and w.tensors == len(_tiny_tensors()[0])
    assert w.params == sum(a.size for a in _tiny_tensors()[0].values())
    assert w.stored_dtypes == {"BF16": expected - 60, "F32": 60}


def test_sharded_exact(tmp_path, llama):
    d, expected = model_dir(tmp_path, shards=3)
    ck = read_checkpoint(d)
    assert len(ck.files) == 3 and ck.index is not None
    w = estimate_weights(llama, model_dir=d)
    assert (w.bytes, w.exact, w.files) == (expected, True, 3)


def test_header_only_is_read(tmp_path, monkeypatch):
    """The tensors are never read: a file whose data region is unreadable still gives its size."""
    d, expected = model_dir(tmp_path)
    f = d / "model.safetensors"
    (n,) = struct.unpack("<Q", f.read_bytes()[:8])
    import builtins

    real_open = builtins.open
    reads = []

    class Spy:
        def __init__(self, fh):
            self.fh = fh

        def read(self, k=-1):
            reads.append(k)
            return self.fh.read(k)

        def __getattr__(self, a):
            return getattr(self.fh, a)

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.fh.close()

    monkeypatch.setattr(builtins, "open", lambda p, m="r", *a, **k: Spy(real_open(p, m, *a, **k)))
    assert read_header(f).nbytes == expected
    assert reads == [8, n]


def test_matches_safetensors_package(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    rng = np.random.default_rng(1)
    arrays = {"a": rng.standard_normal((7, 13)).astype(np.float32), "b": np.arange(10, dtype=np.int64),
              "c": np.zeros((0, 4), dtype=np.float16), "d": np.ones((3, 3, 3), dtype=np.uint8)}
    st.save_file(arrays, str(tmp_path / "model.safetensors"))
    h = read_header(tmp_path / "model.safetensors")
    assert h.nbytes == sum(a.nbytes for a in arrays.values())
    assert {t.name: t.shape for t in h.tensors} == {k: a.shape for k, a in arrays.items()}


def test_mlx_quantized_checkpoint_exact_and_formula():
    """A checkpoint written by MLX (mx.quantize + mx.save_safetensors): the headers give exactly the
    bytes MLX holds, and the profile formula (bits/8 + 2*dtype/group per parameter) matches them."""
    mx = pytest.importorskip("mlx.core")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        arrays, params, norms = {}, 0, 0
        for i, (o, n) in enumerate([(128, 256), (256, 128), (64, 512)]):
            w = mx.random.normal((o, n)).astype(mx.bfloat16)
            q, s, b = mx.quantize(w, group_size=64, bits=4)
            arrays.update({f"l{i}.weight": q, f"l{i}.scales": s, f"l{i}.biases": b})
            params += o * n
        arrays["norm.weight"] = mx.ones((256,), dtype=mx.bfloat16)
        norms = 256
        mx.save_safetensors(str(d / "model.safetensors"), arrays)
        (d / "config.json").write_text(json.dumps({"quantization": {"group_size": 64, "bits": 4}}))
        held = sum(a.nbytes for a in arrays.values())
        ck = read_checkpoint(d)
        assert ck.nbytes == held
        assert Quantization(4, 64).nbytes(params, 2) + norms * 2 == held


def test_asked_bits_on_unquantized_dir_uses_real_shapes(tmp_path, llama):
    d, expected = model_dir(tmp_path)
    # no group asked: the smallest group MLX's affine quantize takes (32: most scales and biases), the bound
    for group, expect_group in ((None, 32), (64, 64), (128, 128)):
        w = estimate_weights(llama, bits=4, model_dir=d, group_size=group)
        assert not w.exact and w.bits == 4 and w.group_size == expect_group
        tensors, _ = _tiny_tensors()
        want = 0
        for name, a in tensors.items():
            if a.ndim >= 2 and name.endswith(".weight") and a.shape[-1] % expect_group == 0:
                want += a.size // 2 + (a.size // expect_group) * 4
            else:
                want += a.nbytes
        assert w.bytes == want
    # bf16 asked of a bf16 checkpoint is the checkpoint itself: exact
    assert estimate_weights(llama, bits=16, model_dir=d).exact


def test_quantized_dir_at_other_bits_is_unknown(tmp_path, llama):
    d = tmp_path / "q"
    d.mkdir()
    write_safetensors(d / "model.safetensors", {"l.weight": np.zeros((8, 8), np.uint32),
                                                "l.scales": np.zeros((8, 1), np.float16)})
    (d / "config.json").write_text(json.dumps({"quantization": {"group_size": 64, "bits": 4}}))
    assert estimate_weights(llama, bits=4, model_dir=d).exact
    w = estimate_weights(llama, bits=8, model_dir=d)
    assert w.bytes is None and "4-bit" in w.reason


def test_local_dir_found_from_resolution(tmp_path, llama):
    d, expected = model_dir(tmp_path)
    res = replace(llama, matched_by="directory", matched=str(d), query=str(d))
    assert estimate_weights(res).bytes == expected


# ---------------------------------------------------------------------------- hostile files
def _raw(tmp_path, data: bytes) -> Path:
    p = tmp_path / "model.safetensors"
    p.write_bytes(data)
    return p


@pytest.mark.parametrize("data, words", [
    (b"", "truncated"),
    (b"\x01\x02", "truncated"),
    (struct.pack("<Q", MAX_HEADER_BYTES + 1), "exceeds"),
    (struct.pack("<Q", 2**64 - 1), "exceeds"),
    (struct.pack("<Q", 100) + b"{}", "past the end"),
    (struct.pack("<Q", 5) + b"{nope", "not valid JSON"),
    (struct.pack("<Q", 4) + b"\xff\xfe{}", "not UTF-8"),
    (struct.pack("<Q", 2) + b"[]", "JSON object"),
    (struct.pack("<Q", 4000) + b"[" * 2000 + b"]" * 2000, "JSON"),
])
def test_hostile_headers(tmp_path, data, words):
    with pytest.raises(SafetensorsError, match=words) as e:
        read_header(_raw(tmp_path, data))
    assert "model.safetensors" in str(e.value)
    assert isinstance(e.value, InputError)


def _one(entry: dict, data_len: int = 16) -> bytes:
    h = json.dumps({"t": entry}).encode()
    return struct.pack("<Q", len(h)) + h + b"\0" * data_len


@pytest.mark.parametrize("entry, words", [
    ({"dtype": "Q9", "shape": [2], "data_offsets": [0, 2]}, "unknown dtype"),
    ({"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}, "shape"),
    ({"dtype": "F32", "shape": [True], "data_offsets": [0, 4]}, "shape"),
    ({"dtype": "F32", "shape": "2", "data_offsets": [0, 8]}, "shape"),
    ({"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}, "needs 8"),
    ({"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}, "data_offsets"),
    ({"dtype": "F32", "shape": [8], "data_offsets": [0, 32]}, "truncated"),
    ({"dtype": "F32", "shape": [10**30], "data_offsets": [0, 8]}, "needs"),
    ({"dtype": "F32"}, "shape"),
    ("not an object", "entry must be"),
])
def test_hostile_entries(tmp_path, entry, words):
    with pytest.raises(SafetensorsError, match=words) as e:
        read_header(_raw(tmp_path, _one(entry)))
    assert "'t'" in str(e.value)


def test_duplicate_tensor_names(tmp_path):
    h = b'{"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}, "a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}'
    with pytest.raises(SafetensorsError, match="twice"):
        read_header(_raw(tmp_path, struct.pack("<Q", len(h)) + h + b"\0"))


def test_hostile_index(tmp_path, llama):
    d, _ = model_dir(tmp_path, shards=2)
    idx = d / "model.safetensors.index.json"
    good = json.loads(idx.read_text())
    for weight_map, words in [({"x": "../../etc/passwd"}, "file name"), ({"x": "/abs/model-1.safetensors"}, "file name"),
                              ({"x": 3}, "file name"), ({"x": "model-00009-of-00009.safetensors"}, "missing"),
                              ({"x": "model-00001-of-00002.safetensors"}, "does not hold")]:
        idx.write_text(json.dumps({"weight_map": weight_map}))
        with pytest.raises(SafetensorsError, match=words):
            estimate_weights(llama, model_dir=d)
    for text in ("[1, 2]", "{not json", '{"weight_map": []}'):
        idx.write_text(text)
        with pytest.raises(SafetensorsError, match="index.json"):
            read_checkpoint(d)
    idx.write_text(json.dumps(good))
    assert read_checkpoint(d).nbytes > 0


def test_no_weight_files_falls_back_to_profile(tmp_path, llama):
    (tmp_path / "config.json").write_text(json.dumps({"quantization": {"group_size": 32, "bits": 8}}))
    w = estimate_weights(llama, model_dir=tmp_path)
    assert not w.exact and (w.bits, w.group_size) == (8, 32) and "config.json" in w.reason


# ---------------------------------------------------------------------------- approximate, from a profile
def test_profile_bf16_and_quantized(reg, llama):
    p = llama.profile.weights.params
    w = estimate_weights(llama)
    assert (w.bytes, w.exact, w.label) == (2 * p, False, "approximate")
    # "-4bit" names no group: counted at group 32, the smallest MLX's affine quantize takes (an upper bound over
    # mlx-lm's default 64, which a --q-group-size 32 conversion does not follow)
    q4 = estimate_weights(reg.resolve("mlx-community/Llama-3.1-8B-Instruct-4bit"))
    # kept in bf16, bounded from the dims (Llama-3.1-8B: h 4096, 32 blocks, 32 / 8 heads of 128, MLP 14336): per
    # block four norms, q/k norms, q/k/v/o biases, MLP biases; and the final norm
    norms = 32 * (4 * 4096 + 2 * 128 + (32 + 2 * 8) * 128 + 4096 + 2 * 14336 + 4096) + 4096
    groups = -(-(p - norms) // 32)
    assert q4.bytes == (p - norms) // 2 + groups * 4 + norms * 2
    assert (q4.bits, q4.group_size, q4.mode) == (4, 32, "affine") and "not stated" in q4.reason
    # within a few per mille of 0.625 bytes per parameter
    assert abs(q4.bytes / p - 0.625) < 0.001
    q8 = estimate_weights(reg.resolve("mlx-community/Llama-3.1-8B-Instruct-8bit"))
    assert abs(q8.bytes / p - 1.125) < 0.001
    # a group the id states is taken as stated
    g64 = estimate_weights(reg.resolve("mlx-community/Llama-3.1-8B-Instruct-4bit-g64"))
    assert g64.group_size == 64 and abs(g64.bytes / p - 0.5625) < 0.001
    mx4 = estimate_weights(reg.resolve("mlx-community/Llama-3.1-8B-Instruct-mxfp4"))
    assert (mx4.mode, mx4.group_size) == ("mxfp4", 32) and abs(mx4.bytes / p - (0.5 + 1 / 32)) < 0.001
    assert estimate_weights(llama, bits=4, group_size=32).group_size == 32


def test_profile_measured_bytes_exact_only_for_its_bits(llama):
    prof = replace(llama.profile, weights=llama.profile.weights.model_copy(update={"bytes": 16_000_000_000}))
    res = replace(llama, profile=prof)
    assert estimate_weights(res).exact and estimate_weights(res).bytes == 16_000_000_000
    assert not estimate_weights(res, bits=4).exact


def test_no_params_is_unknown_not_a_guess(llama):
    res = replace(llama, profile=replace(llama.profile, weights=None))
    w = estimate_weights(res)
    assert w.bytes is None and not w.exact and w.label == "unknown" and "weights.params" in w.reason
    assert w.as_dict()["bytes"] is None


@pytest.mark.parametrize("bits", [1, 7, 0, True, "4", 4.0])
def test_bad_bits(llama, bits):
    with pytest.raises(InputError):
        estimate_weights(llama, bits=bits)


def test_config_quantization_shapes():
    assert config_quantization({"quantization": {"bits": 3, "group_size": 32}}) == Quantization(3, 32, "affine")
    assert config_quantization({"quantization_config": {"mode": "mxfp4", "bits": 4}}) == Quantization(4, 32, "mxfp4")
    assert config_quantization({"quantization_config": {"quant_method": "fp8", "bits": 8}}) is None
    # an MLX block mlx-lm could not load is an error naming the key, never silently dropped (#18)
    for bad in ({"group_size": 64}, "x", {"bits": 3.5}, {"bits": True}, {"bits": 1e30}, {"bits": 4, "group_size": 0},
                {"bits": 4, "group_size": -64}, {"bits": 4, "mode": "int4"}, {"bits": 8, "mode": "mxfp4"},
                {"bits": 4, "model.layers.0.mlp": {"bits": 3.5}}, {"bits": 4, "model.layers.0.mlp": "8bit"}):
        with pytest.raises(InputError, match="quantization"):
            config_quantization({"quantization": bad})
    mixed = config_quantization({"quantization": {"bits": 4, "group_size": 64, "lm_head": {"bits": 8, "group_size": 64},
                                                  "model.embed_tokens": False}})
    assert mixed == Quantization(4, 64, "affine", overrides=2) and "2 module override(s)" in mixed.label()


def test_tensor_nbytes_subbyte():
    assert tensor_nbytes("F4", (3, 2)) == 3
    assert tensor_nbytes("F6_E2M3", (4,)) == 3
    assert tensor_nbytes("BF16", ()) == 2


def test_weights_info_dict_keys():
    d = WeightsInfo(1, True, "x").as_dict()
    assert list(d) == ["bytes", "exact", "label", "source", "reason", "params", "bits", "group_size", "mode",
                       "files", "tensors", "directory"]


def test_approximate_covers_a_mixed_precision_checkpoint():
    """Issue 14: the approximate weights (parameter count x quantization) must not fall under the exact bytes of
    the checkpoint it stands for. An MLX checkpoint with mlx-lm's mixed precision: experts at 4 bits, the MoE
    router kept at 8 bits (a per-layer ``quantization`` override in config.json), norms in bf16. The profile
    formula with the same parameter count: >= the header bytes."""
    from types import SimpleNamespace

    from omlx_profiles.estimate.weights.from_profile import from_profile as _from_profile

    mx = pytest.importorskip("mlx.core")
    import tempfile

    h, E = 256, 64
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        arrays, params = {}, 0
        for i, (o, n, bits) in enumerate([(512, h, 4), (h, 512, 4), (E, h, 8), (128, h, 4)]):
            w = mx.random.normal((o, n)).astype(mx.bfloat16)
            q, s, b = mx.quantize(w, group_size=64, bits=bits)
            name = "model.layers.0.mlp.gate" if bits == 8 else f"model.layers.0.l{i}"
            arrays.update({f"{name}.weight": q, f"{name}.scales": s, f"{name}.biases": b})
            params += o * n
        arrays["model.norm.weight"] = mx.ones((h,), dtype=mx.bfloat16)
        params += h
        mx.save_safetensors(str(d / "model.safetensors"), arrays)
        (d / "config.json").write_text(json.dumps({"quantization": {
            "group_size": 64, "bits": 4, "model.layers.0.mlp.gate": {"group_size": 64, "bits": 8}}}))
        exact = read_checkpoint(d).nbytes
    prof = SimpleNamespace(name="mixed", dtype="bf16", hidden_size=h, num_layers=1, vocab_size=None,
                           tie_word_embeddings=None, moe=SimpleNamespace(num_experts=E, first_dense_layers=0),
                           weights=SimpleNamespace(params=params, bytes=None, bits=None, embedding_params=None))
    approx = _from_profile(prof, (Quantization(4, 64), "from config.json quantization"), explicit=False)
    assert approx.bytes >= exact, (approx.bytes, exact)
    assert "router" in approx.reason
    # without the router term the formula would be under: the 8-bit gate costs more than 4-bit
    no_router = Quantization(4, 64).nbytes(params - 3 * h, 2) + 3 * h * 2
    assert no_router < exact
