"""Reading a resolved profile back for ``to_config``: cutting it shorter, each layer's role, its attention
widths, window and state shapes, and the config dims a state shape factors into.

Why apart: the config writer (``to_config_write``) reads every profile the same way; a layout it
cannot express raises ``SynthError`` here, in one place.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..registry.profile import CacheEntry, Profile
from ..schema import formula


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


def solve_state(profile: Profile, arrays, divisible: dict[str, str]) -> dict[str, int]:
    """The config dims that make the module's state ``arrays`` (formulas over config keys, as its file
    writes them) come out as the profile's declared tensor shapes, solved one unknown key at a time.

    Why one solver: a gated-DeltaNet conv window ``(K - 1, 2*nk*dk + nv*dv)``, a Mamba-2 one
    ``(K - 1, H*hd + 2*G*N)`` and a short conv ``(L - 1, hidden)`` differ only in their formulas, which
    the module file already holds; each axis is linear in the one key not yet known (the others solved
    from simpler axes first). A shape no whole, positive set of dims produces raises ``SynthError``, and
    so does a pair mlx-lm rejects (``divisible``: key -> the key it must be a multiple of).
    """
    shapes = _shapes(profile)
    if len(shapes) != len(arrays):
        raise SynthError(
            f"{profile.name}: mlx-lm's {profile.mlx_model_type} state holds {len(arrays)} tensor(s), the profile "
            f"declares {len(shapes)}"
        )
    pending = []
    for a, shape in zip(arrays, shapes):
        if len(shape) != len(a.shape):
            raise SynthError(f"{profile.name}: state tensor {a.name} must be ({', '.join(map(str, a.shape))}), "
                             f"got {shape}")
        pending += [(a.name, f, v) for f, v in zip(a.shape, shape)]
    known: dict[str, int] = {}
    while pending:
        progress, left = False, []
        for name, f, v in pending:
            unknown = [k for k in formula.keys(f) if k not in known]
            if len(unknown) > 1:
                left.append((name, f, v))
                continue
            progress = True
            if unknown:
                known[unknown[0]] = _solve_one(profile, name, f, v, unknown[0], known)
            elif formula.evaluate(f, known.get) != v:
                raise SynthError(f"{profile.name}: state tensor {name}: {f} = {formula.evaluate(f, known.get)}, "
                                 f"the profile declares {v}")
        if not progress:
            raise SynthError(f"{profile.name}: the state dims of {sorted({n for n, _, _ in left})} cannot be solved "
                             "one key at a time")
        pending = left
    for key, base in divisible.items():
        if known[key] % known[base]:
            raise SynthError(f"{profile.name}: {key} {known[key]} is not a multiple of {base} {known[base]} "
                             "(mlx-lm raises)")
    return known


def _solve_one(profile: Profile, name: str, f: str, v: int, key: str, known: dict[str, int]) -> int:
    """``key`` such that formula ``f`` (linear in it) equals ``v``: a whole, positive value, or SynthError."""
    def at(x: int) -> int | None:
        return formula.evaluate(f, lambda k: x if k == key else known.get(k))

    try:
        b = at(0)
        slope = at(1) - b
        rest = v - b
        x = rest // slope if slope > 0 and rest > 0 and rest % slope == 0 else None
        if x is not None and at(x) != v:
            x = None
    except (ZeroDivisionError, TypeError):
        x = None
    if x is None:
        raise SynthError(f"{profile.name}: state tensor {name}: {v} is not {f} for any whole {key}")
    return x
