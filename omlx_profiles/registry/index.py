"""The registry: every profile file of the built-in ``profiles/`` plus user directories, indexed by id.

Resolution order for a query (first hit wins), each answer saying how it matched:

1. a variant name, HF id or alias (case-insensitive);
2. a quantized conversion's repo name (``mlx-community/Llama-3.1-8B-Instruct-4bit``): the known
   suffixes (``-4bit``, ``-8bit``, ``-bf16``, ``-MLX``, ``-DWQ``, ...) are stripped and the rest must
   equal the repo name of a known HF id; the bits become the weights' quantization;
3. a local model directory or ``config.json`` (handled by the caller through extraction).

User directories (``--profiles DIR``, ``OMLX_PROFILES_PATH``) load after the built-in ones; a user
variant with the same name replaces the built-in one and an id it claims moves to it; both are
reported in ``Registry.notes``. Inside one source a repeated name or id is an error with both places,
and so is an ambiguity: a variant name that is another variant's id or alias, or two variants whose HF
ids share a repo name (``org-a/Model`` and ``org-b/Model``: ``mlx-community/Model-4bit`` could be
either). Across sources the later one wins and says so; a repo name still claimed by two variants then
makes a query that needs it an error naming both, never a silent pick.

Speed: an engine resolves the same few ids on every request, so answers are memoised per query string
(a ``Resolution`` is immutable); a first resolve is a dict lookup, or a few regex steps for a quantized
repo name.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError, Issue, ProfileError, UnknownModelError
from ..files import shown_path, user_path, yaml_files
from .files import LoadedFile, VariantRecord, load_file
from .inherit import resolve_variants
from .paths import builtin_profiles_dir, env_profile_dirs
from .naming import NameQuant, parse_id
from .profile import Profile

@dataclass(frozen=True)
class Resolution:
    """What a query resolved to, and why."""

    profile: Profile
    query: str
    matched_by: str  # name | id | alias | quantized-repo | config | directory
    matched: str  # the id/alias/name that matched
    weights_bits: int | None = None  # from the query (…-4bit) when it names one width (None if mixed)
    notes: tuple[str, ...] = ()
    quant: NameQuant | None = None  # what the id's suffixes say about storage (``naming.parse_id``)
    # a remote checkpoint's safetensors headers (``hub``), for exact weights; ``None`` otherwise
    checkpoint: object | None = field(default=None, compare=False, repr=False)
    origin: dict | None = field(default=None, compare=False, repr=False)  # hub: repo, revision, commit, cache

    def explain(self, registry: "Registry | None" = None) -> dict[str, str]:
        """field -> where it came from: the registry YAML ``file:line`` (needs ``registry``), the config key
        of a config.json / Hub config, the safetensors headers (``weights``)."""
        from .provenance import explain

        return explain(self, registry=registry)

    def as_dict(self) -> dict:
        out = self._as_dict()
        if self.quant is not None:  # only when the id names a storage: other answers keep their shape
            out["quantization"] = self.quant.as_dict()
        if self.origin:
            out["hub"] = dict(self.origin)
        return out

    def _as_dict(self) -> dict:
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
    _ambiguous_repos: dict[str, tuple[str, ...]] = field(default_factory=dict)  # repo -> "variant (where)"
    _memo: dict[str, Resolution] = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------------------------------
    def resolve(self, query: object) -> Resolution:
        """The profile a model id names, and how it matched. Raises ``InputError``/``UnknownModelError``."""
        if type(query) is str:
            hit = self._memo.get(query)
            if hit is not None:
                return hit
        res = self._resolve(query)
        if len(self._memo) >= _MEMO_MAX:
            self._memo.clear()
        self._memo[query] = res  # type: ignore[index]  # _resolve accepted it, so it is a str
        return res

    def _repo_hit(self, repo: str, q: str) -> str | None:
        if repo in self._ambiguous_repos:
            raise UnknownModelError(q, [], f"ambiguous: repo name '{repo}' belongs to "
                                    + " and to ".join(self._ambiguous_repos[repo]) + "; give the full HF id")
        return self._repo_index.get(repo)

    def _resolve(self, query: object) -> Resolution:
        q = _check_query(query)
        hit = self._index.get(q.lower())
        if hit:
            name, how, original = hit
            return Resolution(self.profiles[name], q, how, original)
        parsed = parse_id(q)  # NotMLXCheckpointError for an Ollama tag, a GGUF quant type, ...
        quant = parsed.quant
        for stem in parsed.stems:
            hit = self._index.get(stem.lower())
            repo = stem.rsplit("/", 1)[-1].lower()
            name = hit[0] if hit else self._repo_hit(repo, q)
            if name:
                what = f" with {quant.label()} weights" if quant and (quant.parts or quant.float_bits) else ""
                notes = [f"'{q}' names a converted checkpoint of '{stem.rsplit('/', 1)[-1]}'{what}"]
                if quant and quant.assumed:
                    notes.append(f"the name gives no width: {quant.assumed}")
                notes.extend(quant.notes if quant else ())
                return Resolution(self.profiles[name], q, "quantized-repo", stem,
                                  weights_bits=quant.bits if quant else None, notes=tuple(notes), quant=quant)
        repo = q.rsplit("/", 1)[-1].lower()
        if "/" in q and (name := self._repo_hit(repo, q)):
            return Resolution(self.profiles[name], q, "repo-name", repo,
                              notes=(f"matched by repo name '{repo}' under another organisation",))
        for cand, dropped in parsed.unprefixed:
            hit = self._index.get(cand.lower())
            name = hit[0] if hit else self._repo_hit(cand.rsplit("/", 1)[-1].lower(), q)
            if name:
                notes = [f"vendor prefix '{dropped}' dropped from '{q.rsplit('/', 1)[-1]}'"]
                if quant and (quant.parts or quant.float_bits):
                    notes.append(f"'{q}' names a converted checkpoint with {quant.label()} weights")
                return Resolution(self.profiles[name], q, "repo-name", cand, weights_bits=quant.bits if quant else None,
                                  notes=tuple(notes), quant=quant)
        for base in parsed.bases:
            hit = self._index.get(base.lower())
            name = hit[0] if hit else self._repo_hit(base.rsplit("/", 1)[-1].lower(), q)
            if name:
                stripped = parsed.stem[len(base):].lstrip("-_.")
                return Resolution(
                    self.profiles[name], q, "base-architecture", base,
                    weights_bits=quant.bits if quant else None, quant=quant,
                    notes=(f"'{parsed.stem.rsplit('/', 1)[-1]}' is not in the registry; resolved to the base "
                           f"architecture '{base.rsplit('/', 1)[-1]}' (release words '{stripped}' stripped): a "
                           "fine-tune keeps the layer layout, but its max context and vocabulary may differ; "
                           "--hub reads the checkpoint's own config.json",) + (quant.notes if quant else ()))
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

    def __len__(self) -> int:
        return len(self.profiles)

    def __iter__(self):
        return iter(self.profiles.values())


def strip_quant_suffixes(q: str) -> tuple[int | None, str]:
    """``mlx-community/Qwen3-8B-4bit-DWQ`` -> (4, ``mlx-community/Qwen3-8B``); a mixed checkpoint's bits are
    ``None`` (``gpt-oss-20b-MXFP4-Q8`` is not "8-bit"). Kept for callers of the old API: ``naming.parse_id``
    says more (mode, group size, markers)."""
    p = parse_id(q)
    return (p.quant.bits if p.quant else None), p.stem


_MEMO_MAX = 4096
MAX_QUERY = 300
# C0 and C1 controls, DEL, and the invisible format characters that make two ids look alike or reorder
# text on a terminal (zero-width spaces/joiners, bidi embeddings/overrides/isolates, BOM).
_BAD_CHARS = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


def _check_query(query: object) -> str:
    if not isinstance(query, str):
        raise InputError(f"model id must be a string, got {type(query).__name__}")
    q = query.strip(" ")  # only spaces: str.strip() would also eat NEL/U+2028 and hide them
    if not q:
        raise InputError("model id is empty")
    if len(q) > MAX_QUERY:
        raise InputError(f"model id is {len(q)} characters long; ids are at most {MAX_QUERY}")
    m = _BAD_CHARS.search(q)
    if m:
        raise InputError(f"model id contains a control or invisible character (U+{ord(m.group()):04X} at position {m.start()})")
    # a Hub address pasted from the browser names the same repo: without this, "https:" was taken for an
    # organisation ("matched by repo name under another organisation")
    return _HUB_URL.sub("", q, count=1)


_HUB_URL = re.compile(r"^(?:hf://|(?:https?://)?(?:www\.)?(?:huggingface\.co|hf\.co)/)(?=[^/]+/[^/]+/?$)", re.I)


@dataclass(frozen=True, slots=True)
class _Claim:
    """A variant's claim on an id or alias; ``where`` (file:line) is only computed for a message."""

    name: str
    rec: VariantRecord
    fld: str  # "ids" | "aliases"
    j: int
    src: int  # source index: 0 = built-in, then user directories in order
    how: str  # "id" | "alias"
    key: str  # as written

    @property
    def where(self) -> str:
        return self.rec.where(self.fld, self.j)


def _split_where(where: str) -> tuple[str, int | None]:
    """``"profiles/x.yaml:12"`` -> (``"profiles/x.yaml"``, 12); a bare path keeps ``None``."""
    head, _, tail = where.rpartition(":")
    return (head, int(tail)) if head and tail.isdigit() else (where, None)


def profile_files(directory: Path) -> list[Path]:
    """The family files of a profiles directory (kernel tables and calibration data live in subfolders)."""
    try:
        directory = Path(directory)
        if not directory.is_dir():
            why = "is not a directory" if directory.exists() else "profiles directory does not exist"
            raise ProfileError([Issue(shown_path(str(directory), 160), None, "", why)])
        # every *.yaml / *.yml that is not a directory: a FIFO, a device or a dangling link is reported by
        # the loader ("not a regular file"), never opened, never silently skipped; an unreadable
        # directory is an error (pathlib's glob would have returned nothing)
        return yaml_files(directory)
    except InputError as e:
        raise ProfileError([Issue(shown_path(str(directory), 160), None, "", f"cannot read profiles directory: {e}")]) from None
    except (OSError, ValueError) as e:  # name too long, permission denied, embedded NUL
        why = getattr(e, "strerror", None) or str(e)
        raise ProfileError([Issue(shown_path(str(directory), 160), None, "", f"cannot read profiles directory: {why}")]) from None


def _load_source(paths: list[Path | LoadedFile]) -> tuple[list[LoadedFile], list[Issue]]:
    files, issues = [], []
    for p in paths:
        if isinstance(p, LoadedFile):  # already parsed by the caller (``validate``): not parsed again
            files.append(p)
            continue
        try:
            files.append(load_file(p))
        except ProfileError as e:
            issues.extend(e.issues)
    return files, issues


def build_registry(sources: list[list[Path | LoadedFile]], *, strict: bool = True) -> Registry:
    """Load several sources (built-in first, then user directories) into one registry. A source's entry is
    a file's path, or the file already loaded (``files.load_file`` / ``file_from_yaml``).

    With ``strict`` any issue raises ``ProfileError`` listing all of them; otherwise broken files are
    skipped and their issues land in ``notes``.
    """
    reg = Registry()
    all_issues: list[Issue] = []
    records: dict[str, VariantRecord] = {}
    name_src: dict[str, int] = {}
    owner: dict[str, _Claim] = {}  # lower key -> who claims it (``where`` is only computed for messages)
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
                name_src[entry.name] = src_i
        # ids and aliases: unique within a source, a later source takes them over (and says so)
        for name, rec in seen_in_source.items():
            keys = [(k, "id", "ids", j) for j, k in enumerate(rec.entry.ids)] + [
                (k, "alias", "aliases", j) for j, k in enumerate(rec.entry.aliases)]
            for key, how, fld, j in keys:
                low = key.lower()
                claim = _Claim(name, rec, fld, j, src_i, how, key)
                if low in owner:
                    prev = owner[low]
                    prev_name, prev_src = prev.name, prev.src
                    if prev_name == name and prev_src == src_i:
                        all_issues.append(Issue(str(rec.file.path), rec.file.line(("variants", rec.index, fld, j)),
                                                f"variants.{rec.index}.{fld}.{j}", f"{key!r} is listed twice"))
                        continue
                    if prev_src == src_i:
                        all_issues.append(Issue(str(rec.file.path), rec.file.line(("variants", rec.index, fld, j)),
                                                f"variants.{rec.index}.{fld}.{j}",
                                                f"id {key!r} is already claimed by variant {prev_name!r} at {prev.where}"))
                        continue
                    if prev_name != name:
                        reg.notes.append(f"{claim.where}: {key!r} now resolves to user variant {name!r} "
                                         f"instead of {prev_name!r} ({prev.where})")
                owner[low] = claim
    # a variant name that is also another variant's id or alias: one query, two answers
    name_wins: set[str] = set()
    for name, rec in records.items():
        low = name.lower()
        if low not in owner or owner[low].name == name:
            continue
        c = owner[low]
        other, other_where, other_src, how, key = c.name, c.where, c.src, c.how, c.key
        here = rec.where("name")
        if other_src == name_src[name]:
            all_issues.append(Issue(str(rec.file.path), rec.file.line(("variants", rec.index, "name")),
                                    f"variants.{rec.index}.name",
                                    f"variant name {name!r} is also the {how} {key!r} of variant {other!r} at {other_where}"))
        elif name_src[name] > other_src:
            name_wins.add(low)
            reg.notes.append(f"{here}: {name!r} now resolves to user variant {name!r} instead of {other!r} ({other_where})")
        else:
            reg.notes.append(f"{other_where}: {key!r} now resolves to user variant {other!r} instead of variant {name!r} ({here})")
    # repo names (the part after the org) that quantized conversions are matched by
    repos: dict[str, dict[int, dict[str, _Claim]]] = {}  # repo -> source -> variant -> first claim
    for c in owner.values():
        if c.how == "id" and "/" in c.key:
            repo = c.key.rsplit("/", 1)[-1].lower()
            repos.setdefault(repo, {}).setdefault(c.src, {}).setdefault(c.name, c)
    for repo, by_src in repos.items():
        for src_i, claims in by_src.items():
            if len(claims) > 1:
                (n1, c1), (n2, c2) = list(claims.items())[:2]
                w1, w2 = c1.where, c2.where
                file2, line2 = _split_where(w2)
                all_issues.append(Issue(file2, line2, "",
                                        f"ambiguous repo name {repo!r}: variant {n2!r} ({w2}) and variant {n1!r} ({w1}) "
                                        f"both have an HF id ending in '/{repo}', so a converted repo such as "
                                        f"'mlx-community/{repo}-4bit' cannot tell them apart"))
    profiles, issues = resolve_variants(records)
    all_issues.extend(issues)
    if all_issues and strict:
        raise ProfileError(all_issues)
    reg.notes.extend(str(i) for i in all_issues)
    reg.profiles = profiles
    reg.records = records
    for low, c in owner.items():
        if c.name in profiles and low not in name_wins:
            reg._index[low] = (c.name, c.how, c.key)
    for name in profiles:
        low = name.lower()
        if low not in reg._index or low in name_wins:
            reg._index[low] = (name, "name", name)
    for repo, by_src in repos.items():
        top = by_src[max(by_src)]
        live = {n: c for n, c in top.items() if n in profiles}
        if len(live) == 1:
            reg._repo_index[repo] = next(iter(live))
        elif len(live) > 1:
            reg._ambiguous_repos[repo] = tuple(f"variant {n!r} ({c.where})" for n, c in live.items())
    return reg


def load_registry(extra_dirs: list[Path | str] | None = None, *, include_env: bool = True, strict: bool = True) -> Registry:
    """The built-in registry plus ``extra_dirs`` and ``OMLX_PROFILES_PATH`` (user entries win)."""
    sources = [profile_files(builtin_profiles_dir())]
    try:
        dirs = [user_path(d, "profiles directory") for d in (extra_dirs or [])]
    except TypeError as e:
        raise InputError(f"profile directories must be paths: {e}") from None
    origin = {d: "--profiles" for d in dirs}
    if include_env:
        try:
            env = env_profile_dirs()
        except (InputError, OSError, ValueError) as e:  # a NUL in the list
            raise ProfileError([Issue("OMLX_PROFILES_PATH", None, "", f"cannot use this directory list: {e}")]) from None
        origin.update({d: "OMLX_PROFILES_PATH" for d in env if d not in origin})
        dirs = env + dirs
    for d in dirs:
        try:
            found = profile_files(d)
            if not found:  # a user directory that adds nothing is a mistake said, not an empty overlay
                raise ProfileError([Issue(shown_path(str(d), 160), None, "", "profiles directory holds no profile files "
                                          "(*.yaml / *.yml): nothing would be loaded from it")])
        except ProfileError as e:  # say which setting named the directory
            raise ProfileError([Issue(i.file, i.line, i.path, f"{i.message} (from {origin.get(d, '--profiles')})")
                                for i in e.issues]) from None
        sources.append(found)
    return build_registry(sources, strict=strict)
