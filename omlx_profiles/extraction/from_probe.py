"""A profile from a cache probe's report (``omlx_profiles.live.probe.probe_layout``): any family.

Why apart from ``from_config``: the probe report is plain data (dicts of shapes, dtypes and cache
classes), so turning it into a ``Profile`` needs no mlx; only taking the probe does (``omlx_profiles.live``).
"""
from __future__ import annotations

import dataclasses
from typing import Any

from ..units import short_dtype
from ..errors import UnsupportedError
from ..mlxlm.fold import build_layers
from ..registry.profile import Profile
from ..schema.family import CompleteVariant
from .from_config import slug


def args_dict(model: Any) -> dict | None:
    """``model.args`` (or ``model.config``) of an mlx-lm model as a plain dict, nested dataclasses too."""
    args = getattr(model, "args", None)
    if args is None:
        args = getattr(model, "config", None)
    if args is None:
        return None
    if dataclasses.is_dataclass(args) and not isinstance(args, type):
        out = {f.name: getattr(args, f.name) for f in dataclasses.fields(args)}
    elif isinstance(args, dict):
        out = dict(args)
    elif hasattr(args, "__dict__"):
        out = dict(vars(args))
    else:
        return None
    for k, v in list(out.items()):
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            out[k] = {f.name: getattr(v, f.name) for f in dataclasses.fields(v)}
    if "model_type" not in out and isinstance(getattr(model, "model_type", None), str):
        out["model_type"] = model.model_type
    return out


def profile_from_layout(layout: list[dict], *, dtype: str, name: str = "live-model", family: str = "live",
                        mlx_model_type: str = "unknown", args: dict | None = None, source: str = "live probe") -> Profile:
    """A profile built only from a probe (``omlx_profiles.live.probe.probe_layout``): any family.

    K/V widths come from the arrays' shapes (keys and values separately), windows and chunks from the
    cache objects, states from their arrays. A ``KVCache`` of one head whose widths equal the args'
    ``kv_lora_rank`` / ``qk_rope_head_dim`` is the MLA latent. Layers without a cache entry (nemotron_h
    MLP blocks) are invisible to a probe: ``num_layers`` counts cache entries.
    """
    act = dtype
    mla = None
    if args and all(isinstance(args.get(k), int) for k in ("kv_lora_rank", "qk_rope_head_dim")):
        mla = {k: args[k] for k in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
               if isinstance(args.get(k), int)}
        if len(mla) < 4:
            mla = None
        elif isinstance(args.get("index_head_dim"), int):
            mla["index_head_dim"] = args["index_head_dim"]

    def one(e: dict, in_list: bool, pos: int) -> tuple[str, dict]:
        cls = e.get("class", "")
        if "state" in e:
            tensors = []
            arrays = [t for t in e["state"] if t is not None]
            # mlx-lm's ArraysCache convention: conv window(s) first, the recurrent state last
            names = (["conv"] if len(arrays) == 1 else
                     ["conv"] + ["ssm"] if len(arrays) == 2 else
                     [f"conv{j}" for j in range(len(arrays) - 1)] + ["ssm"])
            for nm, t in zip(names, arrays):
                dt = short_dtype(t["dtype"])
                tensors.append({"name": nm, "shape": list(t["shape"][1:]) or [1],
                                "dtype": "model" if dt == act else dt})
            if not tensors:
                raise UnsupportedError(f"{cls} entry holds no arrays after the probe forward")
            return "state", {"kind": "state", "tensors": tensors}
        k, v = e.get("keys"), e.get("values")
        if not k or not v:
            raise UnsupportedError(f"{cls} entry has no keys/values after the probe forward "
                                   "(quantized or empty cache)")
        n_kv, kw, vw = k["row_shape"][0], k["row_shape"][1], v["row_shape"][1]
        if cls == "RotatingKVCache":
            return "sliding", {"kind": "sliding", "window": e["max_size"], "keep": e.get("keep", 0),
                               "num_kv_heads": n_kv, "head_dim": kw, "v_head_dim": vw}
        if cls == "ChunkedKVCache":
            return "chunked", {"kind": "chunked", "chunk": e["chunk_size"], "num_kv_heads": n_kv,
                               "head_dim": kw, "v_head_dim": vw}
        if cls != "KVCache":
            raise UnsupportedError(f"cache class {cls} (not modelled)")
        if mla and n_kv == 1 and kw == mla["kv_lora_rank"] and vw == mla["qk_rope_head_dim"]:
            return "latent", {"kind": "latent"}
        if mla and in_list and pos > 0 and n_kv == 1 and kw == vw and kw == mla.get("index_head_dim"):
            return "indexer", {"kind": "indexer"}
        return "full", {"kind": "full", "num_kv_heads": n_kv, "head_dim": kw, "v_head_dim": vw}

    per_layer: list[tuple[str, Any]] = []
    for e in layout:
        if "children" in e:
            kids = [one(ch, True, i) for i, ch in enumerate(e["children"])]
            per_layer.append(("+".join(n for n, _ in kids), [s for _, s in kids]))
        else:
            per_layer.append(one(e, False, 0))
    if not per_layer:
        raise UnsupportedError("the model's prompt cache has no entries")
    payload: dict[str, Any] = {"mlx_model_type": mlx_model_type, "num_layers": len(per_layer), "dtype": act,
                               "layers": build_layers(per_layer)}
    if mla:
        payload["mla"] = mla
    first_attn = next((s for _, s in per_layer if isinstance(s, dict) and "num_kv_heads" in s), None)
    if first_attn:
        payload["num_kv_heads"], payload["head_dim"] = first_attn["num_kv_heads"], first_attn["head_dim"]
    if args and isinstance(args.get("num_attention_heads"), int):
        payload["num_heads"] = args["num_attention_heads"]
    v = CompleteVariant.model_validate(payload)
    p = Profile.from_variant(v, name=slug(name), family=slug(family), source=source)
    prov = {k: f"{source}: make_prompt_cache + forward" for k in payload}
    return dataclasses.replace(p, provenance=prov)


def layout_dtype(layout: list[dict]) -> str | None:
    """The activation dtype of a probed model: the dtype of the first cache entry holding keys."""
    for e in layout:
        for x in [e] + list(e.get("children", [])):
            k = x.get("keys")
            if k:
                return short_dtype(k["dtype"])
    return None


__all__ = ["args_dict", "layout_dtype", "profile_from_layout"]
