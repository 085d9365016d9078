"""The two interpreters over module recipes (``profiles/mlx_lm/<module>.yaml``, ``schema.module``).

* ``config -> per-layer caches``: ``recipe_rule(recipe)`` is an extraction rule like the hand-written
  ones of ``to_layers`` (it fills a ``Draft`` through a ``Ctx``), so ``extract`` / ``--config`` work
  for every recipe-covered module through the same path;
* ``recipe -> mlx-lm config``: ``live_config(recipe)`` writes the tiny config (hidden 128, 4 heads,
  2 KV heads, the fewest layers the layout needs) that ``live.recipe_check`` builds as the REAL mlx-lm
  model to verify the recipe.

No module name appears in the logic below: everything a module needs is in its file. No mlx import.
"""
from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from pydantic import ValidationError

from ..errors import InputError, ProfileError, UnsupportedError
from ..registry.paths import builtin_profiles_dir
from ..registry.yaml_safe import load_yaml_file
from ..schema.module import Chars, KindRecipe, LayerTypes, Modulo, ModuleIndex, ModuleRecipe, Traits
from .config import MAX_LAYERS, Reader, shown
from . import to_layers as tl  # the shared readers (heads, head dim, MLA ranks)
from .facts import MODEL_REMAPPING, ArgsSpec

#: files of profiles/mlx_lm/ that are not module recipes
NOT_RECIPES = {"index.yaml", "sharding.yaml"}


def recipes_dir() -> Path:
    return builtin_profiles_dir() / "mlx_lm"


def _parse_recipe(path: Path) -> ModuleRecipe:
    data = load_yaml_file(path)
    try:
        rec = ModuleRecipe.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise ProfileError(f"{path}: {loc}: {first['msg']}") from None
    if rec.module != path.stem:
        raise ProfileError(f"{path}: module {rec.module!r} must equal the file name {path.stem!r}")
    return rec


@lru_cache(maxsize=4)
def _load_all(root: str) -> dict[str, ModuleRecipe]:
    out: dict[str, ModuleRecipe] = {}
    d = Path(root)
    if d.is_dir():
        for p in sorted(d.glob("*.yaml")):
            if p.name not in NOT_RECIPES:
                rec = _parse_recipe(p)
                out[rec.module] = rec
    return out


def module_files() -> dict[str, ModuleRecipe]:
    """Every module file shipped in ``profiles/mlx_lm/`` (extraction recipes and traits-only files)."""
    return _load_all(str(recipes_dir()))


def recipes() -> dict[str, ModuleRecipe]:
    """Every extraction recipe (args, layout, kinds) shipped in ``profiles/mlx_lm/``, by module name."""
    return {m: r for m, r in module_files().items() if r.extracts}


_LLAMA_SHAPE = Traits()


@lru_cache(maxsize=256)
def traits_of(model_type: str | None) -> Traits:
    """The compute traits of the mlx-lm module that builds ``model_type`` (mlx-lm's remapping applied);
    the llama shape (every trait off) for a module without a file."""
    if not model_type:
        return _LLAMA_SHAPE
    f = module_files().get(MODEL_REMAPPING.get(model_type, model_type))
    return f.traits if f is not None else _LLAMA_SHAPE


def recipe(module: str) -> ModuleRecipe | None:
    return recipes().get(module)


def recipe_verified() -> set[str]:
    """Modules whose recipe passed the live check (``LIVE_RESULTS.json``, kept current by
    ``tests/test_recipes_live.py``) and still has its file."""
    p = recipes_dir() / "LIVE_RESULTS.json"
    if not p.is_file():
        return set()
    import json

    return set(json.loads(p.read_text(encoding="utf-8")).get("verified", [])) & set(recipes())


def module_index() -> ModuleIndex | None:
    p = recipes_dir() / "index.yaml"
    if not p.is_file():
        return None
    return ModuleIndex.model_validate(load_yaml_file(p))


# --------------------------------------------------------------------------------------------------
# config -> per-layer caches
# --------------------------------------------------------------------------------------------------


def args_spec(rec: ModuleRecipe) -> ArgsSpec:
    a = rec.args
    return ArgsSpec(a.cls, frozenset(a.required), dict(a.defaults), a.head_dim, a.kv_from_heads)


def canonical_view(rec: ModuleRecipe, data: dict) -> dict:
    """The config with the module's renamed keys under the canonical names the readers use (gpt2's
    ``n_layer`` as ``num_hidden_layers``); the original keys stay too."""
    out = dict(data)
    for canon, key in rec.args.keys.items():
        if key in data and canon not in data:
            out[canon] = data[key]
    return out


def reader_for(rec: ModuleRecipe, data: dict, *, label: str, prefix: str = "",
               injected: dict | None = None) -> Reader:
    """How ``rec``'s args class reads ``data`` (``injected``: values a wrapper's ``__post_init__`` puts into
    the inner config, key -> (value, why))."""
    spec = args_spec(rec)
    defaults = dict(spec.defaults)
    for canon, key in rec.args.keys.items():
        if key in defaults and canon not in defaults:
            defaults[canon] = defaults[key]
    view = canonical_view(rec, data)
    if rec.args.mha:  # no KV-head field in the args class: K/V per attention head
        view = {k: v for k, v in view.items() if k != "num_key_value_heads"}
        defaults["num_key_value_heads"] = None
    spec = ArgsSpec(spec.cls, spec.required, defaults, spec.head_dim, spec.kv_from_heads or rec.args.mha)
    return Reader(view, label=label, prefix=prefix, spec=spec, module=rec.module, injected=injected)


def _modulo_kinds(m: Modulo, n: int, r: Reader) -> tuple[list[str], str]:
    p = m.period if isinstance(m.period, int) else r.int(m.period)
    res = p - 1 if m.residue == "last" else m.residue
    src = str(p) if isinstance(m.period, int) else f"{r.where(m.period)}"
    return [m.kind if i % p == res else m.other for i in range(n)], f"layer i is {m.kind} iff i % {p} == {res} ({src})"


def _layer_types_kinds(lt: LayerTypes, n: int, r: Reader, module: str) -> tuple[list[str], str]:
    types = r.str_list(lt.key)
    if types is None:
        if isinstance(lt.default, Modulo):
            kinds, why = _modulo_kinds(lt.default, n, r)
            return kinds, f"no {lt.key}: {module}.ModelArgs default, {why}"
        return [lt.default] * n, f"no {lt.key}: every layer {lt.default}"
    if len(types) < n:
        raise UnsupportedError(f"unsupported: model_type {shown(module)}: {r.prefix}{lt.key} has {len(types)} entries "
                               f"for {n} layers (mlx-lm indexes layer_types[i] and raises IndexError)")
    out = []
    for t in types[:n]:
        if t in lt.map:
            out.append(lt.map[t])
        elif lt.other is not None:
            out.append(lt.other)
        else:
            raise UnsupportedError(f"unsupported: model_type {shown(module)}: {r.prefix}{lt.key} entry {shown(t)} is "
                                   f"none of {sorted(lt.map)}")
    return out, f"{r.where(lt.key)}: " + ", ".join(f"{k} -> {v}" for k, v in lt.map.items())


def _chars_kinds(ch: Chars, n: int, r: Reader, module: str) -> tuple[list[str], str]:
    pat = r.raw(ch.key, None)
    if pat is None:
        return [ch.none] * n, f"{r.where(ch.key)} is null: every layer {ch.none}"
    if not isinstance(pat, str) or not pat:
        raise InputError(f"{r.label}: {r.prefix}{ch.key} must be a non-empty string such as 'LLLG', got {shown(pat)}")
    r.used[ch.key] = r.where(ch.key)
    return ([ch.map.get(pat[i % len(pat)], ch.other) for i in range(n)],
            f"{r.where(ch.key)} = {pat!r} cycled over the layers: " + ", ".join(f"{k} -> {v}" for k, v in ch.map.items()))


def layer_kind_names(rec: ModuleRecipe, r: Reader) -> tuple[list[str], str]:
    """One kind name per layer (``none`` for KV-shared layers) and the sentence saying why."""
    lay = rec.layout
    n = r.int(lay.count, maximum=MAX_LAYERS)
    if lay.uniform is not None:
        kinds, why = [lay.uniform] * n, f"{rec.module}.py: {lay.uniform} x {r.where(lay.count)}"
    elif lay.modulo is not None:
        kinds, why = _modulo_kinds(lay.modulo, n, r)
    elif lay.layer_types is not None:
        kinds, why = _layer_types_kinds(lay.layer_types, n, r, rec.module)
    else:
        kinds, why = _chars_kinds(lay.chars, n, r, rec.module)
    if lay.shared is not None:
        s = r.int(lay.shared, minimum=0)
        if s >= n and s > 0:
            raise UnsupportedError(f"unsupported: model_type {shown(rec.module)}: {r.prefix}{lay.shared} = {s} leaves no "
                                   f"layer with its own cache ({n} layers)")
        if s:
            kinds = kinds[: n - s] + ["none"] * s
            why += f"; the last {s} layers ({r.where(lay.shared)}) reuse earlier K/V and hold no cache entry"
    return kinds, why


def _first(r: Reader, keys: list[str]) -> tuple[int | None, str]:
    for k in keys:
        v = r.int(k, allow_none=True, required=False)
        if v is not None:
            return v, r.where(k)
    return None, ""


def _cache_spec(kr: KindRecipe, r: Reader, d, model_kv: int | None, model_hd: int | None) -> dict:
    if kr.cache in ("latent", "indexer", "none"):
        return {"kind": kr.cache}
    s: dict[str, Any] = {"kind": kr.cache}
    if kr.num_kv_heads and (kr.num_kv_heads_if is None or r.boolean(kr.num_kv_heads_if)):
        v, where = _first(r, kr.num_kv_heads)
        if v is not None and v != model_kv:
            s["num_kv_heads"] = v
    if kr.head_dim:
        v, where = _first(r, kr.head_dim)
        if v is not None and v != model_hd:
            s["head_dim"] = v
    if kr.cache == "sliding":
        w = r.int(kr.window, allow_none=True, required=False)
        if w is None:
            raise UnsupportedError(
                f"unsupported: model_type {shown(r.module)}: sliding layers need {r.prefix}{kr.window}, and the "
                "config gives none (mlx-lm would build RotatingKVCache(max_size=None) and fail on the first update)")
        s["window"] = w
    if kr.cache == "chunked":
        s["chunk"] = r.int(kr.chunk)
    return s


def recipe_rule(rec: ModuleRecipe) -> Callable:
    """An extraction rule (``Ctx -> None``, see ``to_layers``) that reads the config by ``rec``."""
    def rule(c) -> None:
        r, d = c.r, c.d
        names, why = layer_kind_names(rec, r)
        specs = {k: (v if isinstance(v, list) else [v]) for k, v in rec.kinds.items()}
        used = set(names) - {"none"}
        caches = {c_.cache for k in used for c_ in specs[k]}
        n_kv = hd = None
        if caches & {"latent", "indexer"}:
            mla = tl._mla(c, index="indexer" in caches)
            tl._mla_heads(c, mla)
        if caches & {"full", "sliding", "chunked"}:
            n_q, n_kv = tl._heads(c)
            hd = tl._head_dim(c, n_q)
        built = {}
        for k in used:
            parts = [_cache_spec(kr, r, d, n_kv, hd) for kr in specs[k]]
            built[k] = parts if len(parts) > 1 else parts[0]
        d.put("num_layers", len(names), r.where(rec.layout.count))
        d.per_layer = [("none", {"kind": "none"}) if k == "none" else (k, built[k]) for k in names]
        d.prov["layers"] = f"module recipe profiles/mlx_lm/{rec.module}.yaml: {why}"
        for key, ign in rec.ignores.items():
            reason = ign if isinstance(ign, str) else ign.reason
            if not isinstance(ign, str) and ign.unless is not None and r.data.get(ign.unless) is False:
                continue
            if r.data.get(key) is not None:
                d.notes.append(f"{c.label}: {r.prefix}{key} = {shown(r.data[key])} is ignored by mlx-lm's "
                               f"{rec.module}.py: {reason}")
    return rule


# --------------------------------------------------------------------------------------------------
# recipe -> the tiny mlx-lm config the live check builds
# --------------------------------------------------------------------------------------------------

#: generic tiny dims (canonical names); a recipe's ``live.config`` overrides and completes them
TINY: dict[str, Any] = {
    "hidden_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
    "vocab_size": 128, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "tie_word_embeddings": True, "num_hidden_layers": 2,
}


#: the head width the live check writes into a config whose recipe derives or optionally reads head_dim
HEAD_DIM_PROBE = 64


def live_config(rec: ModuleRecipe, *, probe_head_dim: bool = True) -> dict:
    """The tiny config of ``rec``'s live check: generic tiny dims under the module's key names, the
    recipe's ``live.config`` on top, ``model_type`` = the module."""
    cfg: dict[str, Any] = {"model_type": rec.module}
    for k, v in TINY.items():
        if not (rec.args.mha and k == "num_key_value_heads"):
            cfg[rec.args.keys.get(k, k)] = copy.deepcopy(v)
    cfg.update(copy.deepcopy(rec.live.config))
    hd_key = rec.args.keys.get("head_dim", "head_dim")
    if probe_head_dim and rec.args.head_dim != "explicit" and hd_key not in cfg:
        # A head_dim unlike hidden // heads (128 // 4 = 32; 64 keeps kv_bits groups of 32 and 64 whole), so the live check tells "optional" (mlx-lm uses
        # it) from "derived" (mlx-lm ignores it): a wrong rule is a wrong KV width, not a passing test.
        cfg[hd_key] = HEAD_DIM_PROBE
    if rec.text is not None:  # a wrapper: the tiny language model goes under its key
        return {"model_type": rec.module, **copy.deepcopy(rec.live.top), rec.text.key: cfg}
    return cfg
