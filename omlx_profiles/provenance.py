"""Where each field of a resolved profile comes from: ``file:line`` of the variant, of a ``base`` variant,
or of the family defaults (``resolve --explain``)."""
from __future__ import annotations

from .schema_models import INHERITED_FIELDS


def yaml_provenance(registry, name: str) -> dict[str, str]:
    """field -> 'path:line (variant X | base Y | family defaults)' following the inheritance chain."""
    out: dict[str, str] = {}
    chain = []
    cur = name
    while cur and cur in registry.records and cur not in chain:
        chain.append(cur)
        cur = registry.records[cur].entry.base
    for field in INHERITED_FIELDS:
        for i, vname in enumerate(chain):
            rec = registry.records[vname]
            if field in rec.entry.model_fields_set:
                role = "variant" if i == 0 else "base"
                out[field] = f"{rec.where(field)} ({role} {vname})"
                break
            defaults = rec.file.model.defaults
            if field in defaults.model_fields_set:
                line = rec.file.line(("defaults", field))
                out[field] = f"{rec.file.path}:{line} (family {rec.family} defaults)"
                break
    return out


def explain(resolution, args=None) -> dict[str, str]:
    prov = getattr(resolution.profile, "provenance", None)
    if prov:
        return dict(prov)
    from .cli.common import registry

    reg = registry(args) if args is not None else None
    if reg is None or resolution.profile.name not in reg.records:
        return {}
    return yaml_provenance(reg, resolution.profile.name)
