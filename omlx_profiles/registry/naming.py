"""Model ids as people write them: ``mlx-community/Qwen3-30B-A3B-Instruct-2507-4bit-DWQ-053125`` -> the
checkpoint it converts (``Qwen3-30B-A3B-Instruct-2507``) and how its weights are stored (affine 4-bit,
group 64, DWQ).

Why one table and one loop: converted repos spell their storage in a dozen ways (``-4bit``, ``-4bit-g32``,
``-qat-4bit``, ``-DWQ``, ``-mxfp4``, ``-MXFP4-Q8``, ``-bf16``, ``-hf-4bit-mlx``, ``-AWQ`` ...), and a new
spelling must be one line of data, not one more ``if``. The table is ``profiles/naming/ids.yaml``: its
``suffixes`` are stripped from the end of the repo name, one at a time, each adding what it says about
storage; ``variants`` (release / fine-tune words) are stripped only to find a base architecture;
``refuse`` rules name ids that are not MLX checkpoints at all (an Ollama tag, a GGUF quant type) and say
why. Nothing here reads files or the network; the quantization a name implies is a claim that the
checkpoint's own ``config.json`` and safetensors headers override wherever they are at hand.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from pydantic import ValidationError

from ..errors import Issue, NotMLXCheckpointError, ProfileError
from ..quantization import kernel_problem
from ..schema.naming import NamingTable, _Suffix
from .paths import builtin_profiles_dir

#: ``mlx_lm.utils`` defaults per mode: (group_size, bits) (also in ``weights.MODE_DEFAULTS``).
_GROUP_DEFAULT = {"affine": 64, "mxfp4": 32, "nvfp4": 16, "mxfp8": 32}


def naming_file() -> Path:
    return builtin_profiles_dir() / "naming" / "ids.yaml"


@lru_cache(maxsize=1)
def _table() -> "_Compiled":
    from .yaml_safe import load_yaml_file

    path = naming_file()
    data = load_yaml_file(path)
    try:
        table = NamingTable.model_validate(data)
    except ValidationError as e:
        first = e.errors(include_url=False)[0]
        raise ProfileError([Issue(str(path), None, ".".join(str(x) for x in first["loc"]), first["msg"])]) from None
    return _Compiled(table)


class _Compiled:
    """The table with every regex compiled once, anchored the way the loop uses it."""

    def __init__(self, t: NamingTable):
        self.table = t
        self.refuse = [(re.compile(r.match, re.IGNORECASE), r) for r in t.refuse]
        self.suffixes = [(re.compile(rf"(?:^|[-_.])(?:{s.token})$", re.IGNORECASE), s) for s in t.suffixes]
        self.variants = [re.compile(rf"[-_.](?:{v.token})$", re.IGNORECASE) for v in t.variants]
        self.prefixes = [re.compile(rf"^(?:{v.token})[-_.](?=.)", re.IGNORECASE) for v in t.prefixes]


# --------------------------------------------------------------------------------------------------
# what a name says
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StoragePart:
    """One quantized storage of (some of) the weights: ``mode`` affine/mxfp4/nvfp4/mxfp8, ``bits``, group."""

    mode: str
    bits: int
    group_size: int
    #: the name (or its rule) says the group; otherwise ``group_size`` is mlx-lm's default for the mode, which
    #: a checkpoint converted with ``--q-group-size 32`` does not follow (the weights' bound then takes the
    #: smallest group MLX allows)
    group_named: bool = field(default=False, compare=False)

    def label(self) -> str:
        m = "" if self.mode == "affine" else f" {self.mode}"
        return f"{self.bits}-bit{m}, group {self.group_size}"


@dataclass(frozen=True)
class NameQuant:
    """What a repo name says about its weights. ``parts`` empty and ``float_bits`` set: unquantized.

    Two or more parts (``-MXFP4-Q8``: mxfp4 experts and 8-bit affine elsewhere; ``-mixed_3_6``) is a
    mixed checkpoint: which layers take which part is only in its files, so ``bits`` is ``None``.
    """

    parts: tuple[StoragePart, ...] = ()
    float_bits: int | None = None
    markers: tuple[str, ...] = ()
    tokens: tuple[str, ...] = ()
    assumed: str | None = None  # a marker's default was used (``-DWQ`` alone), and why
    keeps_embeddings: bool = False  # AWQ / GPTQ quantize only the blocks' Linear layers
    notes: tuple[str, ...] = ()

    @property
    def mixed(self) -> bool:
        return len(self.parts) > 1

    @property
    def bits(self) -> int | None:
        if self.parts:
            return self.parts[0].bits if len(self.parts) == 1 else None
        return self.float_bits

    @property
    def mode(self) -> str | None:
        return self.parts[0].mode if len(self.parts) == 1 else None

    @property
    def group_size(self) -> int | None:
        return self.parts[0].group_size if len(self.parts) == 1 else None

    def label(self) -> str:
        if self.parts:
            body = " + ".join(p.label() for p in self.parts)
            s = f"mixed: {body}" if self.mixed else body
        elif self.float_bits:
            s = f"{self.float_bits}-bit (unquantized)"
        else:
            s = "storage not named"
        if self.markers:
            s += f" [{', '.join(self.markers)}]"
        return s

    def as_dict(self) -> dict:
        return {"label": self.label(), "bits": self.bits, "mode": self.mode, "group_size": self.group_size,
                "mixed": self.mixed, "parts": [p.__dict__ for p in self.parts], "float_bits": self.float_bits,
                "markers": list(self.markers), "tokens": list(self.tokens), "assumed": self.assumed}


@dataclass(frozen=True)
class ParsedId:
    """A query split into the checkpoint it names and what its suffixes say.

    ``stems``: the query with storage suffixes stripped one at a time (longest first, the query itself
    excluded), each a candidate id of the converted checkpoint; ``bases``: the last stem with release
    words stripped one at a time (a base architecture to fall back on, with a note).
    """

    query: str
    stems: tuple[str, ...]
    bases: tuple[str, ...]
    quant: NameQuant | None
    variant_tokens: tuple[str, ...] = ()
    unprefixed: tuple[tuple[str, str], ...] = ()  # (query or stem without a vendor prefix, the prefix)

    @property
    def stem(self) -> str:
        return self.stems[-1] if self.stems else self.query


def check_mlx_id(query: str) -> None:
    """Raise ``NotMLXCheckpointError`` (with the reason) for an id that no MLX checkpoint can have."""
    for rx, rule in _table().refuse:
        if rx.search(query):
            raise NotMLXCheckpointError(query, rule.what, rule.why)


def check_hf_quantization(q: dict, where: str) -> None:
    """Raise ``NotMLXCheckpointError`` for a Hugging Face ``quantization_config`` mlx-lm does not load
    (``hf_quant_methods`` in the naming table): an 8-bit AWQ or a bitsandbytes config was noted as
    "weight bits not taken from it" and estimated as if mlx-lm could run it."""
    t = _table().table
    method = q.get("quant_method")
    if not t.hf_quant_methods:
        return
    known = {m.method: m for m in t.hf_quant_methods}
    rule = known.get(method) if isinstance(method, str) else None
    if rule is None:
        raise NotMLXCheckpointError(where, f"quantized with quant_method {str(method)[:40]!r}", t.hf_quant_refused)
    bits = q.get("bits", 4 if rule.bits else None)
    if rule.bits and bits not in rule.bits:
        raise NotMLXCheckpointError(where, f"quantized with {method} at {str(bits)[:20]} bits",
                                    f"mlx-lm loads {method} at {', '.join(map(str, rule.bits))} bits only: {rule.why}")


def parse_id(query: str) -> ParsedId:
    """Split ``query`` (an id, a repo name or a local path) into checkpoint stems and storage. Pure."""
    check_mlx_id(query)
    t = _table()
    head, sep, repo = query.rpartition("/")
    prefix = head + sep
    stems: list[str] = []
    found: list[tuple[_Suffix, re.Match]] = []
    cur = repo
    for _ in range(32):  # bounded: every step strips at least one character
        for rx, rule in t.suffixes:
            m = rx.search(cur)
            if m and m.start() > 0:  # never strip the whole name
                found.append((rule, m))
                cur = cur[: m.start()]
                stems.append(prefix + cur)
                break
        else:
            break
    quant = _quant(found) if found else None
    for part in (quant.parts if quant else ()):
        why = kernel_problem(part.mode, part.bits, part.group_size)
        if why:  # a name no MLX checkpoint can have: said, not estimated at bits the kernels cannot run
            raise NotMLXCheckpointError(query, "named with a quantization MLX has no kernel for", f"the name says {why}")
    bases: list[str] = []
    vtok: list[str] = []
    base = cur
    for _ in range(16):
        for rx in t.variants:
            m = rx.search(base)
            if m and m.start() > 0:
                vtok.append(m.group(0)[1:])
                base = base[: m.start()]
                bases.append(prefix + base)
                break
        else:
            break
    unprefixed: list[str] = []
    for cand in (query, *stems):
        h, sp, name = cand.rpartition("/")
        for rx in t.prefixes:
            m = rx.match(name)
            if m:
                unprefixed.append((h + sp + name[m.end():], name[: m.end() - 1]))
                break
    return ParsedId(query, tuple(stems), tuple(bases), quant, tuple(reversed(vtok)), tuple(unprefixed))


def _quant(found: list[tuple[_Suffix, re.Match]]) -> NameQuant:
    """Fold the stripped tokens (found right to left) into one ``NameQuant``."""
    parts: list[StoragePart] = []
    float_bits = None
    group = None
    markers: list[str] = []
    notes: list[str] = []
    defaults = []
    tokens = [m.group(0).lstrip("-_.") for _, m in reversed(found)]
    for rule, m in reversed(found):  # left to right, as written
        g = m.groupdict()
        if g.get("group"):
            group = int(g["group"])
        for key in ("bits", "bits2"):
            if g.get(key):
                parts.append(StoragePart(rule.mode or "affine", int(g[key]), 0))
        if rule.bits and not g.get("bits"):
            parts.append(StoragePart(rule.mode or "affine", rule.bits, 0))
        if rule.float_bits:
            float_bits = max(float_bits or 0, rule.float_bits)
        if rule.marker:
            markers.append(rule.marker.split(" (")[0])
        if rule.default:
            defaults.append(rule.default)
        if rule.note:
            notes.append(rule.note)
    assumed = None
    keeps = any(d.keeps_embeddings for d in defaults)
    if not parts and not float_bits and defaults:
        d = defaults[0]
        parts.append(StoragePart(d.mode, d.bits, d.group or 0))
        assumed = d.why
    # a recipe's own group size (AWQ / GPTQ: 128 from quantization_config) when the name gives bits but no
    # group: "-AWQ-INT4" was read as group 64, MLX's default, not what mlx-lm repacks an AutoAWQ file to
    recipe_group = {d.mode: d.group for d in defaults if d.group}
    out: list[StoragePart] = []
    for p in parts:
        g = (p.group_size or (group if p.mode == "affine" and group else None) or recipe_group.get(p.mode)
             or _GROUP_DEFAULT[p.mode])
        q = StoragePart(p.mode, p.bits, g, bool(p.group_size or (p.mode == "affine" and group)))
        if q not in out:
            out.append(q)
    if out and float_bits:
        notes.append(f"the name says both {float_bits}-bit and quantized; the quantized parts are used")
        float_bits = None
    return NameQuant(tuple(out), float_bits, tuple(markers), tuple(tokens), assumed, keeps, tuple(notes))


__all__ = ["NameQuant", "ParsedId", "StoragePart", "check_hf_quantization", "check_mlx_id", "naming_file",
           "parse_id"]
