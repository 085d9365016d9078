"""A recipe's ``layout`` -> one kind name per layer (and the sentence saying why): the shapes of
``schema.module.Layout`` (uniform, modulo, layer_types, cycle, indices, chars, flag, shared trailing layers)
read from a config the way mlx-lm's ``make_cache`` / ``__post_init__`` lay caches out. No module name here.
"""
from __future__ import annotations

from ..errors import InputError, UnsupportedError
from ..schema.formula import evaluate, keys as formula_keys
from ..schema.module import Chars, Cycle, Flags, Indices, LayerTypes, Modulo, ModuleRecipe
from .config import MAX_LAYERS, Reader, check_dim, shown


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
    missing = [t for t in lt.requires if t not in types]
    if missing:
        raise UnsupportedError(f"unsupported: model_type {shown(module)}: {r.prefix}{lt.key} has no {missing} entry; "
                               f"mlx-lm's {module}.py looks up the first one (list.index raises ValueError)")
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


def _chars_pattern(ch: Chars, r: Reader, module: str) -> tuple[object, str]:
    """The pattern and where it came from: ``key``, else the first non-empty of ``lists`` spelled by ``names``
    (mlx-lm's ``__post_init__``: ``layers_block_type or layer_types`` -> characters)."""
    pat = r.raw(ch.key, None)
    if pat is not None or not ch.lists:
        return pat, r.where(ch.key)
    for key in ch.lists:
        blocks = r.str_list(key)
        if blocks:
            bad = sorted(set(blocks) - set(ch.names))
            if bad:
                raise UnsupportedError(f"unsupported: model_type {shown(module)}: layer block types {bad} in "
                                       f"{r.prefix}{key} ({r.spec.cls} raises ValueError; it knows {sorted(ch.names)})")
            return "".join(ch.names[b] for b in blocks), r.where(key)
    return None, r.where(ch.key)


def _chars_kinds(ch: Chars, n: int, r: Reader, module: str) -> tuple[list[str], str]:
    pat, where = _chars_pattern(ch, r, module)
    if ch.length and isinstance(pat, list) and all(isinstance(x, str) and len(x) == 1 for x in pat):
        pat = "".join(pat)  # mlx-lm keeps the pattern as a list of characters
    if pat is None:
        if ch.none is None:
            alts = "".join(f" nor {r.prefix}{k}" for k in ch.lists)
            raise UnsupportedError(f"unsupported: model_type {shown(module)}: the config has neither "
                                   f"{r.prefix}{ch.key}{alts} ({r.spec.cls} cannot lay out its layers)")
        return [ch.none] * n, f"{where} is null: every layer {ch.none}"
    if ch.length and isinstance(pat, str) and len(pat) > MAX_LAYERS:
        raise InputError(f"{r.label}: {r.prefix}{ch.key} has {len(pat)} blocks (at most {MAX_LAYERS})")
    if not isinstance(pat, str) or not pat:
        raise InputError(f"{r.label}: {r.prefix}{ch.key} must be a non-empty string such as "
                         f"{''.join(ch.map)!r}, got {shown(pat)}")
    if ch.other is None:
        bad = sorted(set(pat) - set(ch.map))
        if bad:
            raise UnsupportedError(f"unsupported: model_type {shown(module)}: block characters {bad} in "
                                   f"{r.prefix}{ch.key} (mlx-lm knows {', '.join(ch.map)})")
    r.used[ch.key] = r.where(ch.key)
    how = ", ".join(f"{k} -> {v}" for k, v in ch.map.items())
    if ch.length:  # the kinds are named by their characters: the pattern itself is the layout
        return [ch.map.get(c, ch.other) for c in pat], f"{where}: one layer per character (kinds {', '.join(ch.map)})"
    return ([ch.map.get(pat[i % len(pat)], ch.other) for i in range(n)],
            f"{where} = {pat!r} cycled over the layers: {how}")


def layer_kind_names(rec: ModuleRecipe, r: Reader) -> tuple[list[str], str]:
    """One kind name per layer (``none`` for KV-shared layers) and the sentence saying why."""
    lay = rec.layout
    # a whole-stack character pattern is the layer count (count is only compared with it, in recipe_rule)
    n = 0 if lay.chars is not None and lay.chars.length else r.int(lay.count, maximum=MAX_LAYERS)
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
    check_dim(v, f"{r.label}: {r.prefix}{key}")
    r.used[head] = r.where(head)
    return v


def _formula_value(f, r: Reader) -> int | None:
    try:
        v = evaluate(f, lambda k: _key_int(r, k))
        return v if v is None else check_dim(v, f"{r.label}: {f!r}")
    except ZeroDivisionError:
        raise UnsupportedError(f"unsupported: model_type {shown(r.module)}: {f!r} divides by zero with this config "
                               "(mlx-lm fails the same way)") from None
