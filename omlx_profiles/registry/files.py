"""One profile file -> its validated Pydantic model (``LoadedFile``), or every problem as an ``Issue`` with
file:line; the variants it declares (``VariantRecord``). Inheritance across variants and files, and the
resolved ``Profile``: ``registry.inherit``."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import Issue, ProfileError, quoted
from ..schema.family import ProfileFile, VariantEntry
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
            msg += f" (got {quoted(inp)})"
        issues.append(Issue(filename, lines(path), ".".join(_segment(p) for p in path), msg))
    if len(errors) > MAX_ISSUES_PER_FILE:
        issues.append(Issue(filename, None, "", f"... and {len(errors) - MAX_ISSUES_PER_FILE} more problem(s) in this file"))
    return issues


def _segment(p: Any) -> str:
    """A field-path segment as printed: non-printable characters escaped (a key is user data)."""
    s = str(p)
    return s if s.isprintable() else s.encode("unicode_escape").decode("ascii")


def crash_issue(e: Exception, filename: str, line: int | None, path: str, what: str) -> Issue:
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
        raise ProfileError([crash_issue(e, str(path), None, "", "this file")]) from None
    return LoadedFile(path, text, model)
