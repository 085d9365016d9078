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
from ..schema.formula import evaluate, keys as formula_keys
from ..schema.module import Chars, Cycle, Flags, Indices, KindRecipe, LayerTypes, Modulo, ModuleIndex, ModuleRecipe
from .config import MAX_LAYERS, Reader, shown
from . import per_layer as pl_
from . import to_layers as tl  # the shared readers (heads, head dim, MLA ranks)
from .facts import ArgsSpec

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


def recipes() -> dict[str, ModuleRecipe]:
    """Every module recipe shipped in ``profiles/mlx_lm/``, by module name."""
    return _load_all(str(recipes_dir()))


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


def reader_for(rec: ModuleRecipe, data: dict, *, label: str, prefix: str = "") -> Reader:
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
    r = Reader(view, label=label, prefix=prefix, spec=spec, module=rec.module)
    if not rec.dims:
        return r
    # computed dims win over the config's key of that name (mlx-lm never reads it); a formula whose inputs
    # are absent stays unset, so the read that needs it names the missing key
    injected = {}
    for name, f in rec.dims.items():
        v = evaluate(f, lambda k: _key_int(r, k))
        if v is not None:
            injected[name] = (v, f"{rec.module}.py computes {name} = {f} = {v}")
    shadowed = {k: view[k] for k in injected if k in view}
    view = {k: v for k, v in view.items() if k not in injected}
    out = Reader(view, label=label, prefix=prefix, spec=spec, module=rec.module, injected=injected)
    out.shadowed = shadowed  # the config's own values of computed dims: said as ignored (``ignores``)
    return out


def _modulo_kinds(m: Modulo, n: int, r: Reader) -> tuple[list[str], str]:
    p = m.period if isinstance(m.period, int) else r.int(m.period)
    if m.residue == "last":
        res = p - 1
    else:
        res = _formula_value(m.residue, r)
        if res is None:
            raise UnsupportedError(f"unsupported: model_type {shown(r.module)}: the layer rule needs "
                                   f"{', '.join(r.prefix + k for k in formula_keys(m.residue))}, and the config "
                                   "gives none")
    src = str(p) if isinstance(m.period, int) else f"{r.where(m.period)}"
    if m.needs_residue and n <= res:
        raise UnsupportedError(f"unsupported: model_type {shown(r.module)}: {n} layers, but mlx-lm indexes layer "
                               f"{res} (its first {m.kind} layer) and fails")
    kinds = [m.kind if i % p == res else m.other for i in range(n)]
    why = f"layer i is {m.kind} iff i % {p} == {res} ({src})"
    if m.tail is not None:
        cut = n // p * p
        kinds = kinds[:cut] + [m.tail] * (n - cut)
        why += f"; layers {cut}.. (after the last whole group of {p}) are {m.tail}"
    return kinds, why


def _flags_kinds(fl: Flags, n: int, r: Reader, module: str) -> tuple[list[str], str]:
    for key in fl.keys:
        head, _, rest = key.partition(".")
        v = r.raw(head, None)
        for part in rest.split(".") if rest else []:
            v = v.get(part) if isinstance(v, dict) else None
        if v is None:
            continue
        if not isinstance(v, list) or not all(isinstance(x, (int, bool)) for x in v):
            raise InputError(f"{r.label}: {r.prefix}{key} must be a list of 0/1 per layer, got {shown(v)}")
        if len(v) < n:
            raise UnsupportedError(f"unsupported: model_type {shown(module)}: {r.prefix}{key} has {len(v)} entries for "
                                   f"{n} layers (mlx-lm indexes it per layer and raises IndexError)")
        r.used[head] = r.where(head)
        return [fl.kind if v[i] else fl.other for i in range(n)], f"{r.prefix}{key}[i] truthy -> {fl.kind}, else {fl.other}"
    return [fl.default] * n, f"none of {', '.join(r.prefix + k for k in fl.keys)}: every layer {fl.default}"


def _layer_types_kinds(lt: LayerTypes, n: int, r: Reader, module: str) -> tuple[list[str], str]:
    if lt.ints:
        nums = r.int_list(lt.key)
        types = None if nums is None else [str(x) for x in nums]
    else:
        types = r.str_list(lt.key)
    if types is None:
        if isinstance(lt.default, Flags):
            kinds, why = _flags_kinds(lt.default, n, r, module)
            return kinds, f"no {lt.key}: {why}"
        if isinstance(lt.default, Modulo):
            kinds, why = _modulo_kinds(lt.default, n, r)
            return kinds, f"no {lt.key}: {module}.ModelArgs default, {why}"
        if lt.default is None:
            raise UnsupportedError(f"unsupported: model_type {shown(module)}: the config has no {r.prefix}{lt.key}, "
                                   f"and mlx-lm's {r.spec.cls} has no default layout (it fails)")
        return [lt.default] * n, f"no {lt.key}: every layer {lt.default}"
    if lt.length:
        n = len(types)
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
    how = "one layer per entry; " if lt.length else ""
    return out, f"{r.where(lt.key)}: {how}" + ", ".join(f"{k} -> {v}" for k, v in lt.map.items())


def _cycle_kinds(cy: Cycle, n: int, r: Reader, module: str) -> tuple[list[str], str]:
    seq, where = None, ""
    for key in [cy.key, *cy.also]:
        seq, where = r.str_list(key), r.where(key)
        if seq is not None:
            break
    if seq is None:
        seq, where = cy.default, f"{module}.ModelArgs default {cy.default}"
    if not seq:
        raise UnsupportedError(f"unsupported: model_type {shown(module)}: {r.prefix}{cy.key} is empty or absent and "
                               "mlx-lm has no default")
    out = []
    for i in range(n):
        t = seq[i % len(seq)]
        if t not in cy.map and cy.other is None:
            raise UnsupportedError(f"unsupported: model_type {shown(module)}: {r.prefix}{cy.key} entry {shown(t)} is "
                                   f"none of {sorted(cy.map)}")
        out.append(cy.map.get(t, cy.other))
    return out, f"{where} cycled over the layers: " + ", ".join(f"{k} -> {v}" for k, v in cy.map.items())


def _index_list(r: Reader, key: str) -> list[int] | None:
    head, _, rest = key.partition(".")
    if not rest:
        return r.int_list(key)
    v = r.raw(head, None)
    for part in rest.split("."):
        if v is None:
            return None
        if not isinstance(v, dict):
            raise InputError(f"{r.label}: {r.prefix}{head} must be a mapping holding {rest!r}, got {shown(v)}")
        v = v.get(part)
    if v is None:
        return None
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise InputError(f"{r.label}: {r.prefix}{key} must be a list of integers, got {shown(v)}")
    r.used[head] = r.where(head)
    return list(v)


def _indices_kinds(ix: Indices, n: int, r: Reader, module: str) -> tuple[list[str], str]:
    idx = _index_list(r, ix.key)
    if idx is None:
        if isinstance(ix.default, LayerTypes):
            kinds, why = _layer_types_kinds(ix.default, n, r, module)
            return kinds, f"no {ix.key}: {why}"
        if ix.default is None:
            raise UnsupportedError(f"unsupported: model_type {shown(module)}: the config has no {r.prefix}{ix.key}, "
                                   f"and mlx-lm's {module}.py cannot lay out its layers without it")
        return [ix.default] * n, f"no {ix.key}: every layer {ix.default}"
    s = set(idx)
    plus = f" + {ix.base}" if ix.base else ""
    return ([ix.kind if i + ix.base in s else ix.other for i in range(n)],
            f"layer i is {ix.kind} iff i{plus} in {r.prefix}{ix.key}, else {ix.other}")


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
    gate = evaluate(lay.unless.value, lambda k: _key_int(r, k)) if lay.unless is not None else 0
    if gate is None:
        kinds, why = [lay.unless.kind] * n, f"{lay.unless.value} is null/absent: every layer {lay.unless.kind}"
    elif lay.flag is not None and r.boolean(lay.flag.key) is False:
        kinds, why = [lay.flag.kind] * n, f"{r.where(lay.flag.key)} is false: every layer {lay.flag.kind}"
    elif lay.uniform is not None:
        kinds, why = [lay.uniform] * n, f"{rec.module}.py: {lay.uniform} x {r.where(lay.count)}"
    elif lay.modulo is not None:
        kinds, why = _modulo_kinds(lay.modulo, n, r)
    elif lay.layer_types is not None:
        kinds, why = _layer_types_kinds(lay.layer_types, n, r, rec.module)
    elif lay.cycle is not None:
        kinds, why = _cycle_kinds(lay.cycle, n, r, rec.module)
    elif lay.indices is not None:
        kinds, why = _indices_kinds(lay.indices, n, r, rec.module)
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


def _first(r: Reader, keys: list) -> tuple[int | None, str]:
    for k in keys:
        if isinstance(k, int):  # a constant of the module
            return k, f"{r.module}.py (constant {k})"
        v = r.int(k, allow_none=True, required=False)
        if v is not None:
            return v, r.where(k)
    return None, ""


def _key_int(r: Reader, key: str) -> int | None:
    """A config key's integer as mlx-lm's args class sees it (defaults applied); ``a.b`` reads key ``b`` of the
    dict under ``a``. None = null or absent (the formula's ``or`` may fall back)."""
    head, _, rest = key.partition(".")
    v = r.raw(head, None)
    path = head
    for part in rest.split(".") if rest else []:
        if v is None:
            break
        if not isinstance(v, dict):
            raise InputError(f"{r.label}: {r.prefix}{path} must be a mapping (it holds {part!r}), got {shown(v)}")
        v, path = v.get(part), f"{path}.{part}"
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise InputError(f"{r.label}: {r.prefix}{key} must be a non-negative integer, got {shown(v)}")
    r.used[head] = r.where(head)
    return v


def _formula_value(f, r: Reader) -> int | None:
    try:
        return evaluate(f, lambda k: _key_int(r, k))
    except ZeroDivisionError:
        raise UnsupportedError(f"unsupported: model_type {shown(r.module)}: {f!r} divides by zero with this config "
                               "(mlx-lm fails the same way)") from None


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
        keys = formula_keys(f)
        d.put(name, v, f"= {f}" + (f" ({', '.join(r.where(k.partition('.')[0]) for k in keys)})" if keys else "")
              + f" (module recipe profiles/mlx_lm/{rec.module}.yaml: attention)")
        out[name] = v
    return out["num_kv_heads"], out["head_dim"]


def recipe_rule(rec: ModuleRecipe) -> Callable:
    """An extraction rule (``Ctx -> None``, see ``to_layers``) that reads the config by ``rec``."""
    def rule(c) -> None:
        r, d = c.r, c.d
        names, why = layer_kind_names(rec, r)
        pl, per = rec.layout.per_layer, None
        if pl is not None:
            names, per = pl_.resolve(pl, r, names)
            if pl.kind_if:
                why += "; layer i is " + ", else ".join(f"{k} where {p} is true" for p, k in pl.kind_if.items())
        specs = {k: (v if isinstance(v, list) else [v]) for k, v in rec.kinds.items()}
        used = set(names) - {"none"}
        caches = {c_.cache for k in used for c_ in specs[k]}
        n_kv = hd = None
        if "latent" in caches or ("indexer" in caches and rec.mla):
            mla = tl._mla(c, index="indexer" in caches)
            tl._mla_heads(c, mla)
        elif rec.mla:  # expanded MLA: full caches, the ranks only for the peak model
            tl._mla(c)
        if caches & {"full", "sliding", "chunked"}:
            if pl is not None and (pl.num_kv_heads is not None or pl.num_heads is not None):
                n_q, n_kv = pl_.model_heads(c, pl, per)
            else:
                n_q, n_kv = tl._heads(c)
            hd = tl._head_dim(c, n_q)
            if rec.attention is not None:
                n_kv, hd = _attention_dims(rec, r, d, n_kv, hd)
        built = {}
        for k in used:
            parts = [_cache_spec(kr, r, d, n_kv, hd) for kr in specs[k]]
            built[k] = parts if isinstance(rec.kinds[k], list) else parts[0]  # a list is a CacheList, even of one
        lt = rec.layout.layer_types
        d.put("num_layers", len(names), f"= len({r.where(lt.key)})" if lt is not None and lt.length
              and r.raw(lt.key, None) is not None else r.where(rec.layout.count))
        if rec.kv_bits_fails:
            d.put("kv_bits_fails", rec.kv_bits_fails, f"module recipe profiles/mlx_lm/{rec.module}.yaml")
        d.per_layer = [("none", {"kind": "none"}) if k == "none" else (k, built[k]) for k in names]
        if per is not None:
            d.per_layer = pl_.specialise(d.per_layer, per, n_kv)
        d.prov["layers"] = f"module recipe profiles/mlx_lm/{rec.module}.yaml: {why}"
        for key, reason in rec.ignores.items():
            given = r.data.get(key, getattr(r, "shadowed", {}).get(key))
            if given is not None:
                d.notes.append(f"{c.label}: {r.prefix}{key} = {shown(given)} is ignored by mlx-lm's "
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
    nested: dict[str, Any] = {}
    for k, v in TINY.items():
        if not (rec.args.mha and k == "num_key_value_heads"):
            key = rec.args.keys.get(k, k)
            (nested if "." in key else cfg)[key] = copy.deepcopy(v)
    cfg.update(copy.deepcopy(rec.live.config))
    for path, v in nested.items():  # a tiny dim at a nested key path, unless live.config set it
        *outer, last = path.split(".")
        cur = cfg
        for part in outer:
            cur = cur.setdefault(part, {})
            if not isinstance(cur, dict):
                raise ProfileError(f"profiles/mlx_lm/{rec.module}.yaml: live.config {part} must be an object")
        cur.setdefault(last, v)
    hd_key = rec.args.keys.get("head_dim", "head_dim")
    if probe_head_dim and rec.args.head_dim != "explicit" and hd_key not in cfg:
        # A head_dim unlike hidden // heads (128 // 4 = 32; 64 keeps kv_bits groups of 32 and 64 whole), so the live check tells "optional" (mlx-lm uses
        # it) from "derived" (mlx-lm ignores it): a wrong rule is a wrong KV width, not a passing test.
        cfg[hd_key] = HEAD_DIM_PROBE
    if rec.text is not None:  # a wrapper: the tiny language model goes under its key
        return {"model_type": rec.module, **copy.deepcopy(rec.live.top), rec.text.key: cfg}
    return cfg
