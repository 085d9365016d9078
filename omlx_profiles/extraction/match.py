"""Several sources describing one checkpoint: precedence for filling, comparison for verifying.

Precedence for FILLING a field (first source that has it wins; provenance says which):
explicit overrides > YAML variant > YAML family defaults > config.json > live probe.
(``merge_fields``; the YAML levels are already merged by the loader's inheritance.)

For VERIFYING, every source is compared with the others and each disagreement is reported with both
values and where each came from (``compare_profiles`` here for two profiles; ``omlx_profiles.live.verify``
for a profile against the live model).

``--config`` / a model directory is the one case where the config is the subject: its layout is what
mlx-lm builds from that very file, so a registry variant claiming the same id does not override it; the
variant only fills what the config lacks (``weights``), and every disagreement is a note.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..errors import InputError, OmlxProfilesError
from ..registry.profile import Profile

PRECEDENCE = ("override", "yaml-variant", "yaml-family", "config.json", "live-probe")


@dataclass(frozen=True)
class Source:
    """One source of field values: its rank name (see ``PRECEDENCE``), values, and per-field origin."""

    rank: str
    values: dict[str, Any]
    where: dict[str, str]


def merge_fields(*sources: Source) -> tuple[dict[str, Any], dict[str, str]]:
    """Fill every field from the highest-precedence source that has a non-None value."""
    order = sorted(sources, key=lambda s: PRECEDENCE.index(s.rank))
    out: dict[str, Any] = {}
    prov: dict[str, str] = {}
    for s in order:
        for k, v in s.values.items():
            if v is None or k in out:
                continue
            out[k] = v
            prov[k] = s.where.get(k, s.rank)
    return out, prov


# --------------------------------------------------------------------------------------------------
# comparing two profiles
# --------------------------------------------------------------------------------------------------

TOP_FIELDS = ("num_layers", "num_heads", "num_kv_heads", "head_dim", "v_head_dim", "dtype", "attention_sinks")


def layout_signature(p: Profile) -> tuple:
    """The cache layout, per layer: what decides every byte of the resident KV (dtype aside)."""
    return tuple(p.layer_types[n].entries for n in p.layer_names)


def _entry_fields(e) -> dict[str, Any]:
    out = {"kind": e.kind}
    if e.kind in ("full", "sliding", "chunked", "latent", "indexer"):
        out.update(num_kv_heads=e.n_kv, k_width=e.k_width, v_width=e.v_width)
    if e.kind == "sliding":
        out.update(window=e.window, keep=e.keep)
    if e.kind == "chunked":
        out["chunk"] = e.chunk
    if e.kind == "state":
        out["tensors"] = [(t.name, t.elements, t.dtype) for t in e.tensors]
    return out


def compare_profiles(a: Profile, b: Profile) -> list[tuple[str, Any, Any]]:
    """(field, a's value, b's value) for every difference that matters to the cache (and the dims).

    Per-layer differences are grouped: one row per (field, a value, b value) with the layers listed.
    """
    out: list[tuple[str, Any, Any]] = []
    for f in TOP_FIELDS:
        va, vb = getattr(a, f), getattr(b, f)
        if va is not None and vb is not None and va != vb:
            out.append((f, va, vb))
    if a.mla is not None and b.mla is not None:
        for k in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "index_head_dim"):
            va, vb = getattr(a.mla, k), getattr(b.mla, k)
            if va != vb:
                out.append((f"mla.{k}", va, vb))
    groups: dict[tuple, list[int]] = {}
    for i, (na, nb) in enumerate(zip(a.layer_names, b.layer_names)):
        ea, eb = a.layer_types[na].entries, b.layer_types[nb].entries
        if ea == eb:
            continue
        if len(ea) != len(eb):
            groups.setdefault((f"layers[{na}/{nb}]", f"{len(ea)} cache(s)", f"{len(eb)} cache(s)"), []).append(i)
            continue
        for j, (x, y) in enumerate(zip(ea, eb)):
            fx, fy = _entry_fields(x), _entry_fields(y)
            for k in sorted(set(fx) | set(fy)):
                if fx.get(k) != fy.get(k):
                    sub = f"[{j}]" if len(ea) > 1 else ""
                    groups.setdefault((f"layers{sub}.{k}", hashable(fx.get(k)), hashable(fy.get(k))), []).append(i)
    for (f, va, vb), layers in groups.items():
        out.append((f"{f} (layers {ranges(layers)})", va, vb))
    return out


def hashable(v):
    return tuple(v) if isinstance(v, list) else v


def ranges(xs: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``'0-2,5'`` (sorted input)."""
    out, start, prev = [], None, None
    for x in xs:
        if start is None:
            start = prev = x
        elif x == prev + 1:
            prev = x
        else:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = x
    if start is not None:
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ",".join(out)


# --------------------------------------------------------------------------------------------------
# a config against the registry

#: Fields a reviewed YAML variant may fill when config.json lacks them (weights.params, a max_context
#: the config does not state, ...). The files on disk win wherever they say something: a directory named
#: like a registry model, holding another model's config, must not take the registry model's widths,
#: context or parameter count (a Qwen3-8B config in a "qwen3-0.6b" directory got 0.6B's hidden_size
#: and weights, and lost its own YaRN context). Disagreements are said, with both values.
YAML_FILLS = ("weights", "max_context", "moe", "hidden_size", "intermediate_size", "vocab_size",
              "tie_word_embeddings")


def fill_from_yaml(profile: Profile, yp: Profile, yaml_where: dict[str, str]) -> tuple[Profile, list[str]]:
    """``profile`` (from a config) with the ``YAML_FILLS`` fields it lacks taken from the matching YAML
    variant ``yp``; where both have a value and they differ, the config's stays and a note says so."""
    notes, changed, prov = [], {}, dict(profile.provenance)
    for f in YAML_FILLS:
        mine, theirs = getattr(profile, f), getattr(yp, f)
        if theirs is None or mine == theirs:
            continue
        if mine is None:
            changed[f] = theirs
            prov[f] = yaml_where.get(f, "yaml-variant")
        else:
            notes.append(f"{f}: config.json {mine!r} used; the YAML variant says {theirs!r} "
                         f"({yaml_where.get(f, yp.source)})")
    if not changed and not yp.ids:
        return profile, notes
    ids = tuple(dict.fromkeys((*profile.ids, *yp.ids)))
    return dataclasses.replace(profile, provenance=prov, ids=ids, aliases=tuple(yp.aliases), **changed), notes


# --------------------------------------------------------------------------------------------------


def match_registry(profile: Profile, registry, hints: list[str]) -> tuple[Profile, list[str]]:
    """Say which registry variant(s) this config is, and where they disagree.

    By id: ``_name_or_path`` (an ``org/name`` id) or the model directory's name, resolved like any
    query. By numbers: variants built by the same mlx-lm module with the same per-layer cache layout.
    """
    from ..registry.provenance import yaml_provenance

    notes: list[str] = []
    by_id: dict[str, str] = {}
    for h in hints:
        try:
            res = registry.resolve(h)
        except (LookupError, InputError, OmlxProfilesError):
            continue
        by_id.setdefault(res.profile.name, h)
    sig = layout_signature(profile)
    same = sorted(n for n, p in registry.profiles.items()
                  if p.mlx_model_type == profile.mlx_model_type and layout_signature(p) == sig)
    filled = profile
    for name, hint in by_id.items():
        yp = registry.profiles[name]
        src = yp.source
        diffs = compare_profiles(profile, yp)
        if not diffs:
            notes.append(f"config matches registry variant {name!r} ({src}) by id {hint!r}; same cache layout")
        else:
            where = yaml_provenance(registry, name)
            parts = []
            for f, vc, vy in diffs:
                top = f.split(".")[0].split("[")[0].split(" ")[0]
                yl = where.get(top, src)
                cw = profile.provenance.get(top, "config.json")
                parts.append(f"{f}: config.json has {vc!r} ({cw}), YAML has {vy!r} ({yl})")
            notes.append(f"config answers to registry variant {name!r} by id {hint!r} but disagrees with it: "
                         + "; ".join(parts) + " - the config's values are used, and nothing is taken from "
                         "that variant (it describes another checkpoint)")
            continue
        filled, fnotes = fill_from_yaml(filled, yp, yaml_provenance(registry, name))
        notes.extend(fnotes)
    others = [n for n in same if n not in by_id]
    if others:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        notes.append(f"same cache layout as registry variant(s) {shown}")
    return filled, notes
