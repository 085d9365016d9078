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
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError, quoted

#: The safetensors library refuses headers over 100 MB; so do we (a real 1000-tensor header is ~100 KB).
MAX_HEADER_BYTES = 100_000_000
#: Index files (``model.safetensors.index.json``) are a weight map of names: a few MB at most.
MAX_INDEX_BYTES = 50_000_000
#: Shards of one checkpoint; more than this is not a model directory we should be walking.
MAX_SHARDS = 10_000
#: Tensors in one file. A real shard holds a few thousand; the largest real single-file headers are
#: unstacked-expert MoE checkpoints with tens of thousands. Parsing costs ~10 us per tensor (a million
#: took 10-16 s: the header-size limit alone did not bound the time), so 100k is about 1 s; the count
#: is taken from the raw bytes before parsing, so a refusal is immediate.
MAX_TENSORS = 100_000
#: Tensors in all shards of one checkpoint: bounds the whole walk. The largest real ones are unstacked-expert
#: MoE originals (DeepSeek-V3 ~91k, Kimi-K2 ~140k, its int4 compressed-tensors release ~210k); 250k parse in
#: ~2 s CPU. (It was 500k: 5 shards of 99k tensors took 7 s.) Each file's share is checked before parsing it.
MAX_CHECKPOINT_TENSORS = 250_000

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
    out = dict(pairs)  # C speed; the Python loop below runs only when a key is repeated
    if len(out) != len(pairs):
        seen = set()
        for k, _ in pairs:
            if k in seen:
                raise _DuplicateKey(k)
            seen.add(k)
    return out


def tensor_nbytes(dtype: str, shape: tuple[int, ...]) -> int:
    bits = DTYPE_BITS[dtype]
    n = 1
    for d in shape:
        n *= d
    total = n * bits
    return total // 8 if total % 8 == 0 else -(-total // 8)


def read_header(path: str | os.PathLike, max_tensors: int = MAX_TENSORS) -> FileHeader:
    """Parse and check one ``.safetensors`` file's header; reads ``8 + N`` bytes, never the tensors."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            n = header_length(p, f.read(8), size)
            raw = f.read(n)
    except OSError as e:
        raise SafetensorsError(f"{p}: cannot read ({e.strerror or e})") from None
    if len(raw) != n:
        raise SafetensorsError(f"{p}: truncated header ({len(raw)} of {n} bytes)")
    return parse_header(p, raw, size, max_tensors=max_tensors)


def header_length(where: object, head: bytes, size: int) -> int:
    """The header length ``N`` the first 8 bytes claim, checked against the limit and the file size.

    ``where`` names the file in messages (a local path, or ``hf://org/repo@rev/file`` for a remote one).
    """
    if len(head) < 8:
        raise SafetensorsError(f"{where}: truncated safetensors file ({size} bytes; the 8-byte header length is missing)")
    (n,) = struct.unpack("<Q", head[:8])
    if n > MAX_HEADER_BYTES:
        raise SafetensorsError(
            f"{where}: header length {n} bytes exceeds the {MAX_HEADER_BYTES}-byte limit (not a safetensors file?)")
    if n > size - 8:
        raise SafetensorsError(f"{where}: header length {n} bytes runs past the end of the {size}-byte file (truncated?)")
    return n


def parse_header(p: Path, raw: bytes, size: int, where: object = None, max_tensors: int = MAX_TENSORS) -> FileHeader:
    """The header JSON ``raw`` of a ``size``-byte file, parsed and checked (shared by local and remote reads:
    ``where`` names a remote file in messages)."""
    where = p if where is None else where
    n = len(raw)
    # Counted before parsing: the parse is what costs seconds. Every tensor entry is a JSON object, and an
    # object needs a literal "{" (escapes exist only inside strings), so this bound cannot be dodged the way
    # counting the key "data_offsets" could (written as "data\u005foffsets" it parses the same).
    entries = raw.count(b"{") - 1
    if entries > min(max_tensors, MAX_TENSORS) + 1:  # + 1: __metadata__
        if max_tensors < MAX_TENSORS:
            raise SafetensorsError(f"{where}: header lists {entries:,} tensors, more than the {max_tensors:,} left of "
                                   f"the {MAX_CHECKPOINT_TENSORS:,} read per checkpoint")
        raise SafetensorsError(f"{where}: header lists {entries:,} tensors; at most {MAX_TENSORS:,} per file are read "
                               "(a real shard holds a few thousand)")
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except UnicodeDecodeError as e:
        raise SafetensorsError(f"{where}: header is not UTF-8 (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise SafetensorsError(f"{where}: header is not valid JSON ({e.msg} at byte {e.pos})") from None
    except ValueError as e:  # an integer of more than 4,300 digits (int max str digits)
        raise SafetensorsError(f"{where}: header is not usable JSON ({e})") from None
    except RecursionError:
        raise SafetensorsError(f"{where}: header JSON is nested too deeply") from None
    except _DuplicateKey as e:
        raise SafetensorsError(f"{where}: header names tensor {quoted(e.args[0])} twice") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{where}: header must be a JSON object, got {type(header).__name__}")
    data_len = size - 8 - n
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise SafetensorsError(f"{where}: __metadata__ must be an object of strings (the safetensors library "
                               "refuses anything else)")
    if len(header) > MAX_TENSORS:
        raise SafetensorsError(f"{where}: header lists {len(header):,} tensors; at most {MAX_TENSORS:,} per file are "
                               "read (a real shard holds a few thousand)")
    tensors, spans = [], []
    for name, entry in header.items():
        t, span = _tensor(where, name, entry, data_len)
        tensors.append(t)
        spans.append((span[0], span[1], name))
    _check_layout(where, spans, data_len)
    return FileHeader(p, n, tuple(tensors), metadata)


def _check_layout(p: object, spans: list[tuple[int, int, str]], data_len: int) -> None:
    """The tensors must tile the data section exactly, as the safetensors library requires: sorted by
    offset, each starts where the previous ended, the last ends at the end of the file. An overlap would
    count the same bytes twice; a gap is bytes no tensor owns (a corrupt or hand-made file)."""
    end = 0
    for begin, stop, name in sorted(spans):
        if begin < end:
            raise SafetensorsError(f"{p}: tensor {quoted(name)} at bytes [{begin}, {stop}) overlaps the previous tensor "
                                   f"(which ends at {end}): the header claims the same bytes twice")
        if begin > end:
            raise SafetensorsError(f"{p}: tensor {quoted(name)} starts at byte {begin} but the previous tensor ends at "
                                   f"{end}: {begin - end} bytes belong to no tensor")
        end = stop
    if end != data_len:
        raise SafetensorsError(f"{p}: the tensors end at byte {end} of the {data_len}-byte data section: "
                               f"{data_len - end} trailing bytes belong to no tensor")


def _tensor(p: object, name: str, entry: object, data_len: int) -> tuple[TensorInfo, tuple[int, int]]:
    def where() -> str:  # built only for a message: per tensor it cost as much as the parse
        return f"{p}: tensor {quoted(name)}"

    if not isinstance(entry, dict):
        raise SafetensorsError(f"{where()}: entry must be an object with dtype, shape, data_offsets")
    dtype = entry.get("dtype")
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        raise SafetensorsError(f"{where()}: unknown dtype {quoted(dtype)} (known: {', '.join(sorted(DTYPE_BITS))})")
    shape = entry.get("shape")
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise SafetensorsError(f"{where()}: shape must be a list of non-negative integers, got {quoted(shape)}")
    if len(shape) > 64:
        raise SafetensorsError(f"{where()}: shape has {len(shape)} dimensions")
    offsets = entry.get("data_offsets")
    if (not isinstance(offsets, list) or len(offsets) != 2
            or not all(type(o) is int and o >= 0 for o in offsets) or offsets[0] > offsets[1]):
        raise SafetensorsError(f"{where()}: data_offsets must be [begin, end] with 0 <= begin <= end, got {quoted(offsets)}")
    nbytes = tensor_nbytes(dtype, tuple(shape))
    if offsets[1] - offsets[0] != nbytes:
        raise SafetensorsError(
            f"{where()}: data_offsets span {offsets[1] - offsets[0]} bytes but {dtype}{list(shape)} needs {nbytes}")
    if offsets[1] > data_len:
        raise SafetensorsError(
            f"{where()}: data ends at byte {offsets[1]} but the file holds {data_len} data bytes (truncated?)")
    return TensorInfo(name, dtype, tuple(shape), nbytes), (offsets[0], offsets[1])


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
    """``model*.safetensors`` in the directory: exactly the files ``mlx_lm.utils.load_model`` globs.

    An entry with that name that is not a regular file (a FIFO, a directory, a dangling link) is a
    ``SafetensorsError``: mlx-lm would fail on it, and leaving it out would make the sum look exact."""
    from ..files import matching, regular_file

    try:
        names = matching(directory, lambda n: n.startswith("model") and n.endswith(".safetensors"))
        return [p for p in names if regular_file(p, "weight file") is not None]
    except SafetensorsError:
        raise
    except InputError as e:
        raise SafetensorsError(str(e)) from None


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
    weight_map = _read_index(index_path) if _regular(index_path, "index file") else None
    if weight_map is not None:
        names = {p.name for p in files}
        missing = sorted(set(weight_map.values()) - names)
        absent = [m for m in missing if not _regular(d / m, "shard")]
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
    if weight_map is None:
        _check_numbered_shards(d, files)
    if len(files) > MAX_SHARDS:
        raise SafetensorsError(f"{d}: {len(files)} weight files; at most {MAX_SHARDS} are read")
    headers, count = [], 0
    for p in files:
        h = read_header(p, max_tensors=MAX_CHECKPOINT_TENSORS - count)
        count += len(h.tensors)
        if count > MAX_CHECKPOINT_TENSORS:
            raise SafetensorsError(f"{d}: more than {MAX_CHECKPOINT_TENSORS:,} tensors in its weight files; "
                                   "not a checkpoint this tool walks")
        headers.append(h)
    headers = tuple(headers)
    _no_tensor_twice(headers)
    if weight_map is not None:
        by_file = {h.path.name: {t.name for t in h.tensors} for h in headers}
        for tensor, fname in weight_map.items():
            if tensor not in by_file.get(fname, ()):
                raise SafetensorsError(f"{index_path}: tensor {quoted(tensor)} is mapped to {fname} but that file does not hold it")
    return CheckpointHeaders(d, headers, index_path if weight_map is not None else None)


def _no_tensor_twice(headers) -> None:
    """mlx-lm loads every file into one dict: a tensor held by two shards is loaded once and was counted
    twice (the "exact" sum too large by its bytes). Two copies mean a mixed-up download: said, not summed."""
    seen: dict[str, Path] = {}
    for h in headers:
        for t in h.tensors:
            first = seen.setdefault(t.name, h.path)
            if first is not h.path:
                raise SafetensorsError(f"{h.path}: tensor {quoted(t.name)} is also in {first.name}: two weight files "
                                       "hold it (mixed downloads?); mlx-lm would load one copy")


_SHARD = re.compile(r"^(model.*)-(\d+)-of-(\d+)\.safetensors$")


def _check_numbered_shards(d: Path, files: list[Path]) -> None:
    """Without an index, the shard names themselves say how many there are (``model-00001-of-00005``):
    a missing one is a partial download, and the sum of the rest is not the model's weights."""
    groups: dict[tuple[str, int], set[int]] = {}
    for f in files:
        m = _SHARD.match(f.name)
        if m:
            total = int(m.group(3))
            groups.setdefault((m.group(1), total), set()).add(int(m.group(2)))
    for (stem, total), have in groups.items():
        if total > MAX_SHARDS:
            raise SafetensorsError(f"{d}: shard names say {total} shards; at most {MAX_SHARDS} are read")
        wrong = sorted(i for i in have if not 1 <= i <= total)
        if wrong:
            raise SafetensorsError(f"{d}: shard number {wrong[0]} of {total} in a file name "
                                   f"({stem}-...-of-{total}.safetensors): numbers run from 1 to {total}")
        missing = [i for i in range(1, total + 1) if i not in have]
        if missing:
            width = len(next(m.group(2) for f in files if (m := _SHARD.match(f.name))))
            shown = ", ".join(f"{stem}-{i:0{width}d}-of-{total:0{width}d}.safetensors" for i in missing[:3])
            raise SafetensorsError(f"{d}: {len(missing)} of {total} shards missing ({shown}"
                                   f"{' ...' if len(missing) > 3 else ''}) and no index file: a partial download; "
                                   "the weights would be short")


def _regular(path: Path, what: str) -> bool:
    from ..files import regular_file

    try:
        return regular_file(path, what) is not None
    except InputError as e:
        raise SafetensorsError(str(e)) from None


def _read_index(path: Path) -> dict[str, str]:
    try:
        size = path.stat().st_size
        if size > MAX_INDEX_BYTES:
            raise SafetensorsError(f"{path}: {size} bytes; an index is at most {MAX_INDEX_BYTES}")
        raw = path.read_bytes()
    except OSError as e:
        raise SafetensorsError(f"{path}: cannot read ({e.strerror or e})") from None
    return parse_index(path, raw)


def parse_index(where: object, raw: bytes) -> dict[str, str]:
    """``weight_map`` of an index file's bytes: tensor name -> shard file name (same directory)."""
    if len(raw) > MAX_INDEX_BYTES:
        raise SafetensorsError(f"{where}: {len(raw)} bytes; an index is at most {MAX_INDEX_BYTES}")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as e:  # undecodable, invalid JSON, a 5,000-digit integer
        raise SafetensorsError(f"{where}: not valid JSON ({e})") from None
    wm = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(wm, dict):
        raise SafetensorsError(f"{where}: needs a 'weight_map' object of tensor name -> shard file")
    for k, v in wm.items():
        if not isinstance(v, str) or not v or "/" in v or "\\" in v or v in (".", "..") or "\x00" in v:
            raise SafetensorsError(f"{where}: weight_map[{quoted(k)}] must be a file name in the same directory, got {quoted(v)}")
    return wm
