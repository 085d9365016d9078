"""The registry: every profile file of the built-in ``profiles/`` plus user directories, indexed by id.

Resolution order for a query (first hit wins), each answer saying how it matched:

1. a variant name, HF id or alias (case-insensitive);
2. a quantized conversion's repo name (``mlx-community/Llama-3.1-8B-Instruct-4bit``): the known
   suffixes (``-4bit``, ``-8bit``, ``-bf16``, ``-MLX``, ``-DWQ``, ...) are stripped and the rest must
   equal the repo name of a known HF id; the bits become the weights' quantization;
3. a local model directory or ``config.json`` (handled by the caller through extraction).

User directories (``--profiles DIR``, ``OMLX_PROFILES_PATH``) load after the built-in ones; a user
variant with the same name replaces the built-in one and an id it claims moves to it; both are
reported in ``Registry.notes``. Inside one source a repeated name or id is an error with both places.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path

from .errors import InputError, Issue, ProfileError, UnknownModelError
from .loader import LoadedFile, VariantRecord, load_file, resolve_variants
from .paths import builtin_profiles_dir, env_profile_dirs
from .profile import Profile

# Suffixes of converted repos, stripped (repeatedly) from the end of the repo name.
_QUANT_SUFFIX = re.compile(
    r"[-_.](?:(?P<bits>[2-8])-?bits?|(?P<q>q[2-8](?:_k(?:_[msl])?)?)|mxfp4|nvfp4|bf16|fp16|f16|fp32|dwq(?:-v\d+)?|mlx|awq|gptq|"
    r"mixed[_-]\d+[_-]\d+|instruct-mlx|optiq|dynamic|g\d+)$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Resolution:
    """What a query resolved to, and why."""

    profile: Profile
    query: str
    matched_by: str  # name | id | alias | quantized-repo | config | directory
    matched: str  # the id/alias/name that matched
    weights_bits: int | None = None  # from the query (…-4bit) when it names a quantization
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return {
            "query": self.query,
            "variant": self.profile.name,
            "family": self.profile.family,
            "matched_by": self.matched_by,
            "matched": self.matched,
            "weights_bits": self.weights_bits,
            "source": self.profile.source,
            "ids": list(self.profile.ids),
            "aliases": list(self.profile.aliases),
            "notes": list(self.notes),
        }


@dataclass
class Registry:
    profiles: dict[str, Profile] = field(default_factory=dict)
    records: dict[str, VariantRecord] = field(default_factory=dict)
    files: list[LoadedFile] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    _index: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # key -> (variant, how, original)
    _repo_index: dict[str, str] = field(default_factory=dict)
    model_types: dict[str, list[str]] = field(default_factory=dict)  # model_type -> families

    # ------------------------------------------------------------------------------------------
    def resolve(self, query: object) -> Resolution:
        q = _check_query(query)
        hit = self._index.get(q.lower())
        if hit:
            name, how, original = hit
            return Resolution(self.profiles[name], q, how, original)
        bits, stem = strip_quant_suffixes(q)
        if stem != q:
            repo = stem.rsplit("/", 1)[-1].lower()
            name = self._repo_index.get(repo) or (self._index.get(stem.lower()) or (None,))[0]
            if name:
                return Resolution(
                    self.profiles[name], q, "quantized-repo", stem,
                    weights_bits=bits,
                    notes=(f"'{q}' names a converted checkpoint of '{stem.rsplit('/', 1)[-1]}'"
                           + (f" with {bits}-bit weights" if bits else ""),),
                )
        repo = q.rsplit("/", 1)[-1].lower()
        if "/" in q and repo in self._repo_index:
            name = self._repo_index[repo]
            return Resolution(self.profiles[name], q, "repo-name", repo,
                              notes=(f"matched by repo name '{repo}' under another organisation",))
        raise UnknownModelError(q, self.suggest(q), self._family_hint(q))

    def suggest(self, q: str, n: int = 5) -> list[str]:
        keys = {orig for (_, _, orig) in self._index.values()}
        return difflib.get_close_matches(q, sorted(keys), n=n, cutoff=0.4) or difflib.get_close_matches(
            q.lower(), sorted(k.lower() for k in keys), n=n, cutoff=0.3
        )

    def _family_hint(self, q: str) -> str:
        fams = self.model_types.get(q.lower())
        if fams:
            names = [p.name for p in self.profiles.values() if p.family in fams]
            return f"'{q}' is a model_type, not a checkpoint; variants: {', '.join(sorted(names))}"
        return ""

    def ids(self) -> list[str]:
        return sorted({orig for (_, _, orig) in self._index.values()})

    def __len__(self) -> int:
        return len(self.profiles)

    def __iter__(self):
        return iter(self.profiles.values())

    def record(self, name: str) -> VariantRecord:
        return self.records[name]


def strip_quant_suffixes(q: str) -> tuple[int | None, str]:
    """``mlx-community/Qwen3-8B-4bit-DWQ`` -> (4, ``mlx-community/Qwen3-8B``)."""
    bits = None
    stem = q
    while True:
        m = _QUANT_SUFFIX.search(stem)
        if not m:
            return bits, stem
        if m.group("bits") and bits is None:
            bits = int(m.group("bits"))
        elif m.group("q") and bits is None:
            bits = int(m.group("q")[1])
        elif m.group(0)[1:].lower() in ("bf16", "fp16", "f16") and bits is None:
            bits = 16
        elif m.group(0)[1:].lower() in ("mxfp4", "nvfp4") and bits is None:
            bits = 4
        stem = stem[: m.start()]


def _check_query(query: object) -> str:
    if not isinstance(query, str):
        raise InputError(f"model id must be a string, got {type(query).__name__}")
    q = query.strip()
    if not q:
        raise InputError("model id is empty")
    if len(q) > 300:
        raise InputError(f"model id is {len(q)} characters long; ids are at most 300")
    if any(ord(c) < 32 or ord(c) == 127 for c in q):
        raise InputError("model id contains control characters")
    return q


def profile_files(directory: Path) -> list[Path]:
    """The family files of a profiles directory (kernel tables and calibration data live in subfolders)."""
    if not directory.is_dir():
        raise ProfileError([Issue(str(directory), None, "", "profiles directory does not exist")])
    return sorted(p for p in directory.glob("*.yaml") if p.is_file())


def _load_source(paths: list[Path]) -> tuple[list[LoadedFile], list[Issue]]:
    files, issues = [], []
    for p in paths:
        try:
            files.append(load_file(p))
        except ProfileError as e:
            issues.extend(e.issues)
    return files, issues


def build_registry(sources: list[list[Path]], *, strict: bool = True) -> Registry:
    """Load several sources (built-in first, then user directories) into one registry.

    With ``strict`` any issue raises ``ProfileError`` listing all of them; otherwise broken files are
    skipped and their issues land in ``notes``.
    """
    reg = Registry()
    all_issues: list[Issue] = []
    records: dict[str, VariantRecord] = {}
    owner: dict[str, tuple[str, str, int]] = {}  # lower key -> (variant, where, source index)
    for src_i, paths in enumerate(sources):
        files, issues = _load_source(paths)
        all_issues.extend(issues)
        reg.files.extend(files)
        seen_in_source: dict[str, VariantRecord] = {}
        for lf in files:
            for mt in lf.model.model_types:
                reg.model_types.setdefault(mt.lower(), []).append(lf.model.family)
            for i, entry in enumerate(lf.model.variants):
                rec = VariantRecord(entry, lf, i)
                if entry.name in seen_in_source:
                    other = seen_in_source[entry.name]
                    all_issues.append(Issue(str(lf.path), lf.line(("variants", i, "name")), f"variants.{i}.name",
                                            f"variant name {entry.name!r} is also declared at {other.where('name')}"))
                    continue
                seen_in_source[entry.name] = rec
                if entry.name in records:
                    reg.notes.append(f"{rec.where('name')}: user variant {entry.name!r} overrides the one at "
                                     f"{records[entry.name].where('name')}")
                records[entry.name] = rec
        # ids and aliases: unique within a source, a later source takes them over (and says so)
        for name, rec in seen_in_source.items():
            keys = [(k, "id", "ids", j) for j, k in enumerate(rec.entry.ids)] + [
                (k, "alias", "aliases", j) for j, k in enumerate(rec.entry.aliases)]
            for key, how, fld, j in keys:
                low = key.lower()
                where = rec.where(fld, j)
                if low in owner:
                    prev_name, prev_where, prev_src = owner[low]
                    if prev_name == name and prev_src == src_i:
                        all_issues.append(Issue(str(rec.file.path), rec.file.line(("variants", rec.index, fld, j)),
                                                f"variants.{rec.index}.{fld}.{j}", f"{key!r} is listed twice"))
                        continue
                    if prev_src == src_i:
                        all_issues.append(Issue(str(rec.file.path), rec.file.line(("variants", rec.index, fld, j)),
                                                f"variants.{rec.index}.{fld}.{j}",
                                                f"id {key!r} is already claimed by variant {prev_name!r} at {prev_where}"))
                        continue
                    if prev_name != name:
                        reg.notes.append(f"{where}: {key!r} now resolves to user variant {name!r} "
                                         f"instead of {prev_name!r} ({prev_where})")
                owner[low] = (name, where, src_i)
    profiles, issues = resolve_variants(records)
    all_issues.extend(issues)
    if all_issues and strict:
        raise ProfileError(all_issues)
    reg.notes.extend(str(i) for i in all_issues)
    reg.profiles = profiles
    reg.records = records
    for name in profiles:
        reg._index[name.lower()] = (name, "name", name)
    for low, (name, _, _) in owner.items():
        if name not in profiles:
            continue
        rec = records[name]
        how = "id" if any(k.lower() == low for k in rec.entry.ids) else "alias"
        original = next(k for k in (*rec.entry.ids, *rec.entry.aliases) if k.lower() == low)
        reg._index[low] = (name, how, original)
        if how == "id" and "/" in original:
            reg._repo_index.setdefault(original.rsplit("/", 1)[-1].lower(), name)
    return reg


def load_registry(extra_dirs: list[Path | str] | None = None, *, include_env: bool = True, strict: bool = True) -> Registry:
    """The built-in registry plus ``extra_dirs`` and ``OMLX_PROFILES_PATH`` (user entries win)."""
    sources = [profile_files(builtin_profiles_dir())]
    dirs = [Path(d) for d in (extra_dirs or [])]
    if include_env:
        dirs = env_profile_dirs() + dirs
    for d in dirs:
        sources.append(profile_files(d))
    return build_registry(sources, strict=strict)
