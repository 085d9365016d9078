"""``omlx-profiles validate``: every problem of a set of profile files, each with ``file:line``, field path
and a sentence.

Per file, parsed once: safe YAML parse (duplicate keys, aliases, tabs and binary bytes are errors), the
Pydantic models (types, unknown keys, positive counts, layout rules), then the committed JSON Schema with
``jsonschema`` (what editors check, so it must agree) on the same parsed document. Across files: inheritance, completeness, and
ids claimed twice. Kernel-route tables (``kernels/*.yaml``) and calibration files
(``calibration/<backend>/*.yaml``) are checked against their own models and schemas.

Files outside the built-in ``profiles/`` are checked the way the registry loads a user directory: on
top of the built-in profiles (a ``base:`` may name a built-in variant; an id taken over is a note), and
a file that is not a regular file (FIFO, device, dangling link) is reported, never opened.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from pydantic import ValidationError

from ..errors import InputError, Issue, ProfileError
from ..files import shown_path, yaml_files
from ..schema.calibration import CalibrationRunFile
from ..schema.export import CALIBRATION, KERNELS, MODULE, MODULE_INDEX, NAMING, PROFILE, SHARDING, version_dir
from ..schema.kernels import KernelRoutesFile
from .files import MAX_ISSUES_PER_FILE, LoadedFile, file_from_yaml, pydantic_issues
from .index import build_registry, profile_files
from .paths import builtin_profiles_dir, data_file_kind, schema_dir
from .yaml_safe import line_for, line_index, load_yaml_text, read_text


def _jsonschema_issues(path: Path, text: str, data, schema_name: str) -> list[Issue]:
    import jsonschema  # imported here: only validation needs it

    schema_file = schema_dir() / version_dir() / schema_name
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


# what ``validate`` checks each kind of data file against: (Pydantic model, committed JSON Schema);
# ``family`` files go through the loader and the registry instead. ``module`` (mlx_lm/<module>.yaml,
# the mlx-lm module recipes, schema.module) and ``module_index`` (mlx_lm/index.yaml) are checked fully; a
# ``derived`` table (calibration/measured_traits.yaml), which its generator's test keeps current.
_KIND_NAMES = ("kernels", "calibration", "sharding", "naming", "module", "module_index", "derived")
_SUBDIRS = ("kernels", "mlx_lm", "naming")  # walked in a directory (calibration/<backend>/ as well)
_WORD = {"kernels": "kernel-route", "calibration": "calibration", "sharding": "sharding-plan",
         "naming": "naming-table", "module": "module", "module_index": "module-index", "derived": "derived-table"}


def _kind_model(kind: str):
    if kind == "kernels":
        return KernelRoutesFile, KERNELS
    if kind == "calibration":
        return CalibrationRunFile, CALIBRATION
    if kind == "sharding":
        from ..schema.sharding import ShardingFile  # the sharding package sits above this module

        return ShardingFile, SHARDING
    if kind == "naming":
        from .naming import NamingTable

        return NamingTable, NAMING
    if kind == "module":
        from ..schema.module import ModuleRecipe

        return ModuleRecipe, MODULE
    if kind == "module_index":
        from ..schema.module import ModuleIndex

        return ModuleIndex, MODULE_INDEX
    return None, None


def expand(paths: list[Path]) -> tuple[dict[str, list[Path]], list[Issue]]:
    """Sort the arguments by kind (``family``, ``kernels``, ``calibration``, ``module``, see
    ``paths.data_file_kind``); a directory is walked the way ``profiles/`` is laid out."""
    found: dict[str, list[Path]] = {"family": [], **{k: [] for k in _KIND_NAMES}}
    issues = []
    for p in paths:
        try:
            p = Path(p)
            if p.is_dir():
                fam, other = [], 0
                for f in yaml_files(p):  # *.yaml / *.yml in any case; non-regular entries: reported
                    kind = data_file_kind(f)  # profiles/mlx_lm/ itself given: recipes, not family files
                    (fam if kind == "family" else found[kind]).append(f)
                    other += kind != "family"
                found["family"] += fam
                subs = [p / sub for sub in _SUBDIRS]
                for d in subs:
                    if d.is_dir():
                        for f in yaml_files(d, f"{d.name} directory"):
                            found[data_file_kind(f)].append(f)
                cal = p / "calibration"
                if cal.is_dir():
                    for d in sorted(x for x in cal.iterdir() if x.is_dir()):
                        found["calibration"] += yaml_files(d, "calibration directory")
                if not fam and not other and not cal.is_dir() and not any(d.is_dir() for d in subs):
                    issues.append(Issue(shown_path(str(p), 160), None, "", "no profile files (*.yaml, *.yml) in this directory"))
            elif p.is_file():
                found[data_file_kind(p)].append(p)
            elif p.exists():
                issues.append(Issue(shown_path(str(p), 160), None, "", "not a regular file or directory"))
            else:
                issues.append(Issue(shown_path(str(p), 160), None, "", "no such file or directory"))
        except InputError as e:
            issues.append(Issue(shown_path(str(p), 160), None, "", str(e)))
        except (OSError, ValueError) as e:  # name too long, permission denied, embedded NUL
            issues.append(Issue(shown_path(str(p), 160), None, "", f"cannot read: {getattr(e, 'strerror', None) or e}"))
    return found, issues


def _yaml_in(d: Path) -> list[Path]:
    try:
        return [x for x in yaml_files(d) if data_file_kind(x) == "family"]
    except InputError:
        return []


def validate_data_file(path: Path, kind: str) -> list[Issue]:
    """A kernel-route table, calibration file, sharding plan, naming table or module recipe: safe YAML, the Pydantic model, then the
    committed JSON Schema (what editors check, so the two must agree)."""
    model, schema_name = _kind_model(kind)
    try:
        text = read_text(path)
        data = load_yaml_text(text, str(path))
    except ProfileError as e:
        return e.issues
    if model is None:
        return [] if isinstance(data, dict) else [Issue(str(path), 1, "", "top level must be a mapping")]
    try:
        model.model_validate(data)
    except ValidationError as e:
        idx = line_index(text)
        return pydantic_issues(e, str(path), lambda p: line_for(idx, p), data, schema=_WORD[kind])
    except (ArithmeticError, TypeError, ValueError, LookupError, RecursionError) as e:
        return [Issue(str(path), None, "", f"this file cannot be checked: {type(e).__name__}: {e}")]
    return _jsonschema_issues(path, text, data, schema_name)


def validate_paths(paths: list[Path] | None = None, *, with_siblings: bool = False) -> tuple[list[Issue], int]:
    """All issues of the given files/directories (default: the built-in registry) and the variant count.

    Family files are checked together with the rest of the registry they would load into: the
    built-in profiles, plus with ``with_siblings`` (what the pre-commit hook asks for: it passes only the
    staged files) the other family files of each given file's directory, so a ``base:`` in an unchanged
    sibling resolves and an id claimed by an unchanged file is found.
    """
    found, issues = expand(paths or [builtin_profiles_dir()])
    good: list[Path] = []
    bad: set[Path] = set()
    loaded: dict[Path, LoadedFile] = {}  # each family file is parsed once: Pydantic, JSON Schema, registry
    for p in found["family"]:
        try:
            text = read_text(p)
            data = load_yaml_text(text, str(p))
            lf = file_from_yaml(p, text, data)
        except ProfileError as e:
            issues.extend(e.issues)
            bad.add(_key(p))
            continue
        schema_issues = _jsonschema_issues(p, text, data, PROFILE)
        if schema_issues:
            issues.extend(schema_issues)
            bad.add(_key(p))
            continue
        good.append(p)
        loaded[_key(p)] = lf
    count = 0
    if good:
        try:
            builtin = profile_files(builtin_profiles_dir())
        except ProfileError:
            builtin = []
        in_builtin = {_key(b) for b in builtin}
        base = [b for b in builtin if _key(b) not in bad]  # a broken built-in file is reported once, above
        user = [p for p in good if _key(p) not in in_builtin]
        seen = {_key(p) for p in base + user} | bad
        for d in sorted({p.parent for p in user} if with_siblings else (), key=str):  # unchanged siblings
            for sib in _yaml_in(d):
                if _key(sib) not in seen:
                    user.append(sib)
                    seen.add(_key(sib))
        user.sort(key=lambda p: (str(p.parent), p.name))  # the order a directory loads in
        # user files load the way the registry loads a user directory: on top of the built-in profiles,
        # so a `base:` naming a built-in variant resolves and an id taken over is a note, not an error
        sources = [[_reuse(loaded, x) for x in s] for s in (base, user) if s]
        try:
            reg = build_registry(sources)
            mine = {_key(p) for p in good}
            count = sum(1 for name, rec in reg.records.items() if name in reg.profiles and _key(rec.file.path) in mine)
        except ProfileError as e:
            issues.extend(e.issues)
    for kind in _KIND_NAMES:
        for f in found[kind]:
            issues.extend(validate_data_file(f, kind))
    return list(dict.fromkeys(issues)), count


def _reuse(loaded: dict[Path, LoadedFile], p: Path) -> Path | LoadedFile:
    """The file as already loaded above, under the path the registry names it by (messages about ids claimed
    twice name the built-in path, as a registry load does), else the path (loaded by ``build_registry``)."""
    lf = loaded.get(_key(p))
    if lf is None:
        return p
    return lf if lf.path == p else replace(lf, path=p, _lines=None)


def _key(p: Path) -> Path:
    try:
        return Path(p).resolve()
    except (OSError, RuntimeError):
        return Path(p)
