"""Reading a resolved profile back for ``to_config``: cutting it shorter, each layer's role, its attention
widths, window and state shapes, and the config dims a state shape factors into.

Why apart: the per-family config builders (``to_config_attention``, ``to_config_hybrid``) all read the
profile the same way; a layout they cannot express raises ``SynthError`` here, in one place.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..registry.profile import CacheEntry, Profile


class SynthError(ValueError):
    """The profile declares a layout that this mlx-lm family cannot be configured to build."""


# --------------------------------------------------------------------------------------------------
# cutting
# --------------------------------------------------------------------------------------------------


def cut_profile(profile: Profile, layers: int | str | None) -> Profile:
    """A shorter copy of ``profile`` whose layers keep their kinds (``None``: unchanged).

    ``"period"``: for a ``pattern`` layout, one period (the first ``len(pattern)`` layers: every kind,
    and mlx-lm's ``i % p`` / ``(i + 1) % k`` rules with the declared period); for explicit ``types``,
    as ``"kinds"``. ``"kinds"``: the first layer of each kind, in stack order (nemotron_h's 118 layers
    become ``M-*``; qwen3-next's period of 4 becomes linear + full, i.e. an interval of 2: the per-layer
    caches are the same, the model is half as deep). An int ``n``: the first ``n`` layers.
    """
    if layers is None:
        return profile
    names = profile.layer_names
    if layers == "period" and profile.period is not None:
        idx = list(range(min(profile.period, len(names))))
    elif layers in ("period", "kinds"):
        first: dict[str, int] = {}
        for i, n in enumerate(names):
            first.setdefault(n, i)
        idx = sorted(first.values())
    elif isinstance(layers, int) and not isinstance(layers, bool):
        if not 1 <= layers <= len(names):
            raise SynthError(f"{profile.name}: layers={layers} outside 1..{len(names)}")
        idx = list(range(layers))
    else:
        raise SynthError(f"layers must be None, 'period', 'kinds' or an int, got {layers!r}")
    sub = tuple(names[i] for i in idx)
    if len(sub) == len(names):
        return profile
    used = set(sub)
    return dataclasses.replace(
        profile,
        name=f"{profile.name}@{len(sub)}L",
        num_layers=len(sub),
        layer_names=sub,
        layer_types={k: v for k, v in profile.layer_types.items() if k in used},
    )


# --------------------------------------------------------------------------------------------------
# reading the profile
# --------------------------------------------------------------------------------------------------

_ROLE_OF = {
    ("full",): "full",
    ("sliding",): "sliding",
    ("chunked",): "chunked",
    ("latent",): "latent",
    ("latent", "indexer"): "latent+indexer",
    ("state",): "state",
    ("none",): "none",
}


def layer_roles(profile: Profile) -> list[str]:
    """The cache role of every layer: full, sliding, chunked, latent, latent+indexer, state or none."""
    out = []
    for name in profile.layer_names:
        kinds = tuple(e.kind for e in profile.layer_types[name].entries)
        role = _ROLE_OF.get(kinds)
        if role is None:
            raise SynthError(f"{profile.name}: layer kind {name!r} holds caches {kinds}, which no mlx-lm family builds")
        out.append(role)
    return out


def _entries(profile: Profile, kinds: tuple[str, ...]) -> list[CacheEntry]:
    seen = []
    for name in dict.fromkeys(profile.layer_names):
        for e in profile.layer_types[name].entries:
            if e.kind in kinds:
                seen.append(e)
    return seen


@dataclass(frozen=True)
class _Attn:
    n_kv: int
    k: int
    v: int


def _attn(profile: Profile, *, same_kv_width: bool = True) -> _Attn | None:
    """The one (KV heads, key width, value width) every attention layer shares (mlx-lm has one per model)."""
    dims = {(e.n_kv, e.k_width, e.v_width) for e in _entries(profile, ("full", "sliding", "chunked"))}
    if not dims:
        return None
    if len(dims) > 1:
        raise SynthError(
            f"{profile.name}: attention layers declare different (kv heads, key width, value width) {sorted(dims)}; "
            f"mlx-lm's {profile.mlx_model_type} has one set for every layer"
        )
    n_kv, k, v = dims.pop()
    if same_kv_width and k != v:
        raise SynthError(
            f"{profile.name}: key width {k} != value width {v}, but mlx-lm's {profile.mlx_model_type} caches equal widths"
        )
    return _Attn(n_kv, k, v)


def _window(profile: Profile) -> int | None:
    ws = {e.window for e in _entries(profile, ("sliding",))}
    if len(ws) > 1:
        raise SynthError(f"{profile.name}: sliding layers declare different windows {sorted(ws)}; mlx-lm has one sliding_window")
    return ws.pop() if ws else None


def _shapes(profile: Profile) -> list[tuple[int, ...]]:
    """Declared state-tensor shapes (``StateTensorSpec.shape``, as the profile file states them)."""
    shapes: set[tuple[tuple[int, ...], ...]] = set()
    for e in _entries(profile, ("state",)):
        if any(not t.shape for t in e.tensors):
            raise SynthError(f"{profile.name}: a state layout needs the declared tensor shapes, not only element counts")
        shapes.add(tuple(t.shape for t in e.tensors))
    if len(shapes) != 1:
        raise SynthError(f"{profile.name}: expected one state layout, found {len(shapes)}")
    return [tuple(x) for x in shapes.pop()]


def _split_state(profile: Profile, n_tensors: int) -> tuple[tuple[int, ...], ...]:
    shapes = _shapes(profile)
    if len(shapes) != n_tensors:
        raise SynthError(
            f"{profile.name}: mlx-lm's {profile.mlx_model_type} state holds {n_tensors} tensor(s), the profile declares {len(shapes)}"
        )
    return tuple(shapes)


def _deltanet_dims(profile: Profile) -> dict:
    """qwen3_next / qwen3_5: conv (K-1, 2*nk*dk + nv*dv), ssm (nv, dv, dk) -> linear_* config dims."""
    conv, ssm = _split_state(profile, 2)
    if len(conv) != 2 or len(ssm) != 3:
        raise SynthError(f"{profile.name}: DeltaNet state must be conv (K-1, C) and ssm (nv, dv, dk), got {conv} and {ssm}")
    nv, dv, dk = ssm
    rest = conv[1] - nv * dv
    if rest <= 0 or rest % (2 * dk):
        raise SynthError(f"{profile.name}: conv width {conv[1]} is not 2*nk*{dk} + {nv}*{dv} for any whole nk")
    nk = rest // (2 * dk)
    if nv % nk:
        raise SynthError(f"{profile.name}: linear value heads {nv} not divisible by key heads {nk} (mlx-lm raises)")
    return {
        "linear_num_key_heads": nk,
        "linear_num_value_heads": nv,
        "linear_key_head_dim": dk,
        "linear_value_head_dim": dv,
        "linear_conv_kernel_dim": conv[0] + 1,
    }


def _mamba2_dims(profile: Profile) -> dict:
    """nemotron_h: conv (K-1, H*hd + 2*G*N), ssm (H, hd, N) -> mamba_* config dims."""
    conv, ssm = _split_state(profile, 2)
    if len(conv) != 2 or len(ssm) != 3:
        raise SynthError(f"{profile.name}: Mamba-2 state must be conv (K-1, C) and ssm (H, hd, N), got {conv} and {ssm}")
    h, hd, n = ssm
    rest = conv[1] - h * hd
    if rest <= 0 or rest % (2 * n):
        raise SynthError(f"{profile.name}: conv width {conv[1]} is not {h}*{hd} + 2*G*{n} for any whole G")
    g = rest // (2 * n)
    if h % g:
        raise SynthError(f"{profile.name}: mamba heads {h} not divisible by n_groups {g}")
    return {"mamba_num_heads": h, "mamba_head_dim": hd, "ssm_state_size": n, "n_groups": g, "conv_kernel": conv[0] + 1}


def _conv_dims(profile: Profile) -> dict:
    """lfm2: one tensor (conv_L_cache - 1, hidden_size)."""
    (conv,) = _split_state(profile, 1)
    if len(conv) != 2:
        raise SynthError(f"{profile.name}: LFM2 conv state must be (conv_L_cache - 1, hidden), got {conv}")
    return {"conv_L_cache": conv[0] + 1, "hidden_size": conv[1]}
