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
  group size — embeddings and the LM head included — and leaves norms, biases and convolutions in the
  model dtype; those are bounded from the dims (``from_profile._norm_params``: four norms, q/k norms and
  attention / MLP / expert biases per block). A group that does not divide an input width leaves those
  layers unquantized: then everything is counted unquantized. MoE router gates (experts x hidden per MoE
  layer) are counted at 8 bits, group 64, as the families whose ``quant_predicate`` keeps them there store
  them (qwen3_moe, qwen3_next, gpt_oss, ...): the upper side for the rest (issue 14: the approximation must
  not fall under the checkpoint). A group nobody states (``-4bit`` ids, ``--weights-bits`` alone, a profile's
  bits) is the smallest MLX allows for the mode (``quantization.BOUND_GROUP``: affine 32), not mlx-lm's
  default 64. A VLM checkpoint's vision tower (config.json ``vision_config``, or the profile's
  ``weights.vision_params``) is added unquantized (``vision.py``); missing tower dims make the weights
  unknown, with the key named. Checked against real mlx-lm checkpoints of every mode and recipe and two
  published VLM checkpoints: tests/test_weights_sweep.py.

No parameter count known → ``bytes`` is ``None`` with the reason: never a guess.

Which quantization (first that applies): ``bits`` passed by the caller (``--weights-bits``); the
local directory's ``config.json`` ``quantization``; the model id (``mlx-community/...-4bit`` ->
``Resolution.weights_bits``; ``mxfp4`` / ``nvfp4`` in the id pick that mode); the profile's
``weights.bits`` / ``group_size``; otherwise unquantized in the profile's dtype.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ...units import DTYPE_BYTES
from ...errors import InputError
from ...files import user_path
from ...mlxlm.config import MAX_CONFIG_BYTES  # one limit for every config.json read
from ...quantization import BOUND_GROUP, MODE_DEFAULTS, MODE_GROUPS, QUANT_BITS, Quantization
from ...quantization import read as read_quantization
from ..safetensors import INDEX_NAME, read_checkpoint, weight_files
from .from_checkpoint import converted_on_load, from_checkpoint
from .from_profile import from_profile, implausible, plausible_floor
from .info import GIVEN, WeightsInfo
from .vision import VisionBound, VisionUnknown, vision_bound, vision_config


__all__ = ["GIVEN", "Quantization", "WeightsInfo", "config_quantization", "estimate_weights", "plausible_floor",
           "weights_for"]


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
    d = user_path(model_dir, "model directory") if model_dir is not None else _local_dir(resolution)
    config_q = config = None
    if d is not None:
        config = _read_config(d)
        config_q = config_quantization(config, str(d / "config.json")) if config else None
        if weight_files(d) or os.path.lexists(d / INDEX_NAME):  # an index without its shards is said, not skipped
            return converted_on_load(config, bits) or from_checkpoint(read_checkpoint(d), bits, group_size, config_q,
                                                                         profile, config)
    remote = getattr(resolution, "checkpoint", None)  # hub.RemoteCheckpoint: headers read by range request
    if d is None and remote is not None:
        return converted_on_load(remote.config, bits) or from_checkpoint(
            remote.headers, bits, group_size, config_quantization(remote.config), profile, remote.config)
    q = _pick_quantization(resolution, profile, bits, group_size, config_q)
    try:
        vision = _vision(profile, config if d is not None else None)
    except VisionUnknown as e:
        return WeightsInfo(None, False, "unknown", f"{d / 'config.json' if d is not None else profile.name}: {e}")
    return from_profile(profile, q, explicit=bits is not None, nq=getattr(resolution, "quant", None), vision=vision)


def _vision(profile, config: dict | None) -> VisionBound | None:
    """The vision tower a VLM checkpoint stores next to the text model (``vision.py``): from the local
    ``config.json``'s ``vision_config`` when there is one, else the profile's ``weights.vision_params``."""
    if vision_config(config) is not None:
        return vision_bound(config, profile.hidden_size)
    vp = getattr(getattr(profile, "weights", None), "vision_params", None)
    if vp:
        return VisionBound(vp, f"the profile's weights.vision_params ({vp:,}, a bound from its vision_config)")
    return None


def weights_for(resolution, *, given: int | None = None, bits: int | None = None, model_dir=None) -> WeightsInfo:
    """The weights term of a request: ``given`` bytes as the user states them (the CLI's ``--weights``),
    else ``estimate_weights``."""
    if given is not None:
        # a size typed by hand gets the same plausibility check as one read from headers (``--weights 1MB``
        # for an 8B model, ``--weights 0``): said next to the number, not refused (it is the user's number)
        odd = implausible(given, getattr(resolution, "profile", None))
        return WeightsInfo(given, False, GIVEN, f"as given on the command line with --weights ({given:,} bytes)"
                           + (f"; {odd}" if odd else ""))
    return estimate_weights(resolution, bits=bits, model_dir=model_dir)


def _local_dir(resolution) -> Path | None:
    if getattr(resolution, "matched_by", None) not in ("directory", "config", "path", "local"):
        return None
    for cand in (getattr(resolution, "matched", None), getattr(resolution, "query", None)):
        if not cand:
            continue
        try:
            p = user_path(cand, "model path")
        except InputError:  # a query that cannot name a file (NUL) is not a local directory
            continue
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
        def group(p):
            return group_size or (p.group_size if p.group_named else BOUND_GROUP[p.mode])
        part = max(nq.parts, key=lambda p: Quantization(p.bits, group(p), p.mode).nbytes(1 << 20, 2))
        src = "from the model id" + (f" ({nq.assumed})" if nq.assumed else "")
        if nq.mixed:
            src = (f"upper bound: the id names a mixed checkpoint ({nq.label()}); every parameter counted at "
                   f"its costliest part")
        g = group(part)
        if not group_size and not part.group_named and len(MODE_GROUPS[part.mode]) > 1:
            src += _UNNAMED_GROUP.format(g=g, d=MODE_DEFAULTS[part.mode][0])
        return Quantization(part.bits, g, part.mode), src
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
        g = BOUND_GROUP[mode]
        src += _UNNAMED_GROUP.format(g=g, d=MODE_DEFAULTS[mode][0])
    return Quantization(bits, g, mode), src


#: Issue 14: a group nobody stated is bounded, not guessed: at 2 bits a group-32 checkpoint holds ~20% more than
#: group 64 (Qwen3-8B: 3.07 vs 2.56 GB), so mlx-lm's default would be under for ``--q-group-size 32`` conversions.
_UNNAMED_GROUP = (", group {g}: the group is not stated, so the smallest MLX allows (an upper bound; mlx-lm's "
                  "default group {d} stores less)")
