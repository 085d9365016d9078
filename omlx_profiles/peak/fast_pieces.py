"""The pieces a call's bound is made of: a piecewise-linear function of the call's offset (``Pieces``: sorted
piece starts, one upper envelope of lines per piece), its sum, hull and monotone cover, and the worst rows a
growing ``KVCache`` can hold past an offset (``reach``, ``cycle_reach``).

Split out of ``peak.fast_lines`` (which builds these pieces for one call) so the arithmetic on them has one
home; ``peak.fast_lines`` re-exports every name.
"""
from __future__ import annotations

from bisect import bisect_right
from functools import lru_cache

from ..kv.replay import STEP, kv_advance

GROWING = ("full", "latent", "indexer")  # KVCache: capacity in 256-row steps
FAR = 1 << 16  # the second sample of an unbounded piece: this many tokens past its start
INF = float("inf")


def last_same(sig, lo: int, hi: int) -> int:
    """The last query count in ``[lo, hi)`` whose structure ``sig`` equals ``sig(lo)``, given ``sig(hi)`` differs: a
    bisection over the structure alone (cheaper than a bound), assuming one change point between the two ends.
    Shared by the lines (``peak.fast_lines``), the CUDA buckets (``peak.fast_cuda``) and the CUDA prefix table."""
    base = sig(lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if sig(mid) == base:
            lo = mid
        else:
            hi = mid
    return lo


#: The point-sampled bounds (``peak.fast_short``, ``peak.fast_top``): coarse points this many query counts apart,
GAP = 32
#: a segment halved while its bounds are more than this apart, or half of ``Estimator.fits``'s margin where that is
#: more (1/65,536 of the total: a DeepSeek-V3's unfused 128-head scores need 4- to 8-query gaps at long prompts).
BAND = 32 << 10


def too_wide(lo: int | None, up: int) -> bool:
    """The bounds of a point between two samples are too far apart for ``Estimator.fits`` (``BAND``)."""
    return lo is None or up - lo > max(BAND, up >> 17)


def halved(pts: list[int], wide, depth: int) -> list[int]:
    """``pts`` (sorted query counts) with the midpoint of every gap added where ``wide(pts, mid)`` says the bounds
    there are too far apart, pass after pass, at most ``depth`` passes (each pass judged on the points before it:
    the answer does not depend on what was asked before). One rule for ``fast_short`` and ``fast_top``."""
    for _ in range(depth):
        more = [r for x, y in zip(pts, pts[1:]) if y - x >= 2 and wide(pts, r := (x + y) // 2)]
        if not more:
            break
        pts = sorted(set(pts) | set(more))
    return pts


class Pieces:
    """A piecewise-linear function of the offset: ``starts[i]`` opens piece ``i``, whose value is the
    maximum of its lines ``a + b * off`` (floats; the answer is rounded up). Non-decreasing in ``off`` by
    construction (``_monotone``)."""

    __slots__ = ("starts", "lines")

    def __init__(self, starts: list[int], lines: list[tuple[tuple[float, float], ...]]):
        self.starts = starts
        self.lines = lines

    def at(self, off: int) -> int:
        i = bisect_right(self.starts, off) - 1
        lines = self.lines[i if i > 0 else 0]
        a, b = lines[0]
        best = a + b * off
        for a, b in lines[1:]:
            v = a + b * off
            if v > best:
                best = v
        i = int(best)
        return i if i >= best else i + 1

    def merged(self, other: "Pieces") -> "Pieces":
        """The maximum of two piecewise functions (on the union of their breakpoints)."""
        starts = sorted(set(self.starts) | set(other.starts))
        out = []
        for k, s in enumerate(starts):
            hi = starts[k + 1] - 1 if k + 1 < len(starts) else INF
            ls = self.lines[max(0, bisect_right(self.starts, s) - 1)] + other.lines[max(0, bisect_right(other.starts, s) - 1)]
            out.append(_hull(ls, s, hi))
        return _monotone(Pieces(starts, out))


def _hull(lines, lo: int, hi: int) -> tuple[tuple[float, float], ...]:
    """The lines that are the maximum somewhere on [lo, hi] (upper envelope), highest at ``lo`` first."""
    best: dict[float, float] = {}
    for a, b in lines:
        if a > best.get(b, float("-inf")):
            best[b] = a
    hull: list[tuple[float, float]] = []  # (b, a) by increasing slope: the upper envelope over all x
    for b, a in sorted(best.items()):
        while len(hull) >= 2:
            (b1, a1), (b2, a2) = hull[-2], hull[-1]
            # hull[-1] is never the maximum if the new line overtakes hull[-2] no later than hull[-1] does
            if (a1 - a) * (b2 - b1) <= (a1 - a2) * (b - b1):
                hull.pop()
            else:
                break
        hull.append((b, a))
    keep = []
    for i, (b, a) in enumerate(hull):
        x_from = (hull[i - 1][1] - a) / (b - hull[i - 1][0]) if i else float("-inf")
        x_to = (a - hull[i + 1][1]) / (hull[i + 1][0] - b) if i + 1 < len(hull) else float("inf")
        if x_to >= lo and x_from <= hi:
            keep.append((a, b))
    keep.sort(key=lambda ab: -(ab[0] + ab[1] * lo))
    return tuple(keep)


def _monotone(pc: Pieces) -> Pieces:
    """Never lower than at an earlier offset: a line of negative slope becomes flat at its value where its
    piece opens, and every piece also carries the previous piece's value at its end."""
    out = []
    carry = None
    for k, s in enumerate(pc.starts):
        lines = [(a + b * s, 0.0) if b < 0 else (a, b) for a, b in pc.lines[k]]
        if carry is not None:
            lines.append((carry, 0.0))
        hi = pc.starts[k + 1] - 1 if k + 1 < len(pc.starts) else INF
        h = _hull(lines, s, hi)
        out.append(h)
        if hi != INF:
            carry = max(a + b * hi for a, b in h)
    return Pieces(list(pc.starts), out)


def reach(S: int) -> int:
    """The most rows a growing cache holds past the offset before a call, in a history of calls of at most
    ``S`` tokens (the prefix's and the prompt's, each ending on one token): a call grows only from fewer
    rows past the offset than it needs, so afterwards fewer than its own step remain (``< 256 * ceil(q /
    256)``). With ``S`` a multiple of 256 a prefix leaves its capacity at ``256 * ceil(cached / 256)``
    (``kv.replay.kv_capacity_fast``), the chunk calls keep it there or trim to the offset, and the shorter
    call leaves at most 255: never more than 255."""
    if S % STEP == 0:
        return STEP - 1
    return max(-(-S // STEP) * STEP, STEP) - 1


@lru_cache(maxsize=256)
def cycle_reach(S: int) -> int:
    """The most rows a growing cache holds past the offset before any call of a prompt fed in chunks of
    ``S`` from empty caches (the chunk calls, and the shorter call after them): the capacity phase
    ``(capacity - offset, offset mod 256)`` repeats, so the replay stops at the first repeat."""
    cap = off = 0
    seen: set[tuple[int, int]] = set()
    most = 0
    while True:
        state = (cap - off, off % STEP)
        if state in seen:
            return most
        seen.add(state)
        most = max(most, cap - off)
        cap, off = kv_advance(cap, off, S, 1)
