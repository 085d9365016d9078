"""The estimate a user or an engine sees, as one JSON-able dict with stable keys.

Stable keys (documented in the README): ``model``, ``variant``, ``family``, ``tokens``, ``schedule``,
``chunk``, ``dtype``, ``kv_bits``, ``kv_group_size``, ``kv_bytes``, ``layers`` (one entry per layer:
``index``, ``kind``, ``bytes``, ``caches`` [{``kind``, ``rows``, ``bytes``, ``quantized``}]),
``resolution``.
"""
from __future__ import annotations

from dataclasses import dataclass

from .kv import KVQuant, KVReport, kv_report
from .registry import Resolution


@dataclass(frozen=True)
class EstimateOptions:
    tokens: int
    schedule: str = "generate"
    chunk: int = 2048
    dtype: str | None = None
    quant: KVQuant | None = None


def kv_section(rep: KVReport) -> dict:
    return {
        "kv_bytes": rep.total,
        "layers": [
            {
                "index": l.index,
                "kind": l.kind,
                "bytes": l.nbytes,
                "caches": [{"kind": e.kind, "rows": e.rows, "bytes": e.nbytes, "quantized": e.quantized}
                           for e in l.entries],
            }
            for l in rep.layers
        ],
    }


def build_estimate(res: Resolution, opts: EstimateOptions) -> dict:
    p = res.profile
    rep = kv_report(p, opts.tokens, schedule=opts.schedule, chunk=opts.chunk, dtype=opts.dtype, quant=opts.quant)
    out = {
        "model": res.query,
        "variant": p.name,
        "family": p.family,
        "tokens": opts.tokens,
        "schedule": opts.schedule,
        "chunk": opts.chunk,
        "dtype": rep.dtype,
        "kv_bits": opts.quant.bits if opts.quant else None,
        "kv_group_size": opts.quant.group_size if opts.quant else None,
    }
    out.update(kv_section(rep))
    out["resolution"] = res.as_dict()
    return out
