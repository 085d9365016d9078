"""A vision tower's parameters, bounded from above by ``vision_config``'s dims, for the approximate weights.

Why: a VLM checkpoint (``config.json`` with a ``vision_config``: Gemma 3, Qwen3.5 / Qwen-VL, Mistral 3 /
Pixtral, LFM2-VL, ...) stores the tower and its projector next to the language model; mlx-vlm (oMLX's VLM
path) loads them, and the safetensors headers count them. The profile's ``weights.params`` is the language
model's (what ``mlx_lm`` builds), so a parameter-count estimate without the tower is under a checkpoint that
has one (issue 14: medgemma-27b-it stores 27.43 B parameters where the text model has 27.01 B). The tower is
counted **unquantized in the model dtype**: mlx-vlm's convert leaves vision modules unquantized (an 8-bit
Qwen3.5-9B MLX checkpoint stores ``vision_tower.*`` without ``scales``), and unquantized is the upper side
where it does not.

The bound, one formula for every ViT-style tower (W = width, L = layers, I = MLP width, p = patch, C =
channels, t = temporal patch, P = position-table rows, m = token merge factor, T = the width the projector
maps to):

* embeddings ``C*t*p*p*W + W + P*W`` (the patch convolution with its bias, a learned position table when the
  config names its size: ``num_position_embeddings`` / ``num_patches`` / ``(image_size // p)**2``, the largest;
  a tower with rotary positions, Pixtral, has none);
* per layer ``4*W*W + 4*W`` (q, k, v, o with biases) ``+ 3*W*I + I + W`` (a gated MLP with biases: a
  plain two-matrix MLP, SigLIP's, holds ``2*W*I``) ``+ 4*W`` (two LayerNorms, weight and bias) -- the largest
  block of SigLIP, SigLIP2, Qwen-VL and Pixtral;
* a SigLIP pooling head when ``vision_use_head`` is true (one more layer), a final norm ``2*W``;
* the projector(s): ``in = W*m*m`` features after merging ``m x m`` patches (``spatial_merge_size``,
  ``downsample_factor``, ``scale_factor``, the largest), hidden ``H = max(projector_hidden_size, in, T)``:
  ``in*in + in*H + 2*H*T + 4*(in + H + T)`` -- covers Gemma 3's one ``W x T`` matrix, Qwen's merger
  (``in x in`` then ``in x T``), LFM2-VL's two-layer MLP and Mistral 3's patch merger + two linears; one per
  entry of ``deepstack_visual_indexes`` more (Qwen3-VL's deepstack mergers).

Dims the bound needs (width, layers, MLP width, patch size) missing: ``VisionUnknown`` with the key, never a
silent zero.
"""
from __future__ import annotations

from dataclasses import dataclass

_KEYS_LAYERS = ("num_hidden_layers", "depth", "num_layers")


class VisionUnknown(ValueError):
    """The config has a vision tower whose size cannot be bounded (a dim is missing or not a positive int)."""


@dataclass(frozen=True)
class VisionBound:
    params: int
    how: str


def _pos(v) -> int | None:
    return v if type(v) is int and v > 0 else None


def _first(vc: dict, keys: tuple[str, ...]) -> int | None:
    for k in keys:
        if _pos(vc.get(k)):
            return vc[k]
    return None


def vision_config(config: dict | None) -> dict | None:
    """``config.json``'s ``vision_config`` (an object), else ``None``."""
    vc = config.get("vision_config") if isinstance(config, dict) else None
    return vc if isinstance(vc, dict) else None


def vision_bound(config: dict, text_hidden: int | None) -> VisionBound:
    """Upper bound on the tower + projector parameters of ``config`` (which has a ``vision_config``)."""
    vc = vision_config(config)
    if vc is None:
        raise VisionUnknown("config.json has no vision_config object")
    missing = []
    w = _first(vc, ("embed_dim", "hidden_size", "width"))
    layers = _first(vc, _KEYS_LAYERS)
    inter = _pos(vc.get("intermediate_size"))
    if inter is None and w and _pos(vc.get("mlp_ratio")):
        inter = w * vc["mlp_ratio"]
    patch = _pos(vc.get("patch_size"))
    for name, v in (("hidden_size (or embed_dim)", w), ("num_hidden_layers (or depth)", layers),
                    ("intermediate_size (or mlp_ratio)", inter), ("patch_size", patch)):
        if v is None:
            missing.append(name)
    if missing:
        raise VisionUnknown(f"vision_config lacks {', '.join(missing)} (a positive integer each): the vision tower "
                            "the checkpoint stores cannot be bounded")
    chans = _first(vc, ("num_channels", "in_channels", "in_chans")) or 3
    tpatch = _pos(vc.get("temporal_patch_size")) or 1
    image = _pos(vc.get("image_size"))
    positions = max(_pos(vc.get("num_position_embeddings")) or 0, _pos(vc.get("num_patches")) or 0,
                    (image // patch) ** 2 if image else 0)
    # the width the projector maps to: Qwen2-VL's vision_config.hidden_size is that width (its tower is embed_dim)
    out = _first(vc, ("out_hidden_size",)) or (_pos(vc.get("hidden_size")) if "embed_dim" in vc else None)
    t = max(out or 0, text_hidden or 0) or w
    merge = max(_pos(vc.get("spatial_merge_size")) or 1, _pos(config.get("spatial_merge_size")) or 1,
                _pos(config.get("downsample_factor")) or 1, _pos(config.get("scale_factor")) or 1)
    feat = w * merge * merge
    hid = max(_pos(config.get("projector_hidden_size")) or 0, feat, t)
    deep = vc.get("deepstack_visual_indexes")
    projectors = 1 + (len(deep) if isinstance(deep, list) else 0)

    embed = chans * tpatch * patch * patch * w + w + positions * w
    layer = 4 * w * w + 4 * w + 3 * w * inter + inter + w + 4 * w
    head = layer + w if vc.get("vision_use_head") is True else 0
    proj = projectors * (feat * feat + feat * hid + 2 * hid * t + 4 * (feat + hid + t))
    total = embed + layers * layer + head + 2 * w + proj
    how = (f"vision tower bound from vision_config ({layers} layers, width {w}, MLP {inter}, patch {patch}, "
           f"{positions} positions; projector {feat}->{hid}->{t} x {projectors}): {total:,} params")
    return VisionBound(total, how)
