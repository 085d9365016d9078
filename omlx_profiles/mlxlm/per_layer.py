"""Per-layer values of a module recipe (``layout.per_layer``, ``schema.module.PerLayer``).

Why its own module: a few mlx-lm modules size each layer from a list in the config instead of one
number - openelm's ``num_kv_heads: [3, 3, 4, ...]`` (one entry per layer), nemotron-nas's
``block_configs[i].attention`` (``n_heads_in_group``, or ``no_op`` / ``replace_with_linear``: a block
without attention and without a cache entry). The recipe writes them as formulas over key paths, and a
list met on a path is read at the layer's index; this module evaluates them for each layer, removes the
layers without attention, and gives each layer's cache its own KV heads. No module name in the logic.
"""
from __future__ import annotations

from typing import Any

from ..errors import InputError, UnsupportedError
from ..schema.formula import evaluate
from ..schema.module import PerLayer
from .config import Reader, check_dim, shown

_ATTN = ("full", "sliding", "chunked")


def _at(r: Reader, path: str, i: int) -> tuple[Any, str]:
    """The value at ``path`` for layer ``i`` (a list on the way is indexed by ``i``) and where it was read."""
    head, _, rest = path.partition(".")
    v = r.raw(head, None)
    where = head
    if head in r.data or head in r.spec.defaults:
        r.used[head] = r.where(head)
    for part in [None] + (rest.split(".") if rest else []):
        if isinstance(v, list):
            if i >= len(v):
                raise UnsupportedError(f"unsupported: model_type {shown(r.module)}: {r.label}: {r.prefix}{where} has "
                                       f"{len(v)} entries, layer {i} needs one (mlx-lm indexes it and fails)")
            v, where = v[i], f"{where}[{i}]"
        if part is None:
            continue
        if v is None:
            return None, f"{r.prefix}{where}.{part}"
        if not isinstance(v, dict):
            raise InputError(f"{r.label}: {r.prefix}{where} must be a mapping (it holds {part!r}), got {shown(v)}")
        v, where = v.get(part), f"{where}.{part}"
    if isinstance(v, list):  # the path ends on a per-layer list
        if i >= len(v):
            raise UnsupportedError(f"unsupported: model_type {shown(r.module)}: {r.label}: {r.prefix}{where} has "
                                   f"{len(v)} entries, layer {i} needs one (mlx-lm indexes it and fails)")
        v, where = v[i], f"{where}[{i}]"
    return v, f"{r.prefix}{where}"


def _int(r: Reader, path: str, i: int) -> int | None:
    v, where = _at(r, path, i)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise InputError(f"{r.label}: {where} must be a non-negative integer, got {shown(v)}")
    return check_dim(v, f"{r.label}: {where}")


def _value(f, r: Reader, i: int, what: str) -> int:
    try:
        v = evaluate(f, lambda k: _int(r, k, i))
    except ZeroDivisionError:
        raise UnsupportedError(f"unsupported: model_type {shown(r.module)}: layer {i}: {what} {f!r} divides by zero "
                               "(mlx-lm fails the same way)") from None
    if v is None or v < 1:
        raise UnsupportedError(f"unsupported: model_type {shown(r.module)}: layer {i}: {what} {f!r} = {v} with this "
                               "config (a key it reads is missing or null)")
    return check_dim(v, f"{r.label}: layer {i}: {what} {f!r}")


def resolve(pl: PerLayer, r: Reader, names: list[str]) -> tuple[list[str], list[dict]]:
    """(kind names after ``kind_if``, per-layer {num_kv_heads, num_heads} of the attention layers)."""
    out_names, per = [], []
    for i, name in enumerate(names):
        for p, kind in pl.kind_if.items():
            v, where = _at(r, p, i)
            if v is not None and not isinstance(v, bool):
                raise InputError(f"{r.label}: {where} must be true or false, got {shown(v)}")
            if v:
                name = kind
                break
        else:
            if name != "none":
                out_names.append(name)
                per.append(_layer_values(pl, r, i))
                continue
        out_names.append(name)
        per.append({})
    return out_names, per


def _layer_values(pl: PerLayer, r: Reader, i: int) -> dict:
    vals = {}
    if pl.num_kv_heads is not None:
        vals["num_kv_heads"] = _value(pl.num_kv_heads, r, i, "num_kv_heads")
    if pl.num_heads is not None:
        vals["num_heads"] = _value(pl.num_heads, r, i, "num_heads")
    return vals


def model_heads(c, pl: PerLayer, per: list[dict]) -> tuple[int, int]:
    """The model-level (num_heads, num_kv_heads) when layers size them: query heads = the largest layer's (a
    bound for the peak model), KV heads = the first attention layer's (each layer's cache says its own)."""
    r, d = c.r, c.d
    cached = [p for p in per if p]
    if not cached:
        raise UnsupportedError(f"unsupported: model_type {shown(c.model_type)}: {c.label}: no layer has attention")
    if pl.num_heads is not None:
        n_q = max(p["num_heads"] for p in cached)
        d.put("num_heads", n_q, f"largest per-layer {pl.num_heads} (module recipe layout.per_layer)")
    else:
        n_q = r.int("num_attention_heads")
        d.put("num_heads", n_q, r.where("num_attention_heads"))
    if pl.num_kv_heads is not None:
        n_kv = cached[0]["num_kv_heads"]
        d.put("num_kv_heads", n_kv, f"{pl.num_kv_heads} of the first attention layer (module recipe "
                                    "layout.per_layer; each layer's cache carries its own)")
    else:
        n_kv = r.int("num_key_value_heads")
        d.put("num_kv_heads", n_kv, r.where("num_key_value_heads"))
    return n_q, n_kv


def specialise(per_layer: list[tuple[str, Any]], per: list[dict], n_kv: int | None) -> list[tuple[str, Any]]:
    """Each layer's cache spec with its own KV heads where they differ from the model's."""
    out = []
    for (name, spec), vals in zip(per_layer, per):
        kv = vals.get("num_kv_heads")
        if kv is None or kv == n_kv:
            out.append((name, spec))
            continue
        parts = spec if isinstance(spec, list) else [spec]
        parts = [{**s, "num_kv_heads": kv} if s.get("kind") in _ATTN else s for s in parts]
        out.append((name, parts if isinstance(spec, list) else parts[0]))
    return out
