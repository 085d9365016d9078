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


#: Chunks up to this many tokens key their tables as given, whatever the prompt: every chunk the calibration points,
#: the golden file and the property tests use (<= 4,096), and the prefill steps oMLX and mlx-lm are run with.
KEYED_AS_GIVEN = 8192


def table_chunk(chunk: int, tokens: int, executor) -> int:
    """The chunk size whose per-chunk tables (``peak.fast_cuda.CudaFit``, ``CudaPrefix``, ``FastPeak``'s lines, the
    envelope's dominating lengths) answer a request of ``tokens`` in all (cached prefix included) fed in chunks of
    ``chunk``: ``chunk`` itself, or a smaller one that makes the same calls.

    Why: a chunk of at least ``tokens - 1`` tokens makes the same calls as any other such chunk (the prefix in one
    call and its last token, the prompt in one call and its last token: ``kv.replay.call_runs``), and a chunk past
    the executor's last ``inflight_ops_by_chunk`` threshold has the same run-ahead window as any other
    (``Executor.window_for``), so the exact replay is byte-identical at both (tests/test_chunk_keys.py). The tables
    are built over every query count up to the chunk: keyed at ``2**20`` a 3,000-token request on CUDA bisected a
    million query counts (more than 10 min of CPU, 19-24 GB at ``2**30``). So a chunk past both is keyed at the
    power of two at or above ``max(tokens, last threshold + 1, KEYED_AS_GIVEN)``: at most ~18 table sizes per model,
    and a chunk of at most ``KEYED_AS_GIVEN`` tokens (every table the project has measured) is never re-keyed.
    The reported total is the envelope at that chunk: never below the exact replay (the same calls), monotone in the
    prompt and the prefix while the key stays; across a power of two it is the envelope of a different table size
    (checked, not proven: tests/test_chunk_keys.py)."""
    last = max((w.chunk for w in getattr(executor, "inflight_ops_by_chunk", None) or ()), default=0)
    floor = max(tokens, last + 1, KEYED_AS_GIVEN)
    key = 1 << (floor - 1).bit_length()
    return chunk if chunk <= key else key


#: The largest chunk whose per-query-count tables are built on a backend that commits graphs (CUDA): they bisect
#: every query count up to the chunk, ~0.2 ms a count for a dense 8B model and ~0.45 for a gated-DeltaNet (Qwen3-8B
#: 8,192 / 16,384 / 32,768 / 65,536: 1.4 / 2.9 / 6.0 / 9.1 s of CPU; 262,144: 36 s and 1.7 GB). Past it the tables are
#: not built and the reported total is the exact replay's maximum over the dominating lengths (``peak.envelope``:
#: never below the replay, monotone across chunks, not drawn within one), as where a bucket has no bound.
MAX_TABLE_CHUNK = 2 * KEYED_AS_GIVEN
#: The same on a backend without graph commits (CPU / Metal): ``peak.fast.FastPeak`` builds lines for ~2 buckets per
#: 256 query counts, ~10 ms each on Metal (Qwen3-8B after a prefix at a chunk of 2^20: 8,229 of them, 85 s). Past it
#: the exact replay answers (memoized per request; ``fits`` then costs a replay, not microseconds).
MAX_LINE_CHUNK = 8 * KEYED_AS_GIVEN


def check_table_chunk(chunk: int) -> None:
    """Refuse (``UnsupportedError``) a per-query-count table past ``MAX_TABLE_CHUNK``: its callers fall back to the
    exact replay's envelope (the Python API and the oMLX facade have no deadline: keyed as given, a chunk of 2^20 ran
    more than 10 minutes)."""
    if chunk > MAX_TABLE_CHUNK:
        raise UnsupportedError(f"the CUDA bounds of a chunk of {chunk:,} tokens are not built (they bisect every query "
                               f"count up to the chunk: more than {MAX_TABLE_CHUNK:,} costs tens of seconds to hours); "
                               f"use a chunk of at most {MAX_TABLE_CHUNK:,} tokens for bounds monotone within a chunk")


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
