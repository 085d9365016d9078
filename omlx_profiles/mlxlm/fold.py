"""Per-layer cache specs -> the profile's ``layers`` block (named kinds + the shortest pattern).

Rules produce one ``(kind name, spec)`` per layer, exactly as mlx-lm's ``make_cache`` would; this module
folds that list into ``kinds`` plus the shortest repeating ``pattern`` (``cyclic`` when the period does not
tile the layer count, as gemma3's 34 layers with a period of 6), or explicit ``types`` when nothing
repeats. The result expands back to the very same per-layer list (``Profile.from_variant``).
"""
from __future__ import annotations

from typing import Any


def period(names: list[str]) -> int:
    """Length of the shortest prefix whose repetition reproduces ``names`` (cut at the end)."""
    n = len(names)
    for p in range(1, n + 1):
        if all(names[i] == names[i % p] for i in range(p, n)):
            return p
    return n


def build_layers(per_layer: list[tuple[str, Any]], *, as_string: bool = False) -> dict:
    """``{"kinds": ..., "pattern"|"types": ..., ["cyclic": true]}`` for the per-layer specs.

    Two layers share a kind name only if their specs are equal; a clash gets a numbered name, so the
    fold never merges different caches. ``as_string`` writes one character per layer (names must be
    single characters; nemotron_h's ``hybrid_override_pattern``).
    """
    kinds: dict[str, Any] = {}
    names: list[str] = []
    for name, spec in per_layer:
        final = name
        i = 2
        while final in kinds and kinds[final] != spec:
            final = f"{name}_{i}"
            i += 1
        kinds.setdefault(final, spec)
        names.append(final)
    if as_string and not all(len(n) == 1 for n in names):
        as_string = False
    p = period(names)
    out: dict[str, Any] = {"kinds": kinds}
    if p < len(names):
        pat = names[:p]
        out["pattern"] = "".join(pat) if as_string else pat
        if len(names) % p:
            out["cyclic"] = True
    else:
        out["types"] = "".join(names) if as_string else names
    return out
