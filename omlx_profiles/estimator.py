"""The estimator an engine calls per request: resident cache bytes now, prefill peak with the peak model.

It reads only a ``Profile`` (plain dataclasses) and does integer arithmetic: no mlx import, no YAML.
"""
from __future__ import annotations

from .kv import KVQuant, KVReport, kv_report
from .profile import Profile


class Estimator:
    def __init__(self, profile: Profile):
        self.profile = profile

    def kv_report(self, tokens: int, *, schedule: str = "generate", chunk: int = 2048,
                  dtype: str | None = None, quant: KVQuant | None = None) -> KVReport:
        """Per-layer resident cache bytes, equal to ``sum(c.nbytes for c in cache)`` of the live model."""
        return kv_report(self.profile, tokens, schedule=schedule, chunk=chunk, dtype=dtype, quant=quant)

    def kv_bytes(self, tokens: int, **kw) -> int:
        return self.kv_report(tokens, **kw).total
