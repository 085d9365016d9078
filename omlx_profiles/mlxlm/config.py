"""Reading a config.json: the file, the language-model sub-config, and typed keys with provenance.

Errors name the file and the key (``config.json: text_config.num_key_value_heads must be a positive
integer, got 8.5``) and never surface as a traceback. Non-standard JSON constants (``NaN``,
``Infinity``) are accepted by the parser because real checkpoints carry them where no cache dimension
is read (Nemotron-H's ``time_step_limit: [0.0, Infinity]``); a key this package *reads* must still hold
a finite number of the right type, so a non-finite value there is an error naming the key.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..units import normalize_dtype
from ..errors import InputError, UnsupportedError, quoted
from ..schema.family import MAX_LAYERS
from .facts import ARCHITECTURE_REMAPPING, MLX_LM_VERSION, MODEL_REMAPPING, WRAPPER_KEYS, ArgsSpec

MAX_CONFIG_BYTES = 16 * 1024 * 1024
#: Every integer this package reads from a config is a count or a dimension of an MLX array, and MLX
#: shapes are 32-bit: a larger value cannot be a model mlx-lm builds. Without this bound a 400-digit
#: ``hidden_size`` reached the peak model's float arithmetic (OverflowError, "internal error").
MAX_DIM = 2**31 - 1
_MISSING = object()


def check_dim(v: int, where: str) -> int:
    """``v`` (a config integer read by a recipe formula, or a formula's value) within ``MAX_DIM``: the one
    bound every integer from a config meets, whichever reader took it (``Reader.int``, the recipes'
    dotted keys, per-layer lists); a 400-digit ``linear_num_key_heads`` reached the peak model's float
    arithmetic through a formula (OverflowError, "internal error")."""
    if v > MAX_DIM:
        raise InputError(f"{where} = {shown(v)} is out of range (at most {MAX_DIM}: MLX shapes are 32-bit)")
    return v


@dataclass
class LoadedConfig:
    data: dict
    path: Path | None
    nonfinite: list[str] = field(default_factory=list)  # key paths holding NaN / Infinity

    @property
    def label(self) -> str:
        return str(self.path) if self.path else "config.json"


def config_file(path: Path | str) -> Path:
    """The config.json a path names: the file itself, or ``DIR/config.json``."""
    from ..files import regular_file

    from ..files import user_path

    p = user_path(path, "config")
    try:
        is_dir = p.is_dir()
    except (OSError, ValueError) as e:
        raise InputError(f"{p}: cannot read ({getattr(e, 'strerror', None) or e})") from None
    if is_dir:
        c = regular_file(p / "config.json", "config.json")  # a FIFO here is said, not "no config.json"
        if c is None:
            raise InputError(f"{p}: directory has no config.json")
        return c
    c = regular_file(p, "config")
    if c is None:
        raise InputError(f"{p}: no such file or directory")
    return c


def load_config(path: Path | str) -> LoadedConfig:
    """Parse a config.json (or a directory holding one); every failure is an ``InputError`` naming it."""
    p = config_file(path)
    try:
        size = p.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise InputError(f"{p}: {size} bytes; a config.json is at most {MAX_CONFIG_BYTES} bytes")
        raw = p.read_bytes()
    except OSError as e:
        raise InputError(f"{p}: cannot read ({e.strerror or e})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"{p}: not UTF-8 text (byte {e.start})") from None
    return parse_config_text(text, p)


def parse_config_text(text: str, path: Path | None = None) -> LoadedConfig:
    label = str(path) if path else "config.json"
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates)
    except DuplicateKeyError as e:
        raise InputError(f"{label}: duplicate key {shown(e.args[0])} in one JSON object (which value mlx-lm "
                         "would see depends on the parser; remove one)") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{label}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
    except RecursionError:
        raise InputError(f"{label}: JSON nested too deeply") from None
    except ValueError as e:  # e.g. an integer of more than 4300 digits (int max str digits): not a config
        raise InputError(f"{label}: invalid JSON: {e}") from None
    if not isinstance(data, dict):
        raise InputError(f"{label}: top level must be a JSON object, got {_tname(data)}")
    return LoadedConfig(data, path, _nonfinite_paths(data))


def _nonfinite_paths(obj: Any, prefix: str = "", out: list | None = None, depth: int = 0) -> list[str]:
    out = [] if out is None else out
    if depth > 64:
        return out
    if isinstance(obj, float) and not math.isfinite(obj):
        out.append(prefix or "<top>")
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _nonfinite_paths(v, f"{prefix}.{k}" if prefix else str(k), out, depth + 1)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _nonfinite_paths(v, f"{prefix}[{i}]", out, depth + 1)
    return out


MAX_SHOWN = 60


def shown(v: Any, limit: int = MAX_SHOWN) -> str:
    """A config value quoted in a message (``errors.quoted``), cut at ``MAX_SHOWN``: the config readers' length."""
    return quoted(v, limit)


class DuplicateKeyError(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    """``json.loads`` keeps the last of two equal keys silently; a config saying two things is refused."""
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise DuplicateKeyError(k)
        out[k] = v
    return out


def _tname(v: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null",
            int: "integer", float: "number"}.get(type(v), type(v).__name__)


# --------------------------------------------------------------------------------------------------
# model_type -> module, and the language-model sub-config
# --------------------------------------------------------------------------------------------------


def model_type_of(data: dict, label: str) -> str:
    mt = data.get("model_type")
    if mt is None:
        raise InputError(f"{label}: no 'model_type' key; mlx-lm picks the model class from it")
    if not isinstance(mt, str) or not mt.strip():
        raise InputError(f"{label}: 'model_type' must be a non-empty string, got {shown(mt)}")
    return mt


def module_for(data: dict, label: str) -> tuple[str, str]:
    """(config model_type, mlx-lm module) the way ``mlx_lm.utils._get_classes`` picks it."""
    mt = model_type_of(data, label)
    archs = data.get("architectures") or ()
    if isinstance(archs, str):
        archs = (archs,)
    if isinstance(archs, (list, tuple)):
        for a in archs:
            if isinstance(a, str) and (mt, a) in ARCHITECTURE_REMAPPING:
                return mt, ARCHITECTURE_REMAPPING[(mt, a)]
    return mt, MODEL_REMAPPING.get(mt, mt)


def text_config_key(data: dict) -> str | None:
    """The wrapper key holding the language model's config, preferring one that has a layer count.

    Like the seed: ``text_config`` / ``language_config`` / ``llm_config`` win over the top level when they
    are objects, because on VLM packs the top-level numbers may describe the vision tower.
    """
    subs = [k for k in WRAPPER_KEYS if isinstance(data.get(k), dict)]
    for k in subs:
        if "num_hidden_layers" in data[k] or "n_layer" in data[k]:
            return k
    return subs[0] if subs else None


# --------------------------------------------------------------------------------------------------
# Typed access with provenance
# --------------------------------------------------------------------------------------------------


class Reader:
    """Typed reads of one (sub-)config, the way an mlx-lm args class sees it.

    ``spec`` supplies mlx-lm's defaults and required fields; ``injected`` holds values a wrapper's
    ``__post_init__`` puts into the sub-config before the inner class parses it (gemma3: 8 heads, 4 KV
    heads). Every read records ``where`` the value came from, for ``resolve --explain``.
    """

    def __init__(self, data: dict, *, label: str, prefix: str, spec: ArgsSpec, module: str,
                 injected: dict[str, tuple[Any, str]] | None = None):
        self.data = data
        self.label = label
        self.prefix = prefix  # "" or "text_config."
        self.spec = spec
        self.module = module
        self.injected = dict(injected or {})
        self.used: dict[str, str] = {}

    # --- presence -------------------------------------------------------------------------
    def has(self, key: str) -> bool:
        return key in self.data or key in self.injected

    def raw(self, key: str, default: Any = _MISSING) -> Any:
        if key in self.data:
            return self.data[key]
        if key in self.injected:
            return self.injected[key][0]
        if key in self.spec.defaults:
            return self.spec.defaults[key]
        return default

    def where(self, key: str) -> str:
        if key in self.data:
            return f"{self.label}: {self.prefix}{key}"
        if key in self.injected:
            return f"mlx-lm {self.injected[key][1]}"
        if key in self.spec.defaults:
            return f"mlx-lm {MLX_LM_VERSION} default ({self.spec.cls}.{key} = {self.spec.defaults[key]!r})"
        return f"{self.label}: {self.prefix}{key} (absent)"

    def check_required(self) -> None:
        """mlx-lm's ``ModelArgs.from_dict`` raises TypeError when a field without default is absent."""
        missing = sorted(k for k in self.spec.required if k not in self.data and k not in self.injected)
        if missing:
            raise UnsupportedError(
                f"unsupported: model_type {shown(self.data.get('model_type', self.module))}: {self.label} lacks "
                f"{', '.join(repr(self.prefix + m) for m in missing)}, which mlx-lm's {self.spec.cls} requires "
                "(mlx_lm.load raises TypeError)"
            )

    # --- typed reads ----------------------------------------------------------------------
    def int(self, key: str, *, minimum: int = 1, allow_none: bool = False, required: bool = True,
            maximum: int | None = MAX_DIM):
        v = self.raw(key)
        if v is _MISSING:
            if not required:
                return None
            raise UnsupportedError(
                f"unsupported: model_type {self.module!r}: {self.label} has no {self.prefix}{key!r} and "
                f"mlx-lm's {self.spec.cls} has no default for it"
            )
        if v is None:
            if allow_none or not required:
                self.used[key] = self.where(key)
                return None
            raise InputError(f"{self.label}: {self.prefix}{key} is null; mlx-lm needs an integer here")
        if isinstance(v, bool) or not isinstance(v, int):  # 128.0 too: nn.Linear needs an int
            raise InputError(
                f"{self.label}: {self.prefix}{key} must be an integer >= {minimum}, got {_tname(v)} {shown(v)}")
        if v < minimum:
            raise InputError(f"{self.label}: {self.prefix}{key} must be an integer >= {minimum}, got {shown(v)}")
        if maximum is not None and v > maximum:
            raise InputError(f"{self.label}: {self.prefix}{key} = {shown(v)} is out of range (at most {maximum})")
        self.used[key] = self.where(key)
        return v

    def str_list(self, key: str) -> list[str] | None:
        v = self.raw(key, None)
        if v is None:
            return None
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise InputError(f"{self.label}: {self.prefix}{key} must be a list of strings, got {_tname(v)}")
        if len(v) > MAX_LAYERS:
            raise InputError(f"{self.label}: {self.prefix}{key} has {len(v)} entries (at most {MAX_LAYERS} layers)")
        self.used[key] = self.where(key)
        return list(v)

    def int_list(self, key: str) -> list[int] | None:
        v = self.raw(key, None)
        if v is None:
            return None
        if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            raise InputError(f"{self.label}: {self.prefix}{key} must be a list of integers, got {_tname(v)}")
        self.used[key] = self.where(key)
        return list(v)

    def boolean(self, key: str) -> bool | None:
        v = self.raw(key, None)
        if v is None:
            return None
        if not isinstance(v, bool):
            raise InputError(f"{self.label}: {self.prefix}{key} must be true or false, got {shown(v)}")
        self.used[key] = self.where(key)
        return v


def read_dtype(top: dict, text: dict | None, label: str, text_prefix: str) -> tuple[str | None, str]:
    """Activation dtype: the language model's ``dtype``/``torch_dtype``, else the top level's.

    mlx-lm loads weights in their stored dtype and does not cast (no ``--dtype`` in ``load``), so the
    checkpoint's dtype is the dtype of activations and cached K/V.
    """
    for d, pre in ((text, text_prefix), (top, "")):
        if not isinstance(d, dict):
            continue
        for key in ("torch_dtype", "dtype"):
            v = d.get(key)
            if v is None:
                continue
            n = normalize_dtype(v)
            if n is None:
                raise InputError(f"{label}: {pre}{key} = {shown(v)} is not a dtype mlx-lm runs activations in "
                                 "(bfloat16, float16, float32)")
            return n, f"{label}: {pre}{key} = {v}"
    return None, ""


def read_quantization(top: dict, label: str) -> tuple[dict | None, str, list[str]]:
    """mlx-lm's own ``quantization`` block (bits, group_size), or an HF ``quantization_config``.

    Returns (Weights fields or None, where, notes). The block is checked by ``quantization.read`` (the
    one reader the weights term uses too): invalid bits, group sizes or modes are errors naming the key.
    HF quantization methods (fp8, mxfp4, ...) are noted, not turned into bits: what mlx-lm runs after
    conversion is decided by the conversion, not the config.
    """
    from ..quantization import read

    notes: list[str] = []
    q, key = read(top, label)
    if q is not None:
        out = {"bits": q.bits, "group_size": q.group_size}
        if q.overrides:
            notes.append(f"{key} has {q.overrides} per-module override(s) (mixed quantization); "
                         f"weights.bits is the default {q.bits}, so a size from a parameter count is approximate")
        return out, f"{label}: {key}", notes
    for key in ("quantization", "quantization_config"):
        hf = top.get(key)
        if isinstance(hf, dict) and hf.get("quant_method") is not None:
            from ..registry.naming import check_hf_quantization

            check_hf_quantization(hf, f"{label}: {key}")  # one mlx-lm cannot load is not an MLX checkpoint
            notes.append(f"{label}: {key}.quant_method = {shown(hf['quant_method'])} (Hugging Face format): weight "
                         "bits not taken from it; the KV cache is unaffected")
            return None, "", notes
    return None, "", notes
