"""The per-call replay of every cache of a prompt, as the peak model needs it: for each call and each
cache entry, rows before and after, rows a growing buffer copies, keys the call attends to (``EntryStep``).

Follows the same mlx-lm rules as ``omlx_profiles.kv.replay`` (KVCache's 256-row steps, RotatingKVCache's
trim, ChunkedKVCache's front trim), which it uses for the sliding and chunked states.
"""
from __future__ import annotations

from ..kv.replay import STEP, ChunkedState, RotatingState, calls_for
from ..registry.profile import CacheEntry
from .ops.items import EntryStep


class EntryState:
    """One cache entry replayed call by call: its capacity, offset and (sliding / chunked) state."""

    __slots__ = ("e", "cap", "off", "rot", "chk")

    def __init__(self, e: CacheEntry):
        self.e = e
        self.cap = 0
        self.off = 0
        self.rot = RotatingState(e.window, e.keep) if e.kind == "sliding" else None
        self.chk = ChunkedState(e.chunk) if e.kind == "chunked" else None

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
                    keep_rows = st.rows if (st.idx == st.rows or st.idx < st.offset) else st.idx
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
        if self.cap == 0 or self.off + s > self.cap:
            if self.cap and self.off % STEP:
                self.cap = self.off
            grow = -(-s // STEP) * STEP
            self.cap += grow
            zero = grow if old else 0
        else:
            zero = 0
        self.off += s
        return EntryStep(e.kind, old, self.cap, self.off, zero_rows=zero)


def entry_bytes(e: CacheEntry, rows: int, act: int, started: bool) -> int:
    if e.kind == "none":
        return 0
    if e.kind == "state":
        return e.state_bytes(act) if started else 0
    return rows * e.row_elements * act


def calls_of(request) -> tuple[list[int], list[int]]:
    """The calls that filled the prefix cache, and the prompt's own calls (query lengths, in order)."""
    prefix_calls = calls_for(request.cached, "generate", request.chunk) if request.cached else []
    calls = calls_for(request.new_tokens, request.schedule, request.chunk)
    if request.cached and request.schedule == "generate" and request.new_tokens == 1:
        calls = [1]
    return prefix_calls, calls


def fill_prefix(states: dict, prefix_calls: list[int]) -> int:
    """Step every cache through the calls that filled the prefix; returns the tokens they hold."""
    for s in prefix_calls:
        for sts in states.values():
            for st in sts:
                st.step(s)
    return sum(prefix_calls)
