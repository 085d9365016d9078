"""The two interpreters over module recipes (``profiles/mlx_lm/<module>.yaml``, ``schema.module``).

* ``config -> per-layer caches``: ``recipe_rule(recipe)`` is an extraction rule like the hand-written
  ones of ``to_layers`` (it fills a ``Draft`` through a ``Ctx``), so ``extract`` / ``--config`` work
  for every recipe-covered module through the same path;
* ``recipe -> mlx-lm config``: ``live_config(recipe)`` writes the tiny config (hidden 128, 4 heads,
  2 KV heads, the fewest layers the layout needs) that ``live.recipe_check`` builds as the REAL mlx-lm
  model to verify the recipe.

Loading the files (``recipe_files``), the layout shapes (``recipe_layout``) and the tiny live config
(``recipe_live``) are their own modules, re-exported here. No module name appears in the logic below:
everything a module needs is in its file. No mlx import.
"""
from __future__ import annotations

from typing import Any, Callable

from ..errors import UnsupportedError
from ..schema.formula import evaluate, keys as formula_keys
from ..schema.module import KindRecipe, ModuleRecipe
from .config import Reader, check_dim, shown
from . import per_layer as pl_
from . import to_layers as tl  # the shared readers (heads, head dim, MLA ranks)
from .facts import ArgsSpec
# loading / lookups and the two other parts, re-exported: ``from .recipes import X`` keeps working
from .recipe_files import (NOT_RECIPES, _load_all, _parse_recipe, module_files, module_index, recipe,
                           recipe_verified, recipes, recipes_dir, traits_of)
from .recipe_layout import _chars_pattern, _formula_value, _key_int, layer_kind_names
from .recipe_live import HEAD_DIM_PROBE, TINY, live_config

__all__ = ["NOT_RECIPES", "HEAD_DIM_PROBE", "TINY", "args_spec", "canonical_view", "layer_kind_names", "live_config",
           "module_files", "module_index", "reader_for", "wrapper_injections", "recipe", "recipe_rule", "recipe_verified", "recipes",
           "recipes_dir", "traits_of", "_load_all", "_parse_recipe", "_key_int", "_formula_value"]

# --------------------------------------------------------------------------------------------------
# config -> per-layer caches
# --------------------------------------------------------------------------------------------------


def args_spec(rec: ModuleRecipe) -> ArgsSpec:
    a = rec.args
    return ArgsSpec(a.cls, frozenset(a.required), dict(a.defaults), a.head_dim, a.kv_from_heads)


_ABSENT = object()


def _at_path(data: dict, path: str) -> Any:
    """``data[a][b]`` for the key path ``a.b`` (``_ABSENT`` when a step is missing or not an object)."""
    cur: Any = data
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return _ABSENT
        cur = cur[part]
    return cur


def canonical_view(rec: ModuleRecipe, data: dict) -> dict:
    """The config with the module's renamed keys under the canonical names the readers use (gpt2's
    ``n_layer`` as ``num_hidden_layers``, dbrx's ``attn_config.kv_n_heads`` as ``num_key_value_heads``);
    the original keys stay too."""
    out = dict(data)
    for canon, key in rec.args.keys.items():
        v = _at_path(data, key)
        if v is not _ABSENT and canon not in data:
            out[canon] = v
    return out


def wrapper_injections(rec: ModuleRecipe, top: dict, tc: dict) -> tuple[dict, dict]:
    """The text config as the wrapper's ``__post_init__`` leaves it: (the config's own keys that still count,
    injected key -> (value, why)) from ``text.sets`` / ``defaults`` / ``from_top``."""
    t = rec.text
    if t is None or tc is top:
        return tc, {}
    inj: dict[str, tuple[Any, str]] = {}
    for k, v in t.defaults.items():
        if k not in tc:
            inj[k] = (v, f"{rec.module}.ModelArgs.__post_init__ default ({k} = {v!r} when {t.key} lacks it)")
    for k, v in t.sets.items():
        inj[k] = (v, f"{rec.module}.ModelArgs.__post_init__ ({t.key}.{k} := {v!r})")
    for k, top_key in t.from_top.items():
        v = top.get(top_key, t.top_defaults.get(top_key))
        if v is not None:
            inj[k] = (v, f"{rec.module}.ModelArgs.__post_init__ ({t.key}.{k} := top-level {top_key} = {v!r})")
    overridden = set(t.sets) | {k for k in t.from_top if k in inj}
    return {k: v for k, v in tc.items() if k not in overridden}, inj


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
    r = Reader(view, label=label, prefix=prefix, spec=spec, module=rec.module, injected=injected)
    if not rec.dims:
        return r
    # computed dims win over the config's key of that name (mlx-lm never reads it); a formula whose inputs
    # are absent stays unset, so the read that needs it names the missing key
    injected = dict(injected or {})
    for name, f in rec.dims.items():
        v = evaluate(f, lambda k: _key_int(r, k))
        if v is not None:
            check_dim(v, f"{label}: {rec.module}.py's {name} = {f}")
            injected[name] = (v, f"{rec.module}.py computes {name} = {f} = {v}")
    shadowed = {k: view[k] for k in injected if k in view}
    view = {k: v for k, v in view.items() if k not in injected}
    out = Reader(view, label=label, prefix=prefix, spec=spec, module=rec.module, injected=injected)
    out.shadowed = shadowed  # the config's own values of computed dims: said as ignored (``ignores``)
    return out


def _first(r: Reader, keys: list) -> tuple[int | None, str]:
    for k in keys:
        if isinstance(k, int):  # a constant of the module
            return k, f"{r.module}.py (constant {k})"
        v = r.int(k, allow_none=True, required=False)
        if v is not None:
            return v, r.where(k)
    return None, ""


def _state_spec(kr: KindRecipe, r: Reader) -> dict:
    """``cache: state``: each array's shape from its formulas (constant in the prompt length)."""
    tensors = []
    for a in kr.arrays:
        shape = []
        for f in a.shape:
            v = _formula_value(f, r)
            if v is None:
                absent = [k for k in formula_keys(f) if _key_int(r, k) is None]
                raise UnsupportedError(
                    f"unsupported: model_type {shown(r.module)}: the {a.name} state's dim {f!r} needs "
                    f"{', '.join(r.prefix + k for k in absent)}, and the config gives none (nor mlx-lm's "
                    f"{r.spec.cls} a default)")
            if v < 1:
                raise UnsupportedError(
                    f"unsupported: model_type {shown(r.module)}: the {a.name} state's dim {f!r} = {v} with this "
                    "config (an empty or negative array: mlx-lm would fail or hold nothing)")
            shape.append(v)
        tensors.append({"name": a.name, "shape": shape, "dtype": a.dtype})
    return {"kind": "state", "tensors": tensors}


def _indexer_spec(kr: KindRecipe, r: Reader) -> dict:
    """A DSA indexer cache: its key width from the kind's own keys/formula (else the MLA index_head_dim) and,
    when given, its value width (0 = key-only)."""
    s: dict[str, Any] = {"kind": "indexer"}
    if kr.head_dim:
        v, _ = _first(r, kr.head_dim)
        if v is not None:
            s["head_dim"] = v
    for attr, field, lo in (("head_dim_is", "head_dim", 1), ("v_head_dim_is", "v_head_dim", 0)):
        f = getattr(kr, attr)
        if f is not None:
            v = _formula_value(f, r)
            if v is None or v < lo:
                raise UnsupportedError(f"unsupported: model_type {shown(r.module)}: the indexer's {field} {f!r} = {v} "
                                       f"with this config (needs {', '.join(r.prefix + k for k in formula_keys(f)) or 'nothing'})")
            s[field] = v
    return s


def _cache_spec(kr: KindRecipe, r: Reader, d, model_kv: int | None, model_hd: int | None) -> dict:
    if kr.cache == "none" and kr.slot:
        return {"kind": "none", "slot": True}
    if kr.cache in ("latent", "none"):
        return {"kind": kr.cache}
    if kr.cache == "indexer":
        return _indexer_spec(kr, r)
    if kr.cache == "state":
        return _state_spec(kr, r)
    s: dict[str, Any] = {"kind": kr.cache}
    if kr.num_kv_heads and (kr.num_kv_heads_if is None or r.boolean(kr.num_kv_heads_if)):
        v, where = _first(r, kr.num_kv_heads)
        if v is not None and v != model_kv:
            s["num_kv_heads"] = v
    if kr.head_dim:
        v, where = _first(r, kr.head_dim)
        if v is not None and v != model_hd:
            s["head_dim"] = v
    for attr, field, model in (("num_kv_heads_is", "num_kv_heads", model_kv), ("head_dim_is", "head_dim", model_hd)):
        f = getattr(kr, attr)
        if f is not None:
            v = _formula_value(f, r)
            if v is None or v < 1:
                raise UnsupportedError(f"unsupported: model_type {shown(r.module)}: {field} {f!r} = {v} with this config "
                                       f"(needs {', '.join(r.prefix + k for k in formula_keys(f)) or 'nothing'})")
            s.pop(field, None)
            if v != model:
                s[field] = v
    if kr.v_head_dim_is is not None:
        v = _formula_value(kr.v_head_dim_is, r)
        if v is None or v < 1:
            raise UnsupportedError(f"unsupported: model_type {shown(r.module)}: v_head_dim {kr.v_head_dim_is!r} = {v} "
                                   "with this config")
        s["v_head_dim"] = v
    if kr.cache == "sliding":
        wkeys = kr.window if isinstance(kr.window, list) else [kr.window]
        w, _ = _first(r, wkeys)
        if w is None:
            raise UnsupportedError(
                f"unsupported: model_type {shown(r.module)}: sliding layers need {r.prefix}{' or '.join(wkeys)}, and the "
                "config gives none (mlx-lm would build RotatingKVCache(max_size=None) and fail on the first update)")
        s["window"] = w
    if kr.cache == "chunked":
        s["chunk"] = r.int(kr.chunk)
    return s


def _attention_dims(rec: ModuleRecipe, r: Reader, d, n_kv: int, hd: int) -> tuple[int, int]:
    """The recipe's ``attention`` widths (formulas) over the args rule's: the model's KV heads, key and
    value widths."""
    out = {"num_kv_heads": n_kv, "head_dim": hd}
    for name in ("num_kv_heads", "head_dim", "v_head_dim"):
        f = getattr(rec.attention, name)
        if f is None:
            continue
        v = evaluate(f, lambda k: _key_int(r, k))
        if v is None:
            absent = [k for k in formula_keys(f) if _key_int(r, k) is None]
            raise UnsupportedError(f"unsupported: model_type {shown(r.module)}: the attention's {name} = {f!r} needs "
                                   f"{', '.join(r.prefix + k for k in absent)}, and the config gives none (nor mlx-lm's "
                                   f"{r.spec.cls} a default)")
        if v < 1:
            raise UnsupportedError(f"unsupported: model_type {shown(r.module)}: the attention's {name} = {f!r} is {v} "
                                   "with this config (mlx-lm cannot build an attention that narrow)")
        check_dim(v, f"{r.label}: the attention's {name} = {f!r}")
        keys = formula_keys(f)
        d.put(name, v, f"= {f}" + (f" ({', '.join(r.where(k.partition('.')[0]) for k in keys)})" if keys else "")
              + f" (module recipe profiles/mlx_lm/{rec.module}.yaml: attention)")
        out[name] = v
    return out["num_kv_heads"], out["head_dim"]


def _no_make_cache(specs: dict[str, list[KindRecipe]]) -> tuple[dict[str, list[KindRecipe]], set[str]]:
    """The kinds as ``make_prompt_cache``'s default builds them for a wrapper without ``make_cache``: one
    unbounded KVCache per layer, so a sliding kind is a full one of the same widths (its window only masks
    attention). Returns the kinds and the names of those that were sliding."""
    out, was = {}, set()
    for k, parts in specs.items():
        if any(p.cache == "sliding" for p in parts):
            was.add(k)
            parts = [p.model_copy(update={"cache": "full", "window": None}) if p.cache == "sliding" else p
                     for p in parts]
        out[k] = parts
    return out, was


def recipe_rule(rec: ModuleRecipe, *, no_make_cache: str | None = None) -> Callable:
    """An extraction rule (``Ctx -> None``, see ``to_layers``) that reads the config by ``rec``.

    ``no_make_cache``: the wrapper module (``mistral3.py``) that holds this text model and defines no
    ``make_cache`` (``text_by.make_cache: false``): every layer gets a KVCache, sliding kinds included."""
    def rule(c) -> None:
        r, d = c.r, c.d
        names, why = layer_kind_names(rec, r)
        for key, count_key in rec.args.lengths.items():
            given = r.raw(key, None)
            if isinstance(given, list) and len(given) != r.int(count_key, maximum=None):
                raise UnsupportedError(f"unsupported: model_type {shown(rec.module)}: {r.prefix}{key} has {len(given)} "
                                       f"entries for {r.int(count_key, maximum=None)} {count_key} ({rec.args.cls} "
                                       "raises ValueError)")
        pl, per = rec.layout.per_layer, None
        if pl is not None:
            names, per = pl_.resolve(pl, r, names)
            if pl.kind_if:
                why += "; layer i is " + ", else ".join(f"{k} where {p} is true" for p, k in pl.kind_if.items())
        specs = {k: (v if isinstance(v, list) else [v]) for k, v in rec.kinds.items()}
        as_full: set[str] = set()
        if no_make_cache is not None:
            specs, as_full = _no_make_cache(specs)
        used = set(names) - {"none"}
        caches = {c_.cache for k in used for c_ in specs[k]}
        n_kv = hd = None
        if "latent" in caches or ("indexer" in caches and rec.mla):
            mla = tl.mla(c, index="indexer" in caches)
            tl.mla_heads(c, mla)
        elif rec.mla:  # expanded MLA: full caches, the ranks only for the peak model
            tl.mla(c)
        if caches & {"full", "sliding", "chunked"}:
            if pl is not None and (pl.num_kv_heads is not None or pl.num_heads is not None):
                n_q, n_kv = pl_.model_heads(c, pl, per)
            else:
                n_q, n_kv = tl.heads(c)
            hd = tl.head_dim(c, n_q)
            if rec.attention is not None:
                n_kv, hd = _attention_dims(rec, r, d, n_kv, hd)
        built = {}
        for k in used:
            parts = [_cache_spec(kr, r, d, n_kv, hd) for kr in specs[k]]
            built[k] = parts if isinstance(rec.kinds[k], list) else parts[0]  # a list is a CacheList, even of one
        lt, ch = rec.layout.layer_types, rec.layout.chars
        given_n = r.data.get(rec.layout.count)
        if ch is not None and ch.length:  # the character pattern is the stack
            _, where = _chars_pattern(ch, r, rec.module)
            d.put("num_layers", len(names), f"= len({ch.key}) ({where})")
            d.layers_as_string = ch.as_string
            if isinstance(given_n, int) and given_n != len(names):
                d.notes.append(f"{c.label}: {rec.layout.count} = {given_n} but {ch.key} has {len(names)} blocks; "
                               "mlx-lm uses the pattern's length")
        else:
            d.put("num_layers", len(names), f"= len({r.where(lt.key)})" if lt is not None and lt.length
                  and r.raw(lt.key, None) is not None else r.where(rec.layout.count))
        if lt is not None and lt.length and r.raw(lt.key, None) is not None and isinstance(given_n, int) \
                and given_n != len(names):
            d.notes.append(f"{c.label}: {r.prefix}{lt.key} has {len(names)} entries but {rec.layout.count} is "
                           f"{given_n}; mlx-lm builds one block per {lt.key} entry")
        if rec.kv_bits_fails:
            d.put("kv_bits_fails", rec.kv_bits_fails, f"module recipe profiles/mlx_lm/{rec.module}.yaml")
        renamed = {}
        for k in sorted(as_full & used):  # the name of an identical kind (llama's sliding -> its full), if any
            same = [o for o in sorted(used - as_full) if built[o] == built[k]]
            if same:
                renamed[k] = same[0]
        n_full = sum(1 for k in names if k in as_full)
        if n_full:
            d.notes.append(f"{no_make_cache}: {n_full} layer(s) are {'/'.join(sorted(as_full & used))} in "
                           f"{rec.module}.py, but mlx-lm's {no_make_cache} defines no make_cache, so make_prompt_cache "
                           "gives every layer an unbounded KVCache (the window only masks attention)")
            why += f"; every layer a KVCache ({no_make_cache} defines no make_cache)"
        d.per_layer = [("none", {"kind": "none"}) if k == "none" else (renamed.get(k, k), built[k]) for k in names]
        if per is not None:
            d.per_layer = pl_.specialise(d.per_layer, per, n_kv)
        d.prov["layers"] = f"module recipe profiles/mlx_lm/{rec.module}.yaml: {why}"
        if rec.traits.sinks:
            d.put("attention_sinks", True, f"profiles/mlx_lm/{rec.module}.yaml traits: per-head attention sinks")
        for key, ign in rec.ignores.items():
            reason = ign if isinstance(ign, str) else ign.reason
            if not isinstance(ign, str) and ign.unless is not None and r.data.get(ign.unless) is False:
                continue
            if not isinstance(ign, str) and ign.only_without is not None and r.data.get(ign.only_without) is not None:
                continue
            given = r.data.get(key, getattr(r, "shadowed", {}).get(key))
            if not isinstance(ign, str) and ign.unless_equal is not None and given == d.fields.get(ign.unless_equal):
                continue
            if given is not None:
                d.notes.append(f"{c.label}: {r.prefix}{key} = {shown(given)} is ignored by mlx-lm's "
                               f"{rec.module}.py: {reason}")
    return rule
