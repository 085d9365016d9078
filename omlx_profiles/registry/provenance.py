"""Where each field of a resolved profile comes from: ``file:line`` of the variant, of a ``base`` variant,
or of the family defaults (``resolve --explain``); for a config.json or live-model profile, the config key
or probe recorded in ``Profile.provenance`` by ``omlx_profiles.extraction.from_config``.

The order follows the loader's merge (``registry.inherit.resolve_variants``): a variant's own fields, then its
``base`` chain's fields (nearest first), then family defaults - the deepest base's file first, the
variant's own file last, because each ``base`` merge lays the base's merged fields over the inheriting
variant's family defaults.
"""
from __future__ import annotations

from ..schema.family import INHERITED_FIELDS


def _chain(registry, name: str) -> list[str]:
    chain: list[str] = []
    cur = name
    while cur and cur in registry.records and cur not in chain:
        chain.append(cur)
        cur = registry.records[cur].entry.base
    return chain


def yaml_where(registry, name: str, path: tuple) -> str | None:
    """``'file:line (variant X | base Y | family F defaults)'`` of a field path (``("num_kv_heads",)``,
    ``("layers", "kinds", "sliding", "window")``) of variant ``name``; ``None`` if no YAML sets it.

    The line is the deepest part of ``path`` present in the file (a kind inherited whole points at the kind).
    """
    chain = _chain(registry, name)
    top = path[0]
    for i, vname in enumerate(chain):
        rec = registry.records[vname]
        if top in rec.entry.model_fields_set:
            role = "variant" if i == 0 else "base"
            return f"{rec.file.path}:{rec.file.line(('variants', rec.index) + tuple(path))} ({role} {vname})"
    for vname in reversed(chain):
        rec = registry.records[vname]
        if top in rec.file.model.defaults.model_fields_set:
            return f"{rec.file.path}:{rec.file.line(('defaults',) + tuple(path))} (family {rec.family} defaults)"
    return None


def yaml_provenance(registry, name: str) -> dict[str, str]:
    """field -> 'path:line (variant X | base Y | family defaults)' following the inheritance chain."""
    out: dict[str, str] = {}
    for field in INHERITED_FIELDS:
        w = yaml_where(registry, name, (field,))
        if w:
            out[field] = w
    return out


def explain(resolution, *, registry=None) -> dict[str, str]:
    """Where each field of ``resolution.profile`` comes from: its recorded provenance (config.json or live
    model), else ``file:line`` in ``registry`` (the registry it was resolved from; ``{}`` without one).
    Takes the registry as an argument so this layer never reaches up into the CLI for it."""
    prov = getattr(resolution.profile, "provenance", None)
    if prov:
        return dict(prov)
    if registry is None or resolution.profile.name not in registry.records:
        return {}
    return yaml_provenance(registry, resolution.profile.name)
