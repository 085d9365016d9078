"""What the prefill peak is asked and what it answers: ``Request`` (a prompt, its cached prefix and chunking),
``Breakdown`` (the peak term by term) and ``Verdict`` (does it fit a budget). Plain frozen values, checked
on construction, so every layer above (estimate, the CLI, the oMLX facade) passes the same objects.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InputError, UnsupportedError
from ..kv.replay import SCHEDULES
from ..units import MAX_TOKENS
from ..units import check_count


@dataclass(frozen=True)
class Request:
    """A prompt: ``tokens`` in all, of which the first ``cached`` are already in the cache (a prefix-cache
    hit: they widen attention but add no KV), fed by ``schedule`` in chunks of ``chunk``."""

    tokens: int
    cached: int = 0
    chunk: int = 2048
    schedule: str = "generate"
    batch: int = 1

    def __post_init__(self):
        # the checked value is the one kept: a numpy integer (np.uint8 overflowed in the arithmetic), an IntEnum
        # or an int subclass becomes a plain int (hostile pass 6). Token counts stop at units.MAX_TOKENS (2^30), as
        # the CLI's and the facade's do (they took 2^40 here: hostile pass 8, one contract for the same number)
        for name in ("tokens", "cached", "chunk", "batch"):
            object.__setattr__(self, name, check_count(name, getattr(self, name), minimum=0 if name == "cached" else 1,
                                                       maximum=MAX_TOKENS))
        if self.cached >= self.tokens:
            raise InputError(f"cached ({self.cached}) must be less than tokens ({self.tokens}): nothing left to prefill")
        if self.schedule not in SCHEDULES:
            raise InputError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.batch != 1:
            raise UnsupportedError("batch > 1 prefill is not modelled (mlx-lm's BatchGenerator pads and "
                                   "chunks differently); estimate one request at a time")

    @property
    def new_tokens(self) -> int:
        return self.tokens - self.cached


@dataclass(frozen=True)
class Breakdown:
    """The prefill peak of one request, term by term (bytes; weights excluded).

    ``peak_bytes`` = ``sum(terms.values())`` = the highest call's peak over what was held before the
    prompt. ``resident_kv_bytes``: what the caches hold after the prompt (prefix included).
    ``held_before_bytes``: the prefix's cache, held before the prompt (0 without a prefix hit).
    """

    peak_bytes: int
    resident_kv_bytes: int
    held_before_bytes: int
    kv_growth_bytes: int
    transient_bytes: int
    peak_call: int
    peak_q_len: int
    peak_kv_len: int
    calls: int
    terms: dict[str, int]
    routes: dict[str, str]
    backend: str
    mlx_version: str
    inflight_ops: int
    explanation: tuple[str, ...] = field(default=())
    peak_basis: str = "measured"  # measured | derived | bound (peak/basis.py)
    basis: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "peak_bytes": self.peak_bytes,
            "resident_kv_bytes": self.resident_kv_bytes,
            "held_before_bytes": self.held_before_bytes,
            "kv_growth_bytes": self.kv_growth_bytes,
            "transient_bytes": self.transient_bytes,
            "peak_call": {"index": self.peak_call, "q_len": self.peak_q_len, "kv_len": self.peak_kv_len,
                          "of": self.calls},
            "terms": dict(self.terms),
            "routes": dict(self.routes),
            "backend": self.backend,
            "mlx_version": self.mlx_version,
            "inflight_ops": self.inflight_ops,
            "peak_basis": self.peak_basis,
            "basis": dict(self.basis),
            "explanation": list(self.explanation),
        }


@dataclass(frozen=True)
class Verdict:
    """Does ``weights + held before + peak`` stay within ``budget - reserve``?"""

    fits: bool
    total_bytes: int
    budget_bytes: int
    reserve_bytes: int
    usable_bytes: int
    headroom_bytes: int  # usable - total (negative: over by that much)
    weights_bytes: int
    breakdown: Breakdown
    message: str
    margin: bool = False  # refused by the fast check's documented margin (``Estimator.fits``), not by the total
    past_context: str | None = None  # why the request is past the model's context (then ``fits`` is False)
