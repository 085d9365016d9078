"""A profile from a config.json, a model directory, or a live mlx-lm model object - no YAML needed.

A new checkpoint must get a right answer before anyone writes its YAML. The config is read the way
mlx-lm 0.32.2 reads it (its remapping, its defaults, the keys it ignores: see ``extraction.rules``), so
the layer layout and widths are those of the caches ``mlx_lm.load`` would build. Every field records
where it came from (``Profile.provenance``), and what mlx-lm does differently from what a reader of the
config would expect is a note.

Entry points:

* ``profile_from_config(config, source=...)``: a dict -> ``Profile`` (no mlx import);
* ``resolve_path(path, registry=...)``: a config.json or a model directory -> ``Resolution``, matched
  against the registry (same id or same cache layout), disagreements reported;
* a live mlx-lm model: ``omlx_profiles.live.from_model.profile_from_model`` (imports mlx), built on
  ``omlx_profiles.extraction.from_probe.profile_from_layout`` (a probe report -> ``Profile``, any family).

Families not modelled, and configs mlx-lm itself cannot build, raise ``UnsupportedError`` with the reason.
"""
from __future__ import annotations

import copy
import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import InputError, UnsupportedError
from ..files import user_path
from ..mlxlm.config import (LoadedConfig, Reader, load_config, module_for, read_dtype, read_quantization,
                                shown, text_config_key)
from ..mlxlm.fold import build_layers
from ..mlxlm.facts import MLX_LM_VERSION, MODEL_REMAPPING
from ..mlxlm.recipes import module_files, reader_for, recipe, recipe_rule, wrapper_injections
from ..mlxlm.to_layers import Ctx, Draft, info_fields
from ..mlxlm.support import unsupported_reason
from ..registry.profile import Profile
from ..registry.index import Registry, Resolution
from ..schema.family import CompleteVariant
from ..schema.module import TextByType

DEFAULT_ASSUMED_DTYPE = "bf16"


@dataclass
class Extraction:
    """Everything extraction learned about one config."""

    payload: dict[str, Any]  # a complete variant, as a YAML variant would hold it
    provenance: dict[str, str]
    notes: list[str]
    name: str
    family: str  # the mlx-lm module (after remapping)
    model_type: str  # config model_type
    text_model_type: str | None
    ids: list[str]
    source: str
    dtype_assumed: bool = False
    weights_where: str = ""
    nonfinite: list[str] = field(default_factory=list)

    @property
    def weights_bits(self) -> int | None:
        w = self.payload.get("weights") or {}
        return w.get("bits")

    def profile(self) -> Profile:
        try:
            v = CompleteVariant.model_validate(self.payload)
        except ValidationError as e:  # a rule produced something the schema refuses: say what
            first = e.errors(include_url=False)[0]
            loc = ".".join(str(x) for x in first["loc"])
            raise InputError(f"{self.source}: the extracted profile is invalid at {loc}: {first['msg']}") from None
        prov = dict(self.provenance)
        if self.notes:
            prov["notes"] = " | ".join(self.notes)
        src = self.source if self.source.endswith("config.json") else f"{self.source} (read as config.json)"
        p = Profile.from_variant(v, name=self.name, family=self.family, ids=self.ids, source=src)
        return dataclasses.replace(p, provenance=prov)


# --------------------------------------------------------------------------------------------------
# names
# --------------------------------------------------------------------------------------------------

_SLUG_BAD = re.compile(r"[^a-z0-9._-]+")


def slug(text: str) -> str:
    s = _SLUG_BAD.sub("-", text.strip().lower()).strip("-._")
    s = re.sub(r"-{2,}", "-", s)[:120]
    return s if s and s[0].isalnum() else ("model-" + s if s else "model")


def _name_or_path(top: dict, text: dict | None) -> str | None:
    for d in (top, text):
        if isinstance(d, dict) and isinstance(d.get("_name_or_path"), str) and d["_name_or_path"].strip():
            return d["_name_or_path"].strip()
    return None


def _hf_id(value: str | None) -> str | None:
    """``org/name`` (a hub id), not a local path."""
    if not value or value.startswith((".", "/", "~")) or "\\" in value:
        return None
    parts = value.split("/")
    if len(parts) == 2 and all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", p) for p in parts):
        return value
    return None


# --------------------------------------------------------------------------------------------------
# config -> profile
# --------------------------------------------------------------------------------------------------


def _text_by_reader(top: dict, module: str, tb: TextByType, model_type: str,
                    label: str) -> tuple[Reader, Any, str | None, list[str]]:
    """A wrapper that builds its language model by the text config's model_type (``text_by`` in the module's
    file): the chosen module's recipe reads the text config, after the wrapper's ``__post_init__`` defaults."""
    tc = top.get(tb.key)
    if tc is None:
        raise UnsupportedError(f"unsupported: model_type {shown(model_type)}: {label} has no {tb.key}, which "
                               f"mlx-lm's {tb.args_class} requires")
    if not isinstance(tc, dict):
        raise InputError(f"{label}: {tb.key} must be an object, got {type(tc).__name__}")
    missing = sorted(k for k in tb.wrapper_required if k not in top)
    if missing:
        raise UnsupportedError(f"unsupported: model_type {shown(model_type)}: {label} lacks {missing}, which mlx-lm's "
                               f"{tb.args_class} requires")
    tmt = tc.get("model_type") if isinstance(tc.get("model_type"), str) else None
    inner = tb.module_for(tmt)
    rec = recipe(inner)
    if rec is None:
        raise UnsupportedError(unsupported_reason(tmt or inner, inner))
    inj = {k: (v, f"{tb.args_class}.__post_init__ ({k} = {v!r})") for k, v in tb.defaults.items() if k not in tc}
    notes = []
    if not tb.make_cache:
        also = ", ".join(sorted(t for t, m in MODEL_REMAPPING.items() if m == module))
        lt = rec.layout.layer_types
        marks = f"{tb.key}.{lt.key}" if lt is not None else tb.key
        notes.append(f"{module} wrapper{f' (also {also})' if also else ''}: mlx-lm's {module}.py defines no "
                     f"make_cache, so every text layer gets an unbounded KVCache, even layers {marks} marks sliding")
    rule = recipe_rule(rec, no_make_cache=None if tb.make_cache else f"{module}.py")
    return reader_for(rec, tc, label=label, prefix=f"{tb.key}.", injected=inj), rule, tmt or inner, notes


def _text_reader(top: dict, module: str, model_type: str, label: str) -> tuple[Reader, Any, str | None, list[str]]:
    """(reader of the language model's config, the rule to apply, its model_type, notes) for ``module``."""
    notes: list[str] = []
    f = module_files().get(module)
    if f is not None and f.text_by is not None:
        return _text_by_reader(top, module, f.text_by, model_type, label)
    rec = recipe(module)
    if rec is not None:  # a module recipe (profiles/mlx_lm/<module>.yaml): data, no Python per module
        if rec.text is None:
            key = text_config_key(top)
            if key:  # a wrapper recipe reads its text config (below): the note is for top-level readers only
                notes.append(f"{label}: has a {key}, but mlx-lm's {module}.py reads the top-level keys; so does this")
            return reader_for(rec, top, label=label), recipe_rule(rec), None, notes
        missing = sorted(k for k in rec.text.wrapper_required if k not in top)
        tk = rec.text.key
        if tk not in top and not rec.text.optional and tk not in missing:
            missing.append(tk)
        if missing:
            raise UnsupportedError(f"unsupported: model_type {shown(model_type)}: {label} lacks {missing}, which "
                                   f"mlx-lm's {module}.ModelArgs requires")
        tc = top.get(tk, top) if rec.text.optional else top[tk]
        if not isinstance(tc, dict):
            raise InputError(f"{label}: {tk} must be an object, got {type(tc).__name__}")
        prefix = f"{tk}." if tc is not top else ""
        tmt = tc.get("model_type") if isinstance(tc.get("model_type"), str) and tc is not top else None
        data, inj = wrapper_injections(rec, top, tc)
        return reader_for(rec, data, label=label, prefix=prefix, injected=inj), recipe_rule(rec), tmt, notes
    raise UnsupportedError(unsupported_reason(model_type, module))


def extract_config(config: Any, *, source: str = "config.json", name: str | None = None,
                   name_hint: str | None = None, dtype: str | None = None,
                   nonfinite: list[str] | None = None) -> Extraction:
    """Read ``config`` the way mlx-lm does and return the variant payload with provenance and notes.

    ``dtype`` overrides the activation dtype (a live model's); ``name`` the variant name (else from
    ``_name_or_path``, then ``name_hint``, then the module). ``unsupported: ...`` names ``source``.
    """
    try:
        return _extract_config(config, source=source, name=name, name_hint=name_hint, dtype=dtype,
                               nonfinite=nonfinite)
    except UnsupportedError as e:
        if source in str(e):
            raise
        raise UnsupportedError(f"{source}: {e.reason}") from None


def _extract_config(config: Any, *, source: str, name: str | None, name_hint: str | None, dtype: str | None,
                    nonfinite: list[str] | None) -> Extraction:
    if not isinstance(config, dict):
        raise InputError(f"{source}: a config must be a JSON object, got {type(config).__name__}")
    top = copy.deepcopy(config)
    model_type, module = module_for(top, source)
    r, rule, text_mt, notes = _text_reader(top, module, model_type, source)
    r.check_required()
    d = Draft(text_model_type=text_mt)
    d.notes.extend(notes)
    c = Ctx(top=top, r=r, d=d, module=module, model_type=model_type, label=source)
    rule(c)
    info_fields(c)

    # dtype: the checkpoint's (mlx-lm does not cast on load)
    dtype_assumed = False
    text = r.data if r.data is not top else None
    if dtype is not None:
        d.put("dtype", dtype, "given by the caller (live model / --dtype)")
    else:
        dt, where = read_dtype(top, text, source, r.prefix)
        if dt is None:
            dt, where = DEFAULT_ASSUMED_DTYPE, (f"assumed {DEFAULT_ASSUMED_DTYPE}: {source} has no torch_dtype/dtype "
                                                "(pass --dtype to override)")
            dtype_assumed = True
            d.notes.append(f"dtype: {source} gives no torch_dtype/dtype; {DEFAULT_ASSUMED_DTYPE} assumed")
        d.put("dtype", dt, where)
    wq, wwhere, qnotes = read_quantization(top, source)
    d.notes.extend(qnotes)
    if wq:
        d.put("weights", wq, wwhere)

    payload: dict[str, Any] = {"mlx_model_type": module}
    payload.update(d.fields)
    payload["layers"] = build_layers(d.per_layer, as_string=d.layers_as_string)
    prov = {"mlx_model_type": f"{source}: model_type = {shown(model_type)}"
                              + (f" (mlx-lm MODEL_REMAPPING -> {module})" if module != model_type else "")}
    prov.update(d.prov)
    prov["source"] = f"{source} read with mlx-lm {MLX_LM_VERSION} rules"

    nop = _name_or_path(top, text)
    ids = [i for i in [_hf_id(nop)] if i]
    if name is None:
        base = nop.rstrip("/").rsplit("/", 1)[-1] if nop else (name_hint or module)
        name = slug(base)
    nf = list(nonfinite or [])
    if nf:
        d.notes.append(f"{source}: non-standard JSON constants (NaN/Infinity) at {', '.join(nf[:5])}; accepted because "
                       "no cache dimension is read from them")
    return Extraction(payload=payload, provenance=prov, notes=d.notes, name=name, family=slug(module), model_type=model_type,
                      text_model_type=text_mt, ids=ids, source=source, dtype_assumed=dtype_assumed,
                      weights_where=wwhere, nonfinite=nf)


def profile_from_config(config: dict, *, source: str = "config.json", name: str | None = None,
                        dtype: str | None = None) -> Profile:
    """The profile mlx-lm's caches follow for this config (no mlx import); see the module doc."""
    return extract_config(config, source=source, name=name, dtype=dtype).profile()


# --------------------------------------------------------------------------------------------------
# path -> resolution
# --------------------------------------------------------------------------------------------------


def hub_cache_id(file: Path) -> str | None:
    """``org/name`` of a Hugging Face hub cache path (``.../models--org--name/snapshots/<rev>/config.json``)."""
    for part in file.parts[::-1]:
        if part.startswith("models--"):
            bits = part[len("models--"):].split("--")
            if len(bits) == 2:
                return _hf_id("/".join(bits))
    return None


def extract_path(path: Path | str, *, dtype: str | None = None) -> tuple[Extraction, LoadedConfig]:
    """Extraction of a config file or model directory; the name and ids also come from the path."""
    lc = load_config(path)
    file = lc.path
    hub = hub_cache_id(file)
    hint = hub.split("/")[1] if hub else (file.parent.name if file.name == "config.json" else file.stem)
    ex = extract_config(lc.data, source=str(file), name_hint=hint, dtype=dtype, nonfinite=lc.nonfinite)
    if hub and hub not in ex.ids:
        ex.ids.append(hub)
    return ex, lc


def resolve_path(path: Path | str, registry: Registry | None = None, *, dtype: str | None = None) -> Resolution:
    """A config.json or a model directory -> ``Resolution`` (matched_by ``config`` / ``directory``).

    The layout is the config's (it is the checkpoint in question). When a registry variant answers to
    the config's ``_name_or_path`` or directory name, or has the same cache layout, the notes say so and
    list every disagreement with both values and the YAML line; such a variant also fills what the config
    lacks (weights).
    """
    from .match import match_registry

    ex, lc = extract_path(path, dtype=dtype)
    profile = ex.profile()
    notes = list(ex.notes)
    if registry is not None:
        hints = list(ex.ids)
        p = user_path(path)
        d = p if p.is_dir() else lc.path.parent
        if lc.path.name == "config.json" and d.name:
            hints.append(d.name)
        profile, mnotes = match_registry(profile, registry, hints)
        notes.extend(mnotes)
    how = "directory" if user_path(path).is_dir() else "config"
    return Resolution(profile, str(path), how, str(lc.path), weights_bits=ex.weights_bits, notes=tuple(notes))


__all__ = ["Extraction", "extract_config", "extract_path", "profile_from_config", "resolve_path", "slug"]
