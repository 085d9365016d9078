"""Both bounds of a prompt of at most a chunk and a token, without a cached prefix: ``q + 1`` tokens, one call
of ``q <= chunk`` queries on fresh caches, then the last token.

Such a prompt's total ``T(q)`` is the larger of that call's and the last token's, and it does not depend on
the chunk size (CPU and Metal: the executor window is one for every call). ``peak.fast``'s grid
(``FastPeak._fresh_grid``) holds its exact value at every 256-row step's first and last count and on both
sides of every threshold; between two such grid points the item structure and the caches' capacity are
one, so every executor-window position's bytes are convex in ``q`` (activations linear; scores, masks
``q * q``; the last token's rows linear) and so is ``T``, up to the items' rounding (``slack`` per point).
This module takes ``T`` exactly at more points inside each grid interval (``GAP`` apart, halved where the
band is still wider than ``BAND``: up to every count where the attention is unfused and wide) and between
two of them:

* above: the chord (plus the slack);
* below: the tangent from a neighbouring point with the slope of the secant to its own neighbour, both in
  the same interval (from the left: never steeper than ``T`` there; from the right: never less steep),
  minus twice the slack.

Points are exact replays of short prompts (2-50 ms each), taken when a request first needs their segment,
or all at once by ``prepare`` (an engine's start-up); every answer is the same whatever was asked before.
"""
from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable

from .fast_pieces import GAP, halved, too_wide

DEPTH = 5  # a segment is halved (``fast_pieces.halved``) at most this many times (32 -> 1: every count a point)


class ShortCalls:
    """``T(q)`` bounds for ``q`` in ``1 .. grid[-1]`` (``grid``: sorted points with a convex ``T`` between two
    neighbours, ``peak.fast``'s fresh grid); ``exact(q)``: ``T(q)``, the exact total of a ``q + 1``-token
    prompt. Coarse points ``GAP`` apart in each grid interval (and its midpoint); a coarse segment is refined
    on its first use, by its own numbers and its neighbours' coarse points only."""

    def __init__(self, grid: list[int], exact: Callable[[int], int], slack: int):
        self.exact = exact
        self.slack = slack
        self.ends = set(grid)  # an interval's end: no tangent across it
        pts = set(grid)
        for a, b in zip(grid, grid[1:]):
            if b - a > 1:
                pts.update(range(a, b, GAP))
                pts.add((a + b) // 2)
        self.coarse = sorted(pts)
        self._vals: dict[int, int] = {}
        self._seg: dict[int, list[int]] = {}

    def prepare(self) -> None:
        for j in range(len(self.coarse) - 1):
            self._segment(j)

    def bounds(self, q: int) -> tuple[int | None, int]:
        """(lower or ``None``, upper) of ``T(q)``, ``1 <= q <= grid[-1]``."""
        j = bisect_right(self.coarse, q) - 1
        if self.coarse[j] == q:
            v = self._val(q)
            return v, v
        return self._eval(j, self._segment(j), q)

    # -- internals ----------------------------------------------------------------------------------
    def _val(self, q: int) -> int:
        v = self._vals.get(q)
        if v is None:
            v = self._vals[q] = self.exact(q)
        return v

    def _segment(self, j: int) -> list[int]:
        pts = self._seg.get(j)
        if pts is not None:
            return pts
        pts = halved([self.coarse[j], self.coarse[j + 1]], lambda ps, r: too_wide(*self._eval(j, ps, r)), DEPTH)
        self._seg[j] = pts
        return pts

    def _eval(self, j: int, pts: list[int], r: int) -> tuple[int | None, int]:
        i = bisect_right(pts, r) - 1
        a = pts[i]
        fa = self._val(a)
        if a == r:
            return fa, fa
        b = pts[i + 1]
        fb = self._val(b)
        sl = self.slack
        up = fa + -(-(fb - fa) * (r - a) // (b - a)) + sl
        lo = None
        # the neighbours in the same grid interval: this segment's points, else the next coarse point
        z = pts[i - 1] if i else (self.coarse[j - 1] if a not in self.ends else None)
        if z is not None:  # the tangent at a, from the left neighbour's secant
            s = (fa - self._val(z) - 2 * sl) / (a - z)
            lo = int(fa - 2 * sl + s * (r - a)) - 1
        d = pts[i + 2] if i + 2 < len(pts) else (self.coarse[j + 2] if b not in self.ends else None)
        if d is not None:  # the tangent at b, from the right neighbour's secant
            s = (self._val(d) - fb + 2 * sl) / (d - b)
            v = int(fb - 2 * sl - s * (b - r)) - 1
            if lo is None or v > lo:
                lo = v
        return lo, up
