"""Profile files -> validated, inheritance-resolved ``Profile`` objects, with every problem as an ``Issue``.

Inheritance (as models.dev does it): a variant's fields = its family's ``defaults``, overridden by its
``base`` variant (resolved the same way, in any file), overridden by its own fields. Each top-level field
is replaced whole (a variant that changes one layer kind restates ``layers``); identity (``name``,
``ids``, ``aliases``) is never inherited.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import Issue, ProfileError
from .profile import Profile
from ..schema.family import INHERITED_FIELDS, MAX_LAYERS, CompleteVariant, ProfileFile, VariantEntry
from .yaml_safe import line_for, line_index, load_yaml_text, read_text


@dataclass
class LoadedFile:
    path: Path
    text: str
    model: ProfileFile
    _lines: dict | None = field(default=None, repr=False)

    def line(self, path: tuple) -> int | None:
        if self._lines is None:
            self._lines = line_index(self.text)
        return line_for(self._lines, path)


@dataclass
class VariantRecord:
    """A variant as declared, with where it was declared."""

    entry: VariantEntry
    file: LoadedFile
    index: int  # position in the file's variants list

    @property
    def family(self) -> str:
        return self.file.model.family

    def where(self, *sub) -> str:
        line = self.file.line(("variants", self.index) + tuple(sub))
        return f"{self.file.path}:{line}" if line else str(self.file.path)


def data_path(err_loc: tuple, data: Any) -> tuple:
    """Keep the parts of a pydantic error location that index into the data.

    Pydantic adds union tags (``one``/``list``, the ``kind`` value) to locations; walking the real
    data tells them apart from keys, even when a user's key happens to equal a tag.
    """
    out = []
    cur = data
    for p in err_loc:
        if isinstance(cur, dict) and p in cur:
            out.append(p)
            cur = cur[p]
        elif isinstance(cur, list) and isinstance(p, int) and 0 <= p < len(cur):
            out.append(p)
            cur = cur[p]
        elif isinstance(cur, (dict, list)) or cur is None:
            if isinstance(cur, dict) and isinstance(p, str) and not _is_tag(p):
                out.append(p)  # a missing or unknown key: still part of the path
                cur = None
    return tuple(out)


def _is_tag(p: str) -> bool:
    return p in ("one", "list") or p in _KIND_TAGS


_KIND_TAGS = {"full", "sliding", "chunked", "latent", "indexer", "state", "none"}


MAX_ISSUES_PER_FILE = 50  # a file with more problems than this is not worth listing line by line
MAX_SHOWN_INPUT = 80  # characters of an offending value quoted in a message


def shown(value: Any) -> str:
    """``repr`` of an offending value, cut to a readable length (a 1 MB string must not fill the terminal)."""
    r = repr(value)
    return r if len(r) <= MAX_SHOWN_INPUT else r[: MAX_SHOWN_INPUT - 3] + "..."


def pydantic_issues(err: ValidationError, filename: str, lines, data: Any, prefix: tuple = (),
                    schema: str = "profile") -> list[Issue]:
    issues = []
    errors = err.errors(include_url=False)
    for e in errors[:MAX_ISSUES_PER_FILE]:
        path = prefix + data_path(e["loc"], data)
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = f"unknown key {path[-1]!r} (not part of the {schema} schema)" if path else "unknown key"
        elif e["type"] == "missing":
            msg = f"required field {path[-1]!r} is missing" if path else msg
        inp = e.get("input")
        if e["type"] not in ("missing", "extra_forbidden") and not isinstance(inp, (dict, list)):
            msg += f" (got {shown(inp)})"
        issues.append(Issue(filename, lines(path), ".".join(_segment(p) for p in path), msg))
    if len(errors) > MAX_ISSUES_PER_FILE:
        issues.append(Issue(filename, None, "", f"... and {len(errors) - MAX_ISSUES_PER_FILE} more problem(s) in this file"))
    return issues


def _segment(p: Any) -> str:
    """A field-path segment as printed: non-printable characters escaped (a key is user data)."""
    s = str(p)
    return s if s.isprintable() else s.encode("unicode_escape").decode("ascii")


def _crash_issue(e: Exception, filename: str, line: int | None, path: str, what: str) -> Issue:
    """A validator that raised something other than a validation error: still an error in this file.

    (The schema model should have rejected the input with a sentence; the message says what broke so
    the gap can be closed, instead of a traceback or an ``internal error`` with no location.)
    """
    return Issue(filename, line, path, f"{what} cannot be checked: {type(e).__name__}: {e}")


def load_file(path: Path) -> LoadedFile:
    """Parse and schema-check one file (no inheritance yet). Raises ``ProfileError``."""
    text = read_text(path)
    return file_from_yaml(path, text, load_yaml_text(text, str(path)))


def file_from_yaml(path: Path, text: str, data: Any) -> LoadedFile:
    """Schema-check one file already parsed (``data``: ``load_yaml_text(text)``), so a caller that needs the
    parsed document too (``validate``'s JSON Schema pass) parses the file once. Raises ``ProfileError``."""
    if not isinstance(data, dict):
        raise ProfileError(
            [Issue(str(path), 1, "", f"top level must be a mapping with 'family' and 'variants', got {type(data).__name__}")]
        )
    try:
        model = ProfileFile.model_validate(data)
    except ValidationError as e:
        lf = LoadedFile(path, text, None)  # type: ignore[arg-type]
        raise ProfileError(pydantic_issues(e, str(path), lf.line, data)) from None
    except (ArithmeticError, TypeError, ValueError, LookupError, RecursionError) as e:
        raise ProfileError([_crash_issue(e, str(path), None, "", "this file")]) from None
    return LoadedFile(path, text, model)


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
            issues.append(_crash_issue(e, str(rec.file.path), rec.file.line(("variants", rec.index)),
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
            issues.append(_crash_issue(e, str(rec.file.path), rec.file.line(("variants", rec.index)),
                                       f"variants.{rec.index}", f"variant {name!r} (after inheritance)"))
    return profiles, issues


def _intify(path: tuple) -> tuple:
    return tuple(int(p) if isinstance(p, str) and p.isdigit() else p for p in path)
