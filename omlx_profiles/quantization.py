"""A checkpoint's MLX ``quantization`` block, read once and checked: bits, group size, mode, overrides.

mlx-lm writes ``"quantization": {"group_size": 64, "bits": 4, "mode": "affine"}`` (and the same under
``quantization_config``), plus per-module entries when a ``quant_predicate`` chose other settings for
some layers (``"model.layers.0.mlp.gate": {"group_size": 64, "bits": 8}``, or ``false``: kept
unquantized). ``mlx_lm.load`` passes these to ``nn.quantize``, which refuses anything MLX has no kernel
for. So does this reader, with a sentence naming the key: an invalid block (``bits: 3.5``, ``true``,
``1e30``, ``group_size: 0``, an unknown ``mode``) used to be dropped in silence, and the weights were then
computed at bits the checkpoint never had. A Hugging Face ``quantization_config`` (it has a
``quant_method``: GPTQ, AWQ, fp8, ...) is not an MLX quantization and is returned as ``None``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .errors import InputError, quoted

#: ``mlx_lm.utils.quantize_model``'s defaults per mode: (group_size, bits).
MODE_DEFAULTS: dict[str, tuple[int, int]] = {"affine": (64, 4), "mxfp4": (32, 4), "nvfp4": (16, 4), "mxfp8": (32, 8)}
QUANT_BITS = (2, 3, 4, 5, 6, 8)
#: Group sizes MLX's quantized kernels take, per mode (``mx.quantize`` refuses others).
MODE_GROUPS: dict[str, tuple[int, ...]] = {"affine": (32, 64, 128), "mxfp4": (32,), "nvfp4": (16,), "mxfp8": (32,)}
MODE_BITS: dict[str, tuple[int, ...]] = {"affine": QUANT_BITS, "mxfp4": (4,), "nvfp4": (4,), "mxfp8": (8,)}
#: The group an upper bound takes when a checkpoint's group is not known: the smallest ``mx.quantize`` accepts
#: for the mode (more groups = more scales and biases). MLX 0.32 ``mlx/ops.cpp``: ``affine_quantize`` refuses
#: groups other than 32 / 64 / 128; ``fp_quantize`` requires 16 for nvfp4 and 32 for mxfp4 / mxfp8.
BOUND_GROUP: dict[str, int] = {m: min(g) for m, g in MODE_GROUPS.items()}
KEYS = ("quantization", "quantization_config")


@dataclass(frozen=True)
class Quantization:
    """How parameters are stored: ``bits`` 16/32 mean unquantized (bf16 or fp16 / fp32).

    ``overrides``: per-module entries of a mixed checkpoint (other bits for some layers, or kept
    unquantized); a size computed from a parameter count at the default ``bits`` is then approximate."""

    bits: int
    group_size: int | None = None
    mode: str = "affine"
    overrides: int = 0
    # (module name, its Quantization, or None: kept unquantized) per override, for the approximate weights'
    # upper bound (estimate/weights.py); not part of equality
    override_modules: tuple = field(default=(), compare=False)

    @property
    def quantized(self) -> bool:
        return self.bits < 16

    def nbytes(self, params: int, dtype_bytes: int) -> int:
        """Bytes of ``params`` parameters stored this way (integer arithmetic, rounded up)."""
        if not self.quantized:
            return params * (self.bits // 8)
        groups = -(-params // self.group_size)
        per_group = 2 * dtype_bytes if self.mode == "affine" else 1  # scale (+ bias) per group
        return -(-params * self.bits // 8) + groups * per_group

    def label(self) -> str:
        if not self.quantized:
            return f"{self.bits}-bit (unquantized)"
        m = "" if self.mode == "affine" else f" {self.mode}"
        mixed = f", {self.overrides} module override(s)" if self.overrides else ""
        return f"{self.bits}-bit{m}, group {self.group_size}{mixed}"


def kernel_problem(mode: str, bits: int, group_size: int | None) -> str | None:
    """Why MLX has no kernel for these settings (``None``: it has). Shared by the config.json reader below
    and the repo-name reader (``registry.naming``): ``-7bit`` or ``-4bit-g256`` in a name are not
    checkpoints ``mx.quantize`` can make, whatever reads them."""
    if mode not in MODE_BITS:
        return f"mode {mode!r} is not one of {', '.join(MODE_BITS)}"
    if bits not in MODE_BITS[mode]:
        return f"{bits}-bit {mode}: MLX quantizes {mode} to {', '.join(map(str, MODE_BITS[mode]))} bits"
    if group_size is not None and group_size not in MODE_GROUPS[mode]:
        return f"group size {group_size} ({mode}): MLX takes {', '.join(map(str, MODE_GROUPS[mode]))}"
    return None


def _settings(q: dict, where: str, default_mode: str | None = None) -> tuple[int, int, str]:
    mode = q.get("mode", default_mode or "affine")
    if not isinstance(mode, str) or mode not in MODE_DEFAULTS:
        raise InputError(f"{where}.mode must be one of {', '.join(MODE_DEFAULTS)}, got {quoted(mode, 60)}")
    bits = q.get("bits")
    if bits is None:
        raise InputError(f"{where} has no bits (mlx-lm's load reads quantization['bits'])")
    if isinstance(bits, bool) or not isinstance(bits, int) or bits not in MODE_BITS[mode]:
        raise InputError(f"{where}.bits must be one of {', '.join(map(str, MODE_BITS[mode]))} for mode {mode}, "
                         f"got {quoted(bits, 60)}")
    gs = q.get("group_size", MODE_DEFAULTS[mode][0])
    if isinstance(gs, bool) or not isinstance(gs, int) or gs not in MODE_GROUPS[mode]:
        raise InputError(f"{where}.group_size must be one of {', '.join(map(str, MODE_GROUPS[mode]))} for mode "
                         f"{mode}, got {quoted(gs, 60)}")
    return bits, gs, mode


def read(config: dict, label: str = "config.json") -> tuple[Quantization | None, str]:
    """The checkpoint's MLX quantization and the key it came from (``None, ""`` when it has none)."""
    for key in KEYS:
        q = config.get(key)
        if q is None:
            continue
        where = f"{label}: {key}"
        if not isinstance(q, dict):
            raise InputError(f"{where} must be an object, got {type(q).__name__}")
        if "quant_method" in q:
            continue  # Hugging Face format: not what mlx-lm's nn.quantize reads
        bits, gs, mode = _settings(q, where)
        overrides = 0
        modules = []
        for name, v in q.items():
            if name in ("bits", "group_size", "mode"):
                continue
            if v is False:
                overrides += 1
                modules.append((str(name), None))
            elif isinstance(v, dict):
                # an entry without "mode" is affine whatever the base mode: mlx_lm.utils.load_model's class_predicate
                # passes the entry to ``to_quantized(**entry)``, whose mode defaults to "affine" (mlx nn/layers/
                # linear.py); mlx-lm's own 8-bit router override of an mxfp4 model is written that way
                b2, g2, m2 = _settings(v, f"{where}[{name!r}]", "affine")
                overrides += 1
                modules.append((str(name), Quantization(b2, g2, m2)))
            else:
                raise InputError(f"{where}[{name!r}] must be a per-module object (bits, group_size) or false, "
                                 f"got {quoted(v, 60)}")
        return Quantization(bits, gs, mode, overrides, tuple(modules)), key
    return None, ""
