"""Check a profile against what a live mlx-lm model really allocates, field by field.

A YAML someone wrote (or a config extraction) is only a claim; the live model is the truth. The check
builds the model (or takes the caller's), runs ``make_prompt_cache`` plus a two-token forward *without
evaluating it* (``omlx_profiles.live.probe.probe_layout(evaluate=False)``: shapes and dtypes are known
from the lazy graph, so even a full-size 671B config costs no memory), and compares every cache entry
with the profile: cache class, KV heads, key and value widths, window, keep, chunk, state shapes and
dtypes, and the number of entries.

Each ``Disagreement`` names the profile field to fix (``num_kv_heads``, ``layers.kinds.sliding.window``,
``mla.kv_lora_rank``, ...), where that field's value was declared (YAML ``file:line`` following ``base``
inheritance and family defaults, or the config key), the profile's value and the live value.

This module imports ``omlx_profiles.live`` (mlx, mlx-lm) only inside the functions that need a model.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod
from pathlib import Path
from typing import Any

from ..units import short_dtype
from ..errors import OmlxProfilesError, UnsupportedError
from ..extraction.from_probe import layout_dtype
from ..extraction.match import hashable, ranges
from ..registry.profile import CacheEntry, Profile

_CLASS_OF = {"full": "KVCache", "latent": "KVCache", "indexer": "KVCache", "sliding": "RotatingKVCache",
             "chunked": "ChunkedKVCache", "state": "ArraysCache", "none": "KVCache"}  # none: a slot entry


class VerificationError(OmlxProfilesError):
    """``--strict``: the profile disagrees with the live model."""

    def __init__(self, disagreements: list["Disagreement"]):
        self.disagreements = list(disagreements)
        super().__init__("profile disagrees with the live mlx-lm model:\n" + "\n".join(str(d) for d in disagreements))


@dataclass(frozen=True)
class Disagreement:
    field: str  # profile field path to fix, e.g. "num_kv_heads" or "layers.kinds.sliding.window"
    where: str  # where the profile's value was declared: "profiles/x.yaml:12" or a config key
    profile_value: Any
    live_value: Any
    layers: str = ""  # cache-entry indices ("0-35", "3,7,11")
    detail: str = ""

    def __str__(self) -> str:
        at = f" at cache entries {self.layers}" if self.layers else ""
        det = f" ({self.detail})" if self.detail else ""
        return (f"{self.where}: {self.field}: profile says {self.profile_value!r}, live mlx-lm model has "
                f"{self.live_value!r}{at}{det}")

    def as_dict(self) -> dict:
        return {"field": self.field, "where": self.where, "profile": _jsonable(self.profile_value),
                "live": _jsonable(self.live_value), "layers": self.layers, "detail": self.detail}


def _jsonable(v):
    return list(v) if isinstance(v, tuple) else v


# --------------------------------------------------------------------------------------------------
# where a field was declared
# --------------------------------------------------------------------------------------------------


class Locator:
    """``field path -> 'file:line'`` for a profile: YAML records when the registry has it, else provenance."""

    def __init__(self, profile: Profile, registry=None):
        self.profile = profile
        self.registry = registry

    def __call__(self, path: tuple) -> str:
        top = path[0]
        reg = self.registry
        if reg is not None and self.profile.name in getattr(reg, "records", {}):
            w = _yaml_where(reg, self.profile.name, path)
            if w:
                return w
        prov = self.profile.provenance or {}
        if top in prov:
            return prov[top]
        return self.profile.source or "profile"


def _yaml_where(registry, name: str, path: tuple) -> str | None:
    from ..registry.provenance import yaml_where

    return yaml_where(registry, name, path)


# --------------------------------------------------------------------------------------------------
# the comparison
# --------------------------------------------------------------------------------------------------


def _width_fields(kname: str, e: CacheEntry, sub: tuple, v_head_dim: int | None) -> tuple[tuple, tuple, tuple]:
    """The fields that decide (n_kv, key width, value width) of entry ``e`` of kind ``kname``: the kind's own
    (``e.own``) where it states them, else the variant's."""
    base = ("layers", "kinds", kname) + sub
    if e.kind == "latent":
        return base + ("kind",), ("mla", "kv_lora_rank"), ("mla", "qk_rope_head_dim")
    if e.kind == "indexer":
        w = base + ("head_dim",) if "head_dim" in e.own else ("mla", "index_head_dim")
        return base + ("kind",), w, w
    nkv = base + ("num_kv_heads",) if "num_kv_heads" in e.own else ("num_kv_heads",)
    kw = base + ("head_dim",) if "head_dim" in e.own else ("head_dim",)
    if "v_head_dim" in e.own:
        vw = base + ("v_head_dim",)
    elif "head_dim" in e.own:
        vw = base + ("head_dim",)
    elif v_head_dim:
        vw = ("v_head_dim",)
    else:
        vw = ("head_dim",)
    return nkv, kw, vw


def expected_entries(profile: Profile) -> list[tuple[int, str, tuple[CacheEntry, ...]]]:
    """(layer index, kind name, entries) for every layer that has a cache entry in mlx-lm."""
    out = []
    for i, n in enumerate(profile.layer_names):
        ents = profile.layer_types[n].entries
        if all(e.kind == "none" and not e.slot for e in ents):
            continue
        out.append((i, n, ents))
    return out


def _expected_class(ents: tuple[CacheEntry, ...]) -> str:
    return "CacheList" if len(ents) > 1 or ents[0].in_list else _CLASS_OF.get(ents[0].kind, ents[0].kind)


def compare_layout(profile: Profile, layout: list[dict], *, act_dtype: str | None = None, registry=None,
                   check_dtype: bool = True) -> list[Disagreement]:
    """Disagreements between ``profile`` and a probe report (``probe_layout``), grouped by field and value.

    ``act_dtype``: the dtype the live model runs in (resolves ``model`` state dtypes); ``check_dtype``:
    compare the cached K/V dtype with ``profile.dtype`` (off when the model was built here in a dtype
    chosen for it).
    """
    where = Locator(profile, registry)
    act = act_dtype or profile.dtype
    groups: dict[tuple, list[int]] = {}
    details: dict[tuple, tuple[Any, Any, str]] = {}

    def add(path: tuple, pv, lv, idx: int, detail: str = "") -> None:
        key = (".".join(str(p) for p in path), hashable(pv), hashable(lv), where(path))
        groups.setdefault(key, []).append(idx)
        details.setdefault(key, (pv, lv, detail))

    expected = expected_entries(profile)
    if len(expected) != len(layout):
        add(("num_layers",), len(expected), len(layout), -1,
            f"cache entries: the profile's {profile.num_layers} layers give {len(expected)}, make_prompt_cache "
            f"gives {len(layout)}")
    dtype_seen = None
    for (i, kname, ents), live in zip(expected, layout):
        idx = live.get("index", i)
        want = _expected_class(ents)
        got = live.get("class")
        if want != got:
            add(("layers", "kinds", kname, "kind"), f"{'+'.join(e.kind for e in ents)} ({want})", got, idx,
                "cache class")
            continue
        lives = live["children"] if want == "CacheList" else [live]
        if len(lives) != len(ents):
            add(("layers", "kinds", kname), f"{len(ents)} caches", f"{len(lives)} caches", idx, "CacheList size")
            continue
        for j, (e, lv) in enumerate(zip(ents, lives)):
            sub = (j,) if len(ents) > 1 else ()
            if _CLASS_OF.get(e.kind) != lv.get("class"):
                add(("layers", "kinds", kname) + sub + ("kind",), f"{e.kind} ({_CLASS_OF.get(e.kind)})", lv.get("class"),
                    idx, "cache class")
                continue
            if e.kind == "state":
                _compare_state(kname, sub, e, lv, act, idx, add)
                continue
            if e.kind == "none":  # a slot mlx-lm lists and nothing writes: it must stay empty
                if lv.get("keys") or lv.get("values"):
                    add(("layers", "kinds", kname) + sub, "empty (never written)", "keys/values", idx, "slot entry")
                continue
            k, v = lv.get("keys"), lv.get("values")
            if not k or not v:
                add(("layers", "kinds", kname) + sub, "keys/values", "empty cache", idx, "no arrays after forward")
                continue
            f_nkv, f_k, f_v = _width_fields(kname, e, sub, profile.v_head_dim)
            n_kv, kw, vw = k["row_shape"][0], k["row_shape"][1], v["row_shape"][1]
            if n_kv != e.n_kv:
                add(f_nkv, e.n_kv, n_kv, idx, f"{lv['class']} keys shape {_shape(k)}")
            if kw != e.k_width:
                add(f_k, e.k_width, kw, idx, f"{lv['class']} keys shape {_shape(k)}")
            if vw != e.v_width:
                add(f_v, e.v_width, vw, idx, f"{lv['class']} values shape {_shape(v)}")
            if e.kind == "sliding":
                if lv.get("max_size") != e.window:
                    add(("layers", "kinds", kname) + sub + ("window",), e.window, lv.get("max_size"), idx,
                        "RotatingKVCache.max_size")
                if lv.get("keep", 0) != e.keep:
                    add(("layers", "kinds", kname) + sub + ("keep",), e.keep, lv.get("keep"), idx, "RotatingKVCache.keep")
            if e.kind == "chunked" and lv.get("chunk_size") != e.chunk:
                add(("layers", "kinds", kname) + sub + ("chunk",), e.chunk, lv.get("chunk_size"), idx,
                    "ChunkedKVCache.chunk_size")
            dtype_seen = dtype_seen or short_dtype(k["dtype"])
    if check_dtype and dtype_seen and dtype_seen != profile.dtype:
        add(("dtype",), profile.dtype, dtype_seen, -1, "dtype of the cached keys (the activation dtype)")
    out = []
    for key, idxs in groups.items():
        f, _, _, w = key
        pv, lv, detail = details[key]
        out.append(Disagreement(f, w, pv, lv, _ranges([x for x in idxs if x >= 0]), detail))
    return out


def _compare_state(kname, sub, e: CacheEntry, lv: dict, act: str, idx: int, add) -> None:
    arrays = [a for a in (lv.get("state") or []) if a is not None]
    base = ("layers", "kinds", kname) + sub + ("tensors",)
    if len(arrays) != len(e.tensors):
        add(base, f"{len(e.tensors)} tensor(s)", f"{len(arrays)} array(s)", idx,
            "ArraysCache arrays after a forward: " + ", ".join(str(tuple(a["shape"])) for a in arrays))
        return
    for t_i, (t, a) in enumerate(zip(e.tensors, arrays)):
        shape = list(a["shape"][1:])
        want_shape = list(t.shape) if t.shape else None  # a hand-built spec may give only the element count
        if want_shape is not None and want_shape != shape:
            add(base + (t_i, "shape"), want_shape, shape, idx, f"ArraysCache[{t_i}] of {t.name}")
        elif want_shape is None and prod(shape) != t.elements:
            add(base + (t_i, "shape"), f"{t.elements} elements", shape, idx, f"ArraysCache[{t_i}] of {t.name}")
        live_dt = short_dtype(a["dtype"])
        want_dt = act if t.dtype == "model" else t.dtype
        if live_dt != want_dt:
            add(base + (t_i, "dtype"), t.dtype, live_dt if live_dt != act else f"{live_dt} (= the model dtype)",
                idx, f"ArraysCache[{t_i}] of {t.name}")


def _shape(a: dict) -> tuple:
    s = list(a["shape"])
    if len(s) >= 2:
        s[-2] = "T"
    return tuple(s)


def _ranges(xs: list[int]) -> str:
    return ranges(sorted(set(xs)))


# --------------------------------------------------------------------------------------------------
# building the live model
# --------------------------------------------------------------------------------------------------


def live_config_for(profile: Profile, config: dict | str | Path | None = None) -> dict:
    """The config a live model is built from: the caller's, else ``live.synth.config_for_profile``."""
    if config is not None:
        if isinstance(config, dict):
            return config
        from ..mlxlm.config import load_config

        return load_config(config).data
    from ..mlxlm.to_config import config_for_profile  # the live harness: profile -> mlx-lm config

    try:
        return config_for_profile(profile)
    except ValueError as e:  # live.synth.SynthError: no rule to turn this profile into an mlx-lm config
        raise UnsupportedError(f"cannot build a live model for {profile.name!r} from the profile alone "
                               f"({e}); pass the checkpoint's config.json (--against PATH)") from None


def probe_model(model) -> list[dict]:
    from .probe import probe_layout

    return probe_layout(model, evaluate=False)


def verify_profile(profile: Profile, model: Any = None, *, config: dict | str | Path | None = None,
                   registry=None, strict: bool = False) -> list[Disagreement]:
    """Compare ``profile`` with a live mlx-lm model; ``[]`` when every cache entry agrees.

    ``model``: a live mlx-lm model (``mlx_lm.load`` or ``live.build.build_model``); its cache dtype is
    compared too. Without it, the model is built lazily (nothing allocated) from ``config`` (a dict or a
    config.json path: the real checkpoint's config, which is what a YAML must match) or, failing that,
    from ``live.synth.config_for_profile(profile)``. ``strict`` raises ``VerificationError`` instead of
    returning a non-empty list.
    """
    built = model is None
    if built:
        cfg = live_config_for(profile, config)
        import warnings

        from .build import build_model

        try:
            with warnings.catch_warnings():
                # CPU GatherMM promotes MoE models to fp32; the lazy build never runs, and K/V dtype is
                # not compared for a model built here, so the warning says nothing useful in this path.
                warnings.simplefilter("ignore", UserWarning)
                model = build_model(cfg, dtype=profile.dtype, lazy=True)
        except (ValueError, TypeError, KeyError, AttributeError, ImportError) as e:
            raise UnsupportedError(f"mlx-lm cannot build this config ({type(e).__name__}: {e})") from None
    layout = probe_model(model)
    act = layout_dtype(layout)
    dis = compare_layout(profile, layout, act_dtype=act, registry=registry, check_dtype=not built)
    if strict and dis:
        raise VerificationError(dis)
    return dis


__all__ = ["Disagreement", "VerificationError", "compare_layout", "expected_entries", "live_config_for",
           "verify_profile"]
