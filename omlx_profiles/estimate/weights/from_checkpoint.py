"""The exact weights term: a checkpoint's safetensors headers (local or read by range request), as mlx-lm
holds them once loaded (formats it converts on load -- AutoAWQ / GPTQ, fp8 -- counted as converted), or an
unquantized checkpoint's real shapes quantized the way ``mlx_lm.convert`` would.
"""
from __future__ import annotations

from math import prod

from ...units import DTYPE_BYTES
from ...quantization import BOUND_GROUP, MODE_DEFAULTS, Quantization
from ..safetensors import CheckpointHeaders
from .from_profile import implausible
from .info import WeightsInfo


def converted_on_load(config: dict | None, bits) -> WeightsInfo | None:
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


def from_checkpoint(ck: CheckpointHeaders, bits, group_size, config_q: Quantization | None, profile,
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
            odd = implausible(ck.nbytes, profile)
            return WeightsInfo(ck.nbytes, True, "safetensors headers",
                               f"mixed per layer: {mixed}" + (f"; {odd}" if odd else ""), params=None, bits=None,
                               group_size=None, mode="mixed", files=n_files, tensors=ck.tensor_count,
                               directory=str(ck.directory), stored_dtypes=ck.dtypes())
        return WeightsInfo(ck.nbytes, True, "safetensors headers", implausible(ck.nbytes, profile),
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
        q = Quantization(bits, group_size or BOUND_GROUP["affine"], "affine")  # group not stated: the bound
    total = 0
    for f in ck.files:
        for t in f.tensors:
            n = prod(t.shape)
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
            n = prod(t.shape)
            total += n
    return total
