"""The weights term: how many bytes the model's parameters occupy once mlx-lm has loaded them.

Two answers, always labelled:

* **exact** — a local model directory's ``model*.safetensors`` (the files ``mlx_lm.load`` reads): the
  sum over stored tensors of ``prod(shape) * element size``, read from the headers only (see
  ``safetensors_header``). For an MLX-quantized checkpoint the packed ``uint32`` weights and the
  ``scales`` / ``biases`` tensors are counted as stored, which is what MLX holds. mlx-lm's ``sanitize``
  can drop tensors a checkpoint carries (a vision tower in a text-only load, rotary ``inv_freq``), so
  for such checkpoints the loaded model holds this much or less, never more. MLX's Metal allocator
  rounds each buffer above 16 KiB up to a 16 KiB page: a few MB over hundreds of tensors, not counted.
  A profile's ``weights.bytes`` (measured by whoever wrote it) is exact too, for the checkpoint it
  describes.
* **approximate** — from the profile's ``weights.params`` and a quantization. MLX *affine*
  quantization (``mx.quantize``, mlx-lm's default ``convert``) packs each value into ``bits`` bits and
  keeps one scale and one bias per ``group_size`` values in the model dtype (bf16: 2 + 2 bytes), so a
  quantized parameter costs ``bits/8 + 2*dtype_bytes/group_size`` bytes (4-bit, group 64, bf16:
  0.5625). ``mxfp4`` / ``nvfp4`` / ``mxfp8`` keep a one-byte scale per group and no bias. mlx-lm's
  default convert quantizes every ``Linear`` and ``Embedding`` whose last dimension divides by the
  group size — embeddings and the LM head included — and leaves norms and biases in the model dtype;
  the norms are counted as ``(2 * num_layers + 1) * hidden_size`` parameters (two per block plus the
  final one). MoE router gates (experts x hidden per MoE layer) are counted at 8 bits, as the families
  whose ``quant_predicate`` keeps them there store them (qwen3_moe, qwen3_next, gpt_oss, ...): the upper
  side for the rest (issue 14: the approximation must not fall under the checkpoint).

No parameter count known → ``bytes`` is ``None`` with the reason: never a guess.

Which quantization (first that applies): ``bits`` passed by the caller (``--weights-bits``); the
local directory's ``config.json`` ``quantization``; the model id (``mlx-community/...-4bit`` ->
``Resolution.weights_bits``; ``mxfp4`` / ``nvfp4`` in the id pick that mode); the profile's
``weights.bits`` / ``group_size``; otherwise unquantized in the profile's dtype.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..dtypes import DTYPE_BYTES
from ..errors import InputError
from ..quantization import MODE_DEFAULTS, QUANT_BITS, Quantization
from ..quantization import read as read_quantization
from .safetensors import INDEX_NAME, CheckpointHeaders, SafetensorsError, read_checkpoint, weight_files

GIVEN = "given by the user"  # ``source`` of a size the caller states (the CLI's --weights)
MAX_CONFIG_BYTES = 10_000_000


@dataclass(frozen=True)
class WeightsInfo:
    """The weights term and where it came from.

    ``bytes``: the weight bytes, or ``None`` when unknown (``reason`` says why); ``exact``: read from
    the checkpoint (or a profile's measured ``weights.bytes``) rather than computed from a parameter
    count; ``source``: a short phrase for tables; ``reason``: why it is approximate or unknown.
    """

    bytes: int | None
    exact: bool
    source: str
    reason: str | None = None
    params: int | None = None
    bits: int | None = None
    group_size: int | None = None
    mode: str | None = None
    files: int | None = None
    tensors: int | None = None
    directory: str | None = None
    stored_dtypes: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        if self.bytes is None:
            return "unknown"
        if self.source == GIVEN:
            return "given"
        return "exact" if self.exact else "approximate"

    def as_dict(self) -> dict:
        return {
            "bytes": self.bytes,
            "exact": self.exact,
            "label": self.label,
            "source": self.source,
            "reason": self.reason,
            "params": self.params,
            "bits": self.bits,
            "group_size": self.group_size,
            "mode": self.mode,
            "files": self.files,
            "tensors": self.tensors,
            "directory": self.directory,
        }


# ----------------------------------------------------------------------------------------------
def estimate_weights(resolution, bits: int | None = None, model_dir=None, *, group_size: int | None = None) -> WeightsInfo:
    """The weights term for a resolved model (see the module docstring for the rules).

    ``model_dir``: a local model directory; when not given and the model was resolved from a local
    directory or its ``config.json``, that directory is used. Raises ``InputError`` for a bad
    ``bits``/``group_size`` and ``SafetensorsError`` (an ``InputError``) for unreadable weight files.
    """
    if bits is not None and (type(bits) is not int or bits not in (*QUANT_BITS, 16, 32)):
        raise InputError(f"weights bits must be one of {(*QUANT_BITS, 16, 32)}, got {bits!r}")
    if group_size is not None and (type(group_size) is not int or group_size not in (16, 32, 64, 128)):
        raise InputError(f"weights group size must be 16, 32, 64 or 128, got {group_size!r}")
    profile = resolution.profile
    d = Path(model_dir).expanduser() if model_dir is not None else _local_dir(resolution)
    config_q = None
    if d is not None:
        config = _read_config(d)
        config_q = config_quantization(config, str(d / "config.json")) if config else None
        if weight_files(d) or os.path.lexists(d / INDEX_NAME):  # an index without its shards is said, not skipped
            return _converted_on_load(config, bits) or _from_checkpoint(read_checkpoint(d), bits, group_size, config_q,
                                                                         profile, config)
    remote = getattr(resolution, "checkpoint", None)  # hub.RemoteCheckpoint: headers read by range request
    if d is None and remote is not None:
        return _converted_on_load(remote.config, bits) or _from_checkpoint(
            remote.headers, bits, group_size, config_quantization(remote.config), profile, remote.config)
    q = _pick_quantization(resolution, profile, bits, group_size, config_q)
    return _from_profile(profile, q, explicit=bits is not None, nq=getattr(resolution, "quant", None))


def weights_for(resolution, *, given: int | None = None, bits: int | None = None, model_dir=None) -> WeightsInfo:
    """The weights term of a request: ``given`` bytes as the user states them (the CLI's ``--weights``),
    else ``estimate_weights``."""
    if given is not None:
        return WeightsInfo(given, False, GIVEN, f"as given on the command line with --weights ({given:,} bytes)")
    return estimate_weights(resolution, bits=bits, model_dir=model_dir)


def _local_dir(resolution) -> Path | None:
    if getattr(resolution, "matched_by", None) not in ("directory", "config", "path", "local"):
        return None
    for cand in (getattr(resolution, "matched", None), getattr(resolution, "query", None)):
        if not cand:
            continue
        p = Path(cand).expanduser()
        if p.is_file():
            p = p.parent
        if p.is_dir():
            return p
    return None


def _read_config(d: Path) -> dict | None:
    p = d / "config.json"
    try:
        if not p.is_file() or p.stat().st_size > MAX_CONFIG_BYTES:
            return None
        data = json.loads(p.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None  # the extractor reports a broken config.json; here it only hints the quantization
    return data if isinstance(data, dict) else None


def config_quantization(config: dict, label: str = "config.json") -> Quantization | None:
    """``config.json``'s MLX ``quantization`` (or ``quantization_config``), checked (``quantization.read``):
    an invalid block is an ``InputError`` naming the key, a Hugging Face one (``quant_method``) ``None``."""
    return read_quantization(config, label)[0]


def _pick_quantization(resolution, profile, bits, group_size, config_q) -> tuple[Quantization, str]:
    w = getattr(profile, "weights", None)
    prof_bits = getattr(w, "bits", None)
    prof_group = getattr(w, "group_size", None)
    nq = getattr(resolution, "quant", None)  # naming.NameQuant: what the id's suffixes say
    if bits is not None:
        mode = "affine"
        src = "bits as requested"
    elif config_q is not None:
        return config_q, "from config.json quantization"
    elif nq is not None and nq.parts:
        # a mixed name (-MXFP4-Q8): the costliest part for every parameter, an upper bound
        part = max(nq.parts, key=lambda p: Quantization(p.bits, p.group_size, p.mode).nbytes(1 << 20, 2))
        src = "from the model id" + (f" ({nq.assumed})" if nq.assumed else "")
        if nq.mixed:
            src = (f"upper bound: the id names a mixed checkpoint ({nq.label()}); every parameter counted at "
                   f"its costliest part")
        return Quantization(part.bits, group_size or part.group_size, part.mode), src
    elif nq is not None and nq.float_bits:
        return Quantization(nq.float_bits), "from the model id" + (f" ({nq.notes[0]})" if nq.notes else "")
    elif getattr(resolution, "weights_bits", None):
        bits, src, mode = resolution.weights_bits, "bits from the model id", "affine"
    elif prof_bits:
        bits, src, mode = prof_bits, "bits from the profile", "affine"
    else:
        dt = profile.dtype
        return Quantization(8 * DTYPE_BYTES[dt]), f"unquantized, the profile's dtype {dt}"
    if bits >= 16:
        return Quantization(bits), src
    if group_size:
        g = group_size
    elif prof_group and mode == "affine":
        g = prof_group
    else:
        g = MODE_DEFAULTS[mode][0]
        src += f", group {g} = mlx-lm's default"
    return Quantization(bits, g, mode), src


def _kept_embedding_params(profile, nq) -> int:
    """AWQ / GPTQ quantize only the blocks' Linear layers: the embedding (and an untied LM head) stay in the
    model dtype. Untied is assumed when the profile does not say (an upper bound)."""
    if nq is None or not getattr(nq, "keeps_embeddings", False):
        return 0
    w = getattr(profile, "weights", None)
    if w is not None and getattr(w, "embedding_params", None):
        return w.embedding_params
    if profile.vocab_size and profile.hidden_size:
        return profile.vocab_size * profile.hidden_size * (1 if profile.tie_word_embeddings else 2)
    return 0


def _router_params(profile) -> int:
    """MoE router (gate) parameters, E x hidden per layer: mlx-lm's convert keeps them at 8 bits in the families
    whose ``quant_predicate`` says so (qwen3_moe, qwen3_next, gpt_oss, ...); counted at 8 bits for every MoE
    profile below 8 bits (the upper side where the family does not)."""
    m = getattr(profile, "moe", None)
    if m is None or not profile.hidden_size or not profile.num_layers:
        return 0
    moe_layers = profile.num_layers - (getattr(m, "first_dense_layers", 0) or 0)
    return max(0, moe_layers) * m.num_experts * profile.hidden_size


def _norm_params(profile) -> int:
    if profile.hidden_size and profile.num_layers:
        return (2 * profile.num_layers + 1) * profile.hidden_size
    return 0


def _cost(q: Quantization | None, act: int) -> float:
    """Bytes per parameter stored as ``q`` (None: unquantized, the model dtype)."""
    return float(act) if q is None else q.nbytes(1 << 20, act) / (1 << 20)


def _override_bound(profile, q: Quantization, quantized_params: int, act: int) -> tuple[int, Quantization | None, str]:
    """A config's per-module quantization overrides (mlx-lm's mixed recipes: some layers at 6 or 8 bits, some
    modules kept unquantized), bounded from above without the files: every block an override names is counted
    whole at the costliest width among the base and the overrides (a block's parameters: the non-embedding
    parameters over the MoE layers only, which no block exceeds), an overridden ``lm_head`` / embedding as
    vocab x hidden; an override naming anything else puts every parameter at that width. Returns (parameters so
    counted, their Quantization (None: unquantized), the sentence for the label); (0, None, "") without
    overrides. Issue 14: 49 modules of 7 blocks at 8 bits in a 4-bit Qwen3-0.6B were counted at 4 bits, 14% under
    the checkpoint (tests/test_weights_sweep.py)."""
    import re

    mods = getattr(q, "override_modules", ())
    if not mods:
        return 0, None, ""
    worst = max((m for _, m in mods), key=lambda m: _cost(m, act))
    if _cost(worst, act) <= _cost(q, act):
        return 0, None, ""  # every override is as cheap as the base or cheaper: the base width bounds them
    blocks, other, unknown = set(), 0, False
    vh = (profile.vocab_size or 0) * (profile.hidden_size or 0)
    for name, _ in mods:
        m = re.search(r"(?:^|\.)(?:layers|h|blocks)\.(\d+)(?:\.|$)", name)
        if m:
            blocks.add(int(m.group(1)))
        elif re.search(r"(lm_head|embed_tokens|wte|embeddings?)$", name) and vh:
            other += vh
        else:
            unknown = True
    moe = getattr(profile, "moe", None)
    n = (profile.num_layers or 0) - ((getattr(moe, "first_dense_layers", 0) or 0) if moe is not None else 0)
    emb = vh * (1 if profile.tie_word_embeddings else 2)
    per_block = -(-max(quantized_params - emb, 0) // n) if n > 0 else quantized_params
    over = quantized_params if unknown else min(quantized_params, len(blocks) * per_block + other)
    w = "unquantized" if worst is None else worst.label()
    where = "an override names a module outside the blocks" if unknown else f"{len(blocks)} block(s) named by overrides"
    return over, worst, f"{over:,} params at {w} ({where}: each counted whole at the costliest override, an upper bound)"


def _from_profile(profile, picked: tuple[Quantization, str], explicit: bool, nq=None) -> WeightsInfo:
    q, why = picked
    w = getattr(profile, "weights", None)
    act = DTYPE_BYTES.get(profile.dtype, 2)
    prof_bits = getattr(w, "bits", None) or 16
    if w is not None and w.bytes and q.bits == prof_bits:
        return WeightsInfo(w.bytes, True, "profile weights.bytes", None, params=w.params, bits=q.bits,
                           group_size=q.group_size, mode=q.mode if q.quantized else None)
    params = getattr(w, "params", None) if w is not None else None
    if not params:
        return WeightsInfo(None, False, "unknown",
                           f"profile {profile.name!r} has no weights.params; point MODEL at a local model "
                           "directory (its safetensors headers give exact bytes) or add weights.params to the profile")
    if q.quantized:
        kept = min(_norm_params(profile) + _kept_embedding_params(profile, nq), params)
        router = min(_router_params(profile), params - kept) if q.bits < 8 else 0
        rest = params - kept - router
        over, over_q, over_how = _override_bound(profile, q, rest, act)
        nbytes = (q.nbytes(rest - over, act) + (over_q.nbytes(over, act) if over_q else over * act) + kept * act
                  + Quantization(8, 64).nbytes(router, act))
        what = "norm and embedding" if _kept_embedding_params(profile, nq) else "norm"
        how = f"{params:,} params at {q.label()} ({why}); {kept:,} {what} params kept in {profile.dtype}"
        if router:
            how += f"; {router:,} MoE router params at 8 bits (mlx-lm keeps router gates at 8: an upper bound)"
        if over_how:
            how += f"; {over_how}"
    else:
        nbytes = q.nbytes(params, act)
        how = f"{params:,} params at {q.bits // 8} bytes ({why})"
    return WeightsInfo(nbytes, False, f"profile params, {q.label()}",
                       f"approximate: {how}", params=params, bits=q.bits,
                       group_size=q.group_size, mode=q.mode if q.quantized else None)


def _converted_on_load(config: dict | None, bits) -> WeightsInfo | None:
    """AWQ / GPTQ checkpoints mlx-lm 0.32 refuses to load (bits other than 4): unknown, with its reason."""
    qc = _hf_quant_config(config)
    if qc is None or bits is not None:
        return None
    if qc.get("quant_method") in ("awq", "gptq") and qc.get("bits", 4) != 4:
        return WeightsInfo(None, False, "unknown", f"mlx-lm loads only 4-bit AutoAWQ / GPTQ checkpoints; this one is "
                                                   f"{qc.get('bits')!r}-bit (mlx_lm.utils._transform_awq_weights raises)")
    return None


def _hf_quant_config(config: dict | None) -> dict | None:
    """A Hugging Face ``quantization_config`` mlx-lm converts while loading (when there is no MLX ``quantization``)."""
    if not isinstance(config, dict) or isinstance(config.get("quantization"), dict):
        return None
    qc = config.get("quantization_config")
    return qc if isinstance(qc, dict) and isinstance(qc.get("quant_method"), str) else None


_FLOATS = {"F16": 2, "BF16": 2, "F32": 4}


def _loaded_bytes(ck: CheckpointHeaders, config: dict | None) -> tuple[int, str | None, dict]:
    """Bytes mlx-lm holds after loading ``ck``: the stored sum, except for formats it converts on load.

    AutoAWQ / GPTQ (``mlx_lm.utils._transform_awq_weights``): ``qweight`` is repacked to a ``uint32``
    weight of the same size, ``qzeros`` is replaced by ``biases`` the size of ``scales`` (a missing
    ``qzeros`` still gets them), and every float tensor is cast to the scales' dtype: exact.
    fp8 (other than ue8m0 scales over 32x32 blocks, which mlx-lm keeps packed as mxfp8): the model's
    ``sanitize`` dequantizes each F8 weight with its ``weight_scale_inv`` to bf16 (deepseek_v3.py): F8
    elements at 2 bytes, the scales dropped - an upper bound for a model that keeps them packed.
    Returns (bytes, note or None, WeightsInfo fields).
    """
    qc = _hf_quant_config(config)
    method = qc.get("quant_method") if qc else None
    tensors = {t.name: t for f in ck.files for t in f.tensors}
    if method in ("awq", "gptq"):
        scale_dt = next((t.dtype for n, t in tensors.items() if n.endswith(".scales") and t.dtype in _FLOATS), "F16")
        total = 0
        for name, t in tensors.items():
            if name.endswith(".qzeros") or name.endswith(".g_idx"):
                continue
            if name.endswith(".qweight"):
                total += t.nbytes
                sc = tensors.get(name[: -len(".qweight")] + ".scales")
                total += sc.nbytes if sc is not None else 0  # the biases mlx-lm makes
            elif t.dtype in _FLOATS:
                total += _elements(t.shape) * _FLOATS[scale_dt]
            else:
                total += t.nbytes
        g = qc.get("group_size", 128)
        return total, (f"{method.upper()} checkpoint as mlx-lm loads it: qweight repacked, qzeros replaced by "
                       f"biases the size of scales, floats cast to {scale_dt} (stored: {ck.nbytes:,} bytes)"), \
            {"exact": True, "bits": 4, "group_size": g if type(g) is int else None, "mode": "affine"}
    if method == "fp8" and not (qc.get("scale_fmt") == "ue8m0" and list(qc.get("weight_block_size") or ()) == [32, 32]):
        total = 0
        for name, t in tensors.items():
            if name.endswith("scale_inv"):
                continue
            total += _elements(t.shape) * 2 if t.dtype.startswith("F8_") else t.nbytes
        return total, (f"upper bound: an fp8 checkpoint, dequantized to bf16 by the model's sanitize as mlx-lm "
                       f"loads it (F8 weights at 2 bytes, scale_inv dropped; stored: {ck.nbytes:,} bytes)"), \
            {"exact": False, "bits": 16, "group_size": None, "mode": None}
    return ck.nbytes, None, {}


def _per_layer_widths(config: dict | None, q: Quantization | None) -> str | None:
    """``"4-bit mxfp4, group 32 x 24 layers + 8-bit, group 64 (default)"`` when config.json's MLX
    ``quantization`` has per-layer entries of another width or mode (mlx-lm's mixed recipes), else ``None``."""
    qd = config.get("quantization") if isinstance(config, dict) else None
    if not isinstance(qd, dict) or q is None:
        return None
    counts: dict[str, int] = {}
    for v in qd.values():
        if isinstance(v, dict):
            b, g, m = v.get("bits"), v.get("group_size"), v.get("mode", "affine")
            if type(b) is int and m in MODE_DEFAULTS and (b, m) != (q.bits, q.mode):
                part = Quantization(b, g if type(g) is int and g > 0 else MODE_DEFAULTS[m][0], m).label()
                counts[part] = counts.get(part, 0) + 1
    if not counts:
        return None
    return " + ".join(f"{k} x {n} modules" for k, n in counts.items()) + f" + {q.label()} (default)"


def _elements(shape) -> int:
    n = 1
    for d_ in shape:
        n *= d_
    return n


def _from_checkpoint(ck: CheckpointHeaders, bits, group_size, config_q: Quantization | None, profile,
                     config: dict | None = None) -> WeightsInfo:
    n_files = len(ck.files)
    where = f"{ck.directory} ({n_files} file{'s' if n_files != 1 else ''}, {ck.tensor_count} tensors)"
    stored_q = config_q
    quantized_ck = stored_q is not None or any(t.name.endswith(".scales") for f in ck.files for t in f.tensors)
    stored_bits = stored_q.bits if stored_q else (None if quantized_ck else _stored_float_bits(ck))
    same = bits is None or (bits == stored_bits and (group_size is None or stored_q is None
                                                      or group_size == stored_q.group_size))
    if same:
        q = stored_q
        loaded, how, kw = _loaded_bytes(ck, config)
        if how is not None:
            return WeightsInfo(loaded, kw["exact"], "safetensors headers", how, bits=kw["bits"],
                               group_size=kw["group_size"], mode=kw["mode"], files=n_files, tensors=ck.tensor_count,
                               directory=str(ck.directory), stored_dtypes=ck.dtypes())
        mixed = _per_layer_widths(config, q)
        if mixed:  # the bytes are the headers' either way; the label must not claim one width
            return WeightsInfo(ck.nbytes, True, "safetensors headers", f"mixed per layer: {mixed}", params=None,
                               bits=None, group_size=None, mode="mixed", files=n_files, tensors=ck.tensor_count,
                               directory=str(ck.directory), stored_dtypes=ck.dtypes())
        return WeightsInfo(ck.nbytes, True, "safetensors headers", _implausible(ck.nbytes, profile),
                           params=None if quantized_ck else _count_params(ck),
                           bits=q.bits if q else stored_bits, group_size=q.group_size if q else None,
                           mode=q.mode if q else None, files=n_files, tensors=ck.tensor_count,
                           directory=str(ck.directory), stored_dtypes=ck.dtypes())
    if quantized_ck:
        what = stored_q.label() if stored_q else "quantized"
        return WeightsInfo(None, False, "unknown",
                           f"{ck.directory} holds a {what} checkpoint; its size at {bits} bits is not "
                           "known without requantizing (mlx_lm.convert)", files=n_files, tensors=ck.tensor_count)
    # An unquantized local checkpoint asked at other bits: quantize its real shapes the way convert would.
    act = DTYPE_BYTES.get(profile.dtype, 2)
    if bits >= 16:
        q = Quantization(bits)
    else:
        q = Quantization(bits, group_size or MODE_DEFAULTS["affine"][0], "affine")
    total = 0
    for f in ck.files:
        for t in f.tensors:
            n = 1
            for d_ in t.shape:
                n *= d_
            if q.quantized and _quantizable(t.name, t.shape, q.group_size):
                total += q.nbytes(n, act)
            elif q.quantized:
                total += t.nbytes
            else:
                total += n * (q.bits // 8)
    return WeightsInfo(total, False, f"safetensors shapes, {q.label()}",
                       f"approximate: the tensors of {where} as mlx-lm's convert would store them at {q.label()} "
                       "(every 2-D+ '.weight' whose last dimension divides by the group size; the rest as stored)",
                       params=_count_params(ck), bits=q.bits, group_size=q.group_size,
                       mode=q.mode if q.quantized else None, files=n_files, tensors=ck.tensor_count)


def plausible_floor(profile) -> int | None:
    """Fewest bytes a checkpoint of this shape can hold: every layer has at least one hidden x hidden
    projection and the model an embedding (vocab x hidden), all at 2 bits (the smallest MLX quantization),
    halved for slack. ``None`` when the profile lacks the dimensions."""
    h, n, v = profile.hidden_size, profile.num_layers, profile.vocab_size
    if not h or not n:
        return None
    return (n * h * h + (v or 0) * h) * 2 // 8 // 2


def _implausible(nbytes: int, profile) -> str | None:
    """A note (not an error: the headers are what they are) when "exact" bytes are far too few for the
    profile's shape: shards missing without an index, a stub file, or the wrong directory."""
    floor = plausible_floor(profile)
    if floor is None or nbytes >= floor:
        return None
    from ..units import format_bytes

    return (f"implausibly small: {format_bytes(nbytes)} for "
            f"{profile.num_layers} layers of width {profile.hidden_size} (at 2 bits such a model holds at least "
            f"{format_bytes(2 * floor)}); are weight files missing, or is this another model's directory?")


def _stored_float_bits(ck: CheckpointHeaders) -> int | None:
    """16 or 32: the float width holding most of an unquantized checkpoint's bytes."""
    by = ck.dtypes()
    half = by.get("BF16", 0) + by.get("F16", 0)
    full = by.get("F32", 0)
    if not half and not full:
        return None
    return 16 if half >= full else 32


def _quantizable(name: str, shape: tuple[int, ...], group: int) -> bool:
    return len(shape) >= 2 and name.endswith(".weight") and "conv" not in name and shape[-1] % group == 0


def _count_params(ck: CheckpointHeaders) -> int:
    total = 0
    for f in ck.files:
        for t in f.tensors:
            n = 1
            for d_ in t.shape:
                n *= d_
            total += n
    return total
