"""``omlx-profiles validate``: every problem of a set of profile files, each with ``file:line``, field path
and a sentence.

Per file: safe YAML parse (duplicate keys, aliases, tabs and binary bytes are errors), the Pydantic
models (types, unknown keys, positive counts, layout rules), then the committed JSON Schema with
``jsonschema`` (what editors check, so it must agree). Across files: inheritance, completeness, and
ids claimed twice. Kernel-route tables (``kernels/*.yaml``) are checked against their own schema.

Files outside the built-in ``profiles/`` are checked the way the registry loads a user directory: on
top of the built-in profiles (a ``base:`` may name a built-in variant; an id taken over is a note), and
a file that is not a regular file (FIFO, device, dangling link) is reported, never opened.
"""
from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from .errors import InputError, Issue, ProfileError
from .files import yaml_files
from .loader import MAX_ISSUES_PER_FILE, LoadedFile, load_file, pydantic_issues
from .paths import builtin_profiles_dir, schema_dir
from .registry import build_registry, profile_files
from .schema_models import KernelRoutesFile
from .yaml_io import line_for, line_index, load_yaml_text, read_text


def _jsonschema_issues(path: Path, text: str, data, schema_name: str) -> list[Issue]:
    import jsonschema  # imported here: only validation needs it

    schema_file = schema_dir() / schema_name
    if not schema_file.is_file():
        return [Issue(str(schema_file), None, "", "schema file is missing; run `omlx-profiles schema --write`")]
    schema = json.loads(schema_file.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    lines = None
    out = []
    errors = sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    if len(errors) > MAX_ISSUES_PER_FILE:
        extra = len(errors) - MAX_ISSUES_PER_FILE
        errors = errors[:MAX_ISSUES_PER_FILE]
    else:
        extra = 0
    for err in errors:
        if lines is None:
            lines = line_index(text)
        p = tuple(err.absolute_path)
        best = jsonschema.exceptions.best_match([err])
        out.append(Issue(str(path), line_for(lines, p), ".".join(map(str, p)), f"(JSON Schema) {_cut(best.message)}"))
    if extra:
        out.append(Issue(str(path), None, "", f"... and {extra} more JSON Schema problem(s) in this file"))
    return out


def _cut(msg: str, n: int = 300) -> str:
    return msg if len(msg) <= n else msg[: n - 3] + "..."


def expand(paths: list[Path]) -> tuple[list[Path], list[Path], list[Issue]]:
    """Split the arguments into family files and kernel-route files; directories are walked."""
    families, kernels, issues = [], [], []
    for p in paths:
        try:
            p = Path(p)
            if p.is_dir():
                found = yaml_files(p)  # *.yaml / *.yml in any case; non-regular entries: reported
                families += found
                kd = p / "kernels"
                if kd.is_dir():
                    kernels += yaml_files(kd, "kernels directory")
                if not found and not kd.is_dir():
                    issues.append(Issue(_shown(p), None, "", "no profile files (*.yaml, *.yml) in this directory"))
            elif p.is_file():
                (kernels if p.parent.name == "kernels" else families).append(p)
            elif p.exists():
                issues.append(Issue(_shown(p), None, "", "not a regular file or directory"))
            else:
                issues.append(Issue(_shown(p), None, "", "no such file or directory"))
        except InputError as e:
            issues.append(Issue(_shown(p), None, "", str(e)))
        except (OSError, ValueError) as e:  # name too long, permission denied, embedded NUL
            issues.append(Issue(_shown(p), None, "", f"cannot read: {getattr(e, 'strerror', None) or e}"))
    return families, kernels, issues


def _shown(p: object, n: int = 160) -> str:
    s = str(p)
    return s if len(s) <= n else s[: n // 2] + "..." + s[-n // 2:]


def validate_kernel_file(path: Path) -> list[Issue]:
    try:
        text = read_text(path)
        data = load_yaml_text(text, str(path))
    except ProfileError as e:
        return e.issues
    try:
        KernelRoutesFile.model_validate(data)
    except ValidationError as e:
        idx = line_index(text)
        return pydantic_issues(e, str(path), lambda p: line_for(idx, p), data)
    except (ArithmeticError, TypeError, ValueError, LookupError, RecursionError) as e:
        return [Issue(str(path), None, "", f"this file cannot be checked: {type(e).__name__}: {e}")]
    return _jsonschema_issues(path, text, data, "kernels.schema.json")


def validate_paths(paths: list[Path] | None = None) -> tuple[list[Issue], int]:
    """All issues of the given files/directories (default: the built-in registry) and the variant count."""
    families, kernels, issues = expand(paths or [builtin_profiles_dir()])
    good: list[Path] = []
    for p in families:
        try:
            lf: LoadedFile = load_file(p)
        except ProfileError as e:
            issues.extend(e.issues)
            continue
        schema_issues = _jsonschema_issues(p, lf.text, load_yaml_text(lf.text, str(p)), "profile.schema.json")
        if schema_issues:
            issues.extend(schema_issues)
            continue
        good.append(p)
    count = 0
    if good:
        sources = [good]
        try:
            builtin = profile_files(builtin_profiles_dir())
        except ProfileError:
            builtin = []
        in_builtin = {b.resolve() for b in builtin}
        if builtin and not any(p.resolve() in in_builtin for p in good):
            # user files are checked the way the registry loads them: on top of the built-in profiles,
            # so a `base:` naming a built-in variant resolves and an id taken over is a note, not an error
            sources = [builtin, good]
        try:
            reg = build_registry(sources)
            mine = {p.resolve() for p in good}
            count = sum(1 for name, rec in reg.records.items() if name in reg.profiles and rec.file.path.resolve() in mine)
        except ProfileError as e:
            issues.extend(e.issues)
    for k in kernels:
        issues.extend(validate_kernel_file(k))
    return issues, count
