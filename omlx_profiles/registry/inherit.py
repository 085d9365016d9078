"""Declared variants -> resolved ``Profile`` objects: inheritance, then completeness, every problem an ``Issue``.

Inheritance (as models.dev does it): a variant's fields = its family's ``defaults``, overridden by its
``base`` variant (resolved the same way, in any file), overridden by its own fields. Each top-level field
is replaced whole (a variant that changes one layer kind restates ``layers``); identity (``name``,
``ids``, ``aliases``) is never inherited.
"""
from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ..errors import Issue
from ..schema.family import INHERITED_FIELDS, MAX_LAYERS, CompleteVariant, VariantEntry
from .files import VariantRecord, crash_issue, pydantic_issues
from .profile import Profile


def _explicit(entry: VariantEntry) -> dict[str, Any]:
    return {k: getattr(entry, k) for k in entry.model_fields_set if k in INHERITED_FIELDS}


def resolve_variants(records: dict[str, VariantRecord]) -> tuple[dict[str, Profile], list[Issue]]:
    """Apply inheritance and the completeness checks to every variant."""
    merged: dict[str, dict[str, Any]] = {}
    issues: list[Issue] = []

    def merge(name: str, stack: tuple[str, ...]) -> dict[str, Any] | None:
        if name in merged:
            return merged[name]
        rec = records[name]
        fam_defaults = {k: getattr(rec.file.model.defaults, k) for k in rec.file.model.defaults.model_fields_set}
        out = dict(fam_defaults)
        base = rec.entry.base
        if base is not None:
            if base in stack or base == name:
                issues.append(Issue(str(rec.file.path), rec.file.line(("variants", rec.index, "base")), f"variants.{rec.index}.base",
                                    f"inheritance cycle: {' -> '.join(stack + (name, base))}"))
                return None
            if base not in records:
                issues.append(Issue(str(rec.file.path), rec.file.line(("variants", rec.index, "base")), f"variants.{rec.index}.base",
                                    f"base variant {base!r} does not exist"))
                return None
            parent = merge(base, stack + (name,))
            if parent is None:
                return None
            out.update(parent)
        out.update(_explicit(rec.entry))
        merged[name] = out
        return out

    profiles: dict[str, Profile] = {}
    for name, rec in records.items():
        data = merge(name, ())
        if data is None:
            continue
        payload = {k: v for k, v in data.items() if v is not None}
        try:
            complete = CompleteVariant.model_validate(payload)
            if complete.num_layers > MAX_LAYERS:
                issues.append(Issue(str(rec.file.path), rec.file.line(("variants", rec.index, "num_layers"))
                                    or rec.file.line(("variants", rec.index)), f"variants.{rec.index}.num_layers",
                                    f"variant {name!r}: num_layers {complete.num_layers} is out of range (at most {MAX_LAYERS})"))
                continue
        except (ArithmeticError, TypeError, LookupError, RecursionError) as e:
            issues.append(crash_issue(e, str(rec.file.path), rec.file.line(("variants", rec.index)),
                                       f"variants.{rec.index}", f"variant {name!r} (after inheritance)"))
            continue
        except ValidationError as e:
            for iss in pydantic_issues(e, str(rec.file.path), lambda p: None, payload, ("variants", rec.index)):
                sub = tuple(x for x in iss.path.split(".")[2:] if x)
                line = rec.file.line(("variants", rec.index) + _intify(sub)) or rec.file.line(("variants", rec.index))
                msg = iss.message
                if not sub:
                    msg = f"variant {name!r} (after inheritance): {msg}"
                issues.append(Issue(iss.file, line, iss.path, msg))
            continue
        try:
            profiles[name] = Profile.from_variant(
                complete,
                name=name,
                family=rec.family,
                ids=rec.entry.ids,
                aliases=rec.entry.aliases,
                source=f"{rec.file.path}#{name}",
            )
        except (ArithmeticError, TypeError, ValueError, LookupError, RecursionError) as e:
            issues.append(crash_issue(e, str(rec.file.path), rec.file.line(("variants", rec.index)),
                                       f"variants.{rec.index}", f"variant {name!r} (after inheritance)"))
    return profiles, issues


def _intify(path: tuple) -> tuple:
    return tuple(int(p) if isinstance(p, str) and p.isdigit() else p for p in path)
