"""Both bounds of a prompt's shorter call when its size is in the chunk's last 256-row step (no cached prefix).

``peak.fast`` charges a shorter call of ``r`` queries as its bucket's top (``CallModel.q_tops``): up to 255
queries too many in the chunk's last step, where the shorter call holds a chunk's rows more than the last
full call and is often the prompt's highest. ``Estimator.fits`` needs both bounds there within a few hundred
KB of the exact total, so this module bounds that call at points of the query count (a coarse grid ``GAP``
apart, both sides of every query-count threshold) and between them:

* where the item structure is one over a run of points, every executor-window position's bytes are convex
  in the query count (activations linear; scores, masks and cache copies ``q * (offset + q)``), so is their
  maximum: the call lies under the chord of the points' upper bounds, and above the tangents drawn from a
  point's lower bound with the slope of the secant to its neighbour's upper bound (from the left: never
  steeper than the function there; from the right: never less steep);
* a coarse segment whose band (at a few offsets) is still wider than ``BAND`` is halved, up to ``DEPTH``
  times; by the segment's own numbers only, so every answer is the same whatever was asked before.

Points are built when a request first needs their segment (``prepare`` builds them all: an engine's start-up).
The caches' rows are the history's own: every such call grows every ``KVCache`` (``CallModel.grows``).
"""
from __future__ import annotations

from bisect import bisect_right

from ..kv.replay import STEP
from .fast_lines import CallModel
from .fast_pieces import Pieces

from .fast_pieces import GAP, halved, too_wide

DEPTH = 3  # a coarse segment is halved (``fast_pieces.halved``, judged at three offsets) at most this many times


class TopStep:
    """The shorter call's bounds for sizes ``lo .. hi`` (default: the chunk's last step, ``applies``), per offset.
    Over several 256-row steps (``lo`` 1: ``FastPeak.bounds``'s shorter calls below the last step, where a
    wide unfused attention leaves a bucket's bound GBs high) the rows a call adds jump at every step
    (``256 * ceil(q / 256)``): each step's first and last count are points, and no tangent crosses a step."""

    def __init__(self, m: CallModel, S: int, full: Pieces, lo: int | None = None, hi: int | None = None,
                 known: str | None = None, lines=None):
        self.m, self.S, self.full, self.known = m, S, full, known
        self.lines = lines  # q -> (upper, lower) Pieces of a call of q queries in a layout the caller knows
        self.lo = lo = STEP * ((S - 1) // STEP) + 1 if lo is None else lo
        self.hi = hi = S - 1 if hi is None else hi
        pts = {lo, lo + 1, hi} | set(range(lo, hi, GAP))
        j = STEP * (lo // STEP + 1)
        while j < hi:  # a step's last count and the next one's first
            pts.update((j, j + 1))
            j += STEP
        for t in m.changes:  # a threshold: its last count and the next one's first are both points
            if lo <= t < hi:
                pts.update((t, t + 1))
        self.coarse = sorted(x for x in pts if lo <= x <= hi)
        self._pts: dict[int, tuple[Pieces, Pieces, tuple]] = {}
        self._seg: dict[int, list[int]] = {}
        self._layouts: dict[tuple, int] = {}
        self._kv = sorted(m.kv_thresholds())  # a route that changes with the key count: no chord across it

    @staticmethod
    def applies(m: CallModel, S: int) -> bool:
        lo = STEP * ((S - 1) // STEP) + 1
        return lo > STEP and m.grows(lo, S)

    def prepare(self) -> None:
        for j in range(len(self.coarse) - 1):
            self._segment(j)

    def bounds(self, r: int, off: int) -> tuple[int | None, int]:
        """(lower or ``None``, upper) of ``held + added + peak`` of the call of ``r`` queries at ``off``."""
        j = bisect_right(self.coarse, r) - 1
        if self.coarse[j] == r:
            up, low, _ = self._point(r)
            return low.at(off), up.at(off)
        return self._eval(j, self._segment(j), r, off)

    # -- internals ----------------------------------------------------------------------------------
    def _point(self, q: int) -> tuple[Pieces, Pieces, tuple]:
        p = self._pts.get(q)
        if p is None:
            m, S = self.m, self.S
            # the item structure as a small int (equal structures, equal ids): compared on every request
            lay = self._layouts.setdefault(m._layout(q, S), len(self._layouts))
            up, low = self.lines(q) if self.lines else (
                m.pieces(q, S, "upper", q_min=q, known=self.known, both=False)[0], m.pieces(q, S, "lower", both=False)[0])
            p = self._pts[q] = (up, low, lay)
        return p

    def _segment(self, j: int) -> list[int]:
        pts = self._seg.get(j)
        if pts is not None:
            return pts
        pts = [self.coarse[j], self.coarse[j + 1]]
        if self._point(pts[0])[2] == self._point(pts[1])[2]:
            S = self.S
            pts = halved(pts, lambda ps, r: any(too_wide(*self._eval(j, ps, r, off)) for off in (S, 16 * S, 64 * S)),
                         DEPTH)
        for q in pts:  # the last halving's points too: a prepared step builds nothing on a request
            self._point(q)
        self._seg[j] = pts
        return pts

    def _eval(self, j: int, pts: list[int], r: int, off: int) -> tuple[int | None, int]:
        i = bisect_right(pts, r) - 1
        a = pts[i]
        ua_p, la_p, lay = self._point(a)
        if a == r:
            return la_p.at(off), ua_p.at(off)
        b = pts[i + 1]
        ub_p, lb_p, lay_b = self._point(b)
        if lay_b != lay or (self._kv and any(off + a < t <= off + b for t in self._kv)):
            return None, self.full.at(off)  # the structure (or a route) changes between the points: no bound from them
        ua, ub = ua_p.at(off), ub_p.at(off)
        up = ua + -(-(ub - ua) * (r - a) // (b - a))
        lo = la = la_p.at(off)
        z = pts[i - 1] if i else (self.coarse[j - 1] if j else None)
        step = (r - 1) // STEP  # the tangents' points in the call's own 256-row step
        if z is not None and (z - 1) // STEP == step and self._point(z)[2] == lay:
            s = (la - self._point(z)[0].at(off)) / (a - z)
            if s > 0:
                lo = la + int(s * (r - a))
        d = pts[i + 2] if i + 2 < len(pts) else (self.coarse[j + 2] if j + 2 < len(self.coarse) else None)
        if d is not None and (d - 1) // STEP == step and self._point(d)[2] == lay:
            lb = lb_p.at(off)
            s = (self._point(d)[0].at(off) - lb) / (d - b)
            v = lb - int(s * (b - r)) - 1
            if v > lo:
                lo = v
        return lo, up
