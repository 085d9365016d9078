"""Read a safetensors file's header, never its tensors: names, dtypes, shapes, and their byte sizes.

The format (https://github.com/huggingface/safetensors): 8 bytes, a little-endian unsigned 64-bit
length ``N``; then ``N`` bytes of UTF-8 JSON mapping each tensor name to ``{"dtype", "shape",
"data_offsets": [begin, end]}`` (plus an optional ``"__metadata__"`` of strings); then the data.

A checkpoint's weight bytes are the sum over its tensors of ``prod(shape) * element size``. For an
MLX-quantized checkpoint that sum already is the truth: the packed ``uint32`` weights, and the
``scales`` / ``biases`` tensors, are stored exactly as MLX will hold them.

Files come from anywhere (a download, a contributor's directory), so every read is bounded and every
claim the header makes is checked against the file: a header larger than ``MAX_HEADER_BYTES`` (the
safetensors library's own limit) or than the file, bad UTF-8 / JSON, a tensor whose offsets disagree
with its shape and dtype or run past the end of the file, all raise ``SafetensorsError`` naming the
file and the tensor. Nothing here imports numpy, mlx or the safetensors package.
"""
from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError

#: The safetensors library refuses headers over 100 MB; so do we (a real 1000-tensor header is ~100 KB).
MAX_HEADER_BYTES = 100_000_000
#: Index files (``model.safetensors.index.json``) are a weight map of names: a few MB at most.
MAX_INDEX_BYTES = 50_000_000
#: Shards of one checkpoint; more than this is not a model directory we should be walking.
MAX_SHARDS = 10_000

#: Element sizes in *bits* (the sub-byte float formats F4 / F6 are packed).
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32,
    "I64": 64, "U64": 64, "F64": 64, "C64": 64,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}


class SafetensorsError(InputError):
    """A safetensors file or index cannot be read as one: says which file and what is wrong."""


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int


@dataclass(frozen=True)
class FileHeader:
    path: Path
    header_bytes: int
    tensors: tuple[TensorInfo, ...]
    metadata: dict

    @property
    def nbytes(self) -> int:
        """Bytes of all tensors in the file (what they occupy once loaded; the header is not loaded)."""
        return sum(t.nbytes for t in self.tensors)


class _DuplicateKey(Exception):
    pass


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(k)
        out[k] = v
    return out


def tensor_nbytes(dtype: str, shape: tuple[int, ...]) -> int:
    bits = DTYPE_BITS[dtype]
    n = 1
    for d in shape:
        n *= d
    total = n * bits
    return total // 8 if total % 8 == 0 else -(-total // 8)


def read_header(path: str | os.PathLike) -> FileHeader:
    """Parse and check one ``.safetensors`` file's header; reads ``8 + N`` bytes, never the tensors."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            if len(head) < 8:
                raise SafetensorsError(f"{p}: truncated safetensors file ({size} bytes; the 8-byte header length is missing)")
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER_BYTES:
                raise SafetensorsError(
                    f"{p}: header length {n} bytes exceeds the {MAX_HEADER_BYTES}-byte limit (not a safetensors file?)")
            if n > size - 8:
                raise SafetensorsError(f"{p}: header length {n} bytes runs past the end of the {size}-byte file (truncated?)")
            raw = f.read(n)
    except OSError as e:
        raise SafetensorsError(f"{p}: cannot read ({e.strerror or e})") from None
    if len(raw) != n:
        raise SafetensorsError(f"{p}: truncated header ({len(raw)} of {n} bytes)")
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except UnicodeDecodeError as e:
        raise SafetensorsError(f"{p}: header is not UTF-8 (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise SafetensorsError(f"{p}: header is not valid JSON ({e.msg} at byte {e.pos})") from None
    except RecursionError:
        raise SafetensorsError(f"{p}: header JSON is nested too deeply") from None
    except _DuplicateKey as e:
        raise SafetensorsError(f"{p}: header names tensor {e.args[0]!r} twice") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{p}: header must be a JSON object, got {type(header).__name__}")
    data_len = size - 8 - n
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict):
        raise SafetensorsError(f"{p}: __metadata__ must be an object of strings")
    tensors = []
    for name, entry in header.items():
        tensors.append(_tensor(p, name, entry, data_len))
    return FileHeader(p, n, tuple(tensors), metadata)


def _tensor(p: Path, name: str, entry: object, data_len: int) -> TensorInfo:
    where = f"{p}: tensor {name!r}"
    if not isinstance(entry, dict):
        raise SafetensorsError(f"{where}: entry must be an object with dtype, shape, data_offsets")
    dtype = entry.get("dtype")
    if dtype not in DTYPE_BITS:
        raise SafetensorsError(f"{where}: unknown dtype {dtype!r} (known: {', '.join(sorted(DTYPE_BITS))})")
    shape = entry.get("shape")
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise SafetensorsError(f"{where}: shape must be a list of non-negative integers, got {shape!r}")
    if len(shape) > 64:
        raise SafetensorsError(f"{where}: shape has {len(shape)} dimensions")
    offsets = entry.get("data_offsets")
    if (not isinstance(offsets, list) or len(offsets) != 2
            or not all(type(o) is int and o >= 0 for o in offsets) or offsets[0] > offsets[1]):
        raise SafetensorsError(f"{where}: data_offsets must be [begin, end] with 0 <= begin <= end, got {offsets!r}")
    nbytes = tensor_nbytes(dtype, tuple(shape))
    if offsets[1] - offsets[0] != nbytes:
        raise SafetensorsError(
            f"{where}: data_offsets span {offsets[1] - offsets[0]} bytes but {dtype}{list(shape)} needs {nbytes}")
    if offsets[1] > data_len:
        raise SafetensorsError(
            f"{where}: data ends at byte {offsets[1]} but the file holds {data_len} data bytes (truncated?)")
    return TensorInfo(name, dtype, tuple(shape), nbytes)


# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CheckpointHeaders:
    """Every weight file of a model directory, the way mlx-lm would load it."""

    directory: Path
    files: tuple[FileHeader, ...]
    index: Path | None

    @property
    def nbytes(self) -> int:
        return sum(f.nbytes for f in self.files)

    @property
    def tensor_count(self) -> int:
        return sum(len(f.tensors) for f in self.files)

    def dtypes(self) -> dict[str, int]:
        """Bytes per stored dtype, e.g. ``{"U32": ..., "BF16": ...}`` for a 4-bit MLX checkpoint."""
        out: dict[str, int] = {}
        for f in self.files:
            for t in f.tensors:
                out[t.dtype] = out.get(t.dtype, 0) + t.nbytes
        return out


INDEX_NAME = "model.safetensors.index.json"


def weight_files(directory: str | os.PathLike) -> list[Path]:
    """``model*.safetensors`` in the directory: exactly the files ``mlx_lm.utils.load_model`` globs."""
    d = Path(directory)
    return sorted(p for p in d.glob("model*.safetensors") if p.is_file())


def read_checkpoint(directory: str | os.PathLike) -> CheckpointHeaders:
    """Headers of every weight file of a local model directory.

    mlx-lm loads ``model*.safetensors`` (all of them, index or not). When
    ``model.safetensors.index.json`` is present it must agree: every shard it names must exist (a
    missing shard means a partial download, and the sum would be short), and every tensor it maps must
    be in the shard it names. Raises ``SafetensorsError`` if there is nothing to read.
    """
    d = Path(directory)
    if not d.is_dir():
        raise SafetensorsError(f"{d}: not a directory")
    files = weight_files(d)
    index_path = d / INDEX_NAME
    weight_map = _read_index(index_path) if index_path.is_file() else None
    if weight_map is not None:
        names = {p.name for p in files}
        missing = sorted(set(weight_map.values()) - names)
        absent = [m for m in missing if not (d / m).is_file()]
        if absent:
            raise SafetensorsError(
                f"{index_path}: shard(s) {', '.join(absent[:3])}{' ...' if len(absent) > 3 else ''} "
                "listed in the index are missing from the directory (partial download?)")
        if missing:
            raise SafetensorsError(
                f"{index_path}: shard(s) {', '.join(missing[:3])} do not match model*.safetensors, "
                "the only files mlx-lm loads")
    if not files:
        raise SafetensorsError(f"{d}: no model*.safetensors files (mlx-lm loads only those)")
    if len(files) > MAX_SHARDS:
        raise SafetensorsError(f"{d}: {len(files)} weight files; at most {MAX_SHARDS} are read")
    headers = tuple(read_header(p) for p in files)
    if weight_map is not None:
        by_file = {h.path.name: {t.name for t in h.tensors} for h in headers}
        for tensor, fname in weight_map.items():
            if tensor not in by_file.get(fname, ()):
                raise SafetensorsError(f"{index_path}: tensor {tensor!r} is mapped to {fname} but that file does not hold it")
    return CheckpointHeaders(d, headers, index_path if weight_map is not None else None)


def _read_index(path: Path) -> dict[str, str]:
    try:
        size = path.stat().st_size
        if size > MAX_INDEX_BYTES:
            raise SafetensorsError(f"{path}: {size} bytes; an index is at most {MAX_INDEX_BYTES}")
        data = json.loads(path.read_bytes().decode("utf-8"))
    except OSError as e:
        raise SafetensorsError(f"{path}: cannot read ({e.strerror or e})") from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise SafetensorsError(f"{path}: not valid JSON ({e})") from None
    wm = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(wm, dict):
        raise SafetensorsError(f"{path}: needs a 'weight_map' object of tensor name -> shard file")
    for k, v in wm.items():
        if not isinstance(v, str) or not v or "/" in v or "\\" in v or v in (".", "..") or "\x00" in v:
            raise SafetensorsError(f"{path}: weight_map[{k!r}] must be a file name in the same directory, got {v!r}")
    return wm
