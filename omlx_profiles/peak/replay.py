"""The per-call replay of every cache of a prompt, as the peak model needs it: for each call and each
cache entry, rows before and after, rows a growing buffer copies, keys the call attends to (``EntryStep``).

The cache classes' growth rules have one home, ``omlx_profiles.kv.replay`` (``kv_call`` / ``kv_advance`` for
KVCache's 256-row steps, ``RotatingState``, ``ChunkedState``), which the resident-KV report (``kv.bytes``)
replays too; this module only records, per call, what the peak model reads from them (``EntryStep``).
"""
from __future__ import annotations

from ..kv.replay import ChunkedState, RotatingState, call_runs, calls_for, kv_advance, kv_call
from ..kv.work import charge
from ..registry.profile import CacheEntry
from .ops.items import EntryStep


# The caches a KV width other than the activations' (``kv_scale``: the oMLX facade's MLA / DSA per-token bytes,
# a cache stored wider) applies to: the full-attention ones. Sliding windows and recurrent state stay at the
# activation width.
KV_SCALED_KINDS = frozenset({"full", "latent", "indexer"})


def scale_up(nbytes: int, kv_scale: float) -> int:
    """``nbytes`` at ``kv_scale`` of its width, rounded up (never below the scaled bytes)."""
    if kv_scale == 1.0:
        return nbytes
    v = nbytes * kv_scale
    i = int(v)
    return i if i == v else i + 1


def kv_split(profile, rep) -> tuple[int, int]:
    """A ``kv_report``'s bytes as (the caches ``kv_scale`` applies to, every other cache)."""
    kv = other = 0
    for lb in rep.layers:
        for e, x in zip(profile.layer_types[lb.kind].entries, lb.entries):
            if e.kind in KV_SCALED_KINDS:
                kv += x.nbytes
            else:
                other += x.nbytes
    return kv, other


def scaled_total(profile, rep, kv_scale: float) -> int:
    """A ``kv_report`` total with the full-attention caches at ``kv_scale`` of their width (rounded up
    once, as ``prefill_peak`` rounds its held bytes)."""
    kv, other = kv_split(profile, rep)
    return other + scale_up(kv, kv_scale)


class EntryState:
    """One cache entry replayed call by call: its capacity, offset and (sliding / chunked) state."""

    __slots__ = ("e", "cap", "off", "rot", "chk")

    def __init__(self, e: CacheEntry):
        self.e = e
        self.cap = 0
        self.off = 0
        self.rot = RotatingState(e.window, e.keep) if e.kind == "sliding" else None
        self.chk = ChunkedState(e.chunk) if e.kind == "chunked" else None

    def advance(self, s: int, k: int) -> None:
        """``k`` calls of ``s`` tokens whose steps nobody reads (a prefix): the same state as ``step`` k
        times, in far fewer steps."""
        e = self.e
        if e.kind == "none" or k <= 0:
            return
        if e.kind == "state":
            self.off += s * k
        elif e.kind == "sliding":
            self.rot.advance(s, k)
        elif e.kind == "chunked":
            for _ in range(k):
                self.step(s)
        else:
            self.cap, self.off = kv_advance(self.cap, self.off, s, k)

    def rows(self) -> int:
        if self.rot is not None:
            return self.rot.rows
        if self.chk is not None:
            return self.chk.rows
        return self.cap

    def step(self, s: int) -> EntryStep:
        e = self.e
        if e.kind == "none":
            return EntryStep("none", 0, 0, 0)
        if e.kind == "state":
            had = self.off > 0
            self.off += s
            return EntryStep("state", 1 if had else 0, 1, 0)
        if e.kind == "sliding":
            st = self.rot
            old = st.rows
            if s > 1:
                trim = 0
                if old:
                    keep_rows = st.kept_rows()
                    trim = min(keep_rows, e.window - 1) if keep_rows > e.window - 1 else 0
                st.call(s)
                return EntryStep("sliding", old, st.rows, st.rows, trim_rows=trim)
            st.call(s)
            grown = st.rows - old if st.rows > old else 0
            return EntryStep("sliding", old, st.rows, min(st.offset, st.rows), zero_rows=grown)
        if e.kind == "chunked":
            st = self.chk
            st.trim_front()
            old = st.rows
            prev = st.offset - st.start
            st.call(s)
            grew = st.rows != old
            return EntryStep("chunked", old, st.rows, prev + s, zero_rows=(st.rows - prev) if grew and old else 0)
        # full / latent / indexer: KVCache (step 256)
        old = self.cap
        self.cap, self.off, grow = kv_call(self.cap, self.off, s)
        return EntryStep(e.kind, old, self.cap, self.off, zero_rows=grow if old else 0)


def entry_bytes(e: CacheEntry, rows: int, act: int, started: bool) -> int:
    if e.kind == "none":
        return 0
    if e.kind == "state":
        return e.state_bytes(act) if started else 0
    return rows * e.row_elements * act


def calls_of(request) -> tuple[tuple[tuple[int, int], ...], list[int]]:
    """The calls that filled the prefix cache as ``(size, count)`` runs (``kv.replay.call_runs``), and the prompt's own
    calls (query lengths, in order)."""
    prefix_calls = call_runs(request.cached, request.chunk)
    calls = calls_for(request.new_tokens, request.schedule, request.chunk)
    if request.cached and request.schedule == "generate" and request.new_tokens == 1:
        calls = [1]
    charge(len(calls), request.chunk)  # the prompt's own calls are what a replay costs (kv/work.py)
    return prefix_calls, calls


def fill_prefix(states: dict, prefix: tuple[tuple[int, int], ...]) -> int:
    """Step every cache through the calls that filled the prefix (``(size, count)`` runs, ``kv.replay.call_runs``);
    returns the tokens they hold. Runs of equal calls are fast-forwarded (``EntryState.advance``): a
    million-token prefix fed one token at a time costs a few thousand steps, not a million."""
    for s, k in prefix:
        for sts in states.values():
            for st in sts:
                st.advance(s, k)
    return sum(s * k for s, k in prefix)
