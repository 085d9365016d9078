"""How many rows (cached tokens, along the sequence axis) each mlx-lm 0.32 cache class allocates.

These are the growth rules of ``mlx_lm/models/cache.py``, replayed on integers:

* ``KVCache`` (step 256): when a call of ``S`` tokens does not fit, it allocates
  ``256 * ceil(S / 256)`` more rows; if the current offset is not a multiple of 256 the buffer is first
  sliced to the offset. So one call of N gives ``256*ceil(N/256)``, and so does ``generate_step`` when
  the prefill step is a multiple of 256 - but chunks of 300, 300, 99, 1 give 812 rows, not 768.
* ``RotatingKVCache(W, keep)``: a multi-token call concatenates (the first call keeps all ``S`` rows,
  unbounded; later calls keep ``W - 1`` old rows plus the ``S`` new ones); a one-token call grows the
  buffer by ``min(256, W - offset)`` until it reaches ``W`` and then rotates in place.
* ``ChunkedKVCache(C)`` (llama4): before every forward the front is trimmed to the last ``C`` tokens
  (``nbytes`` counts that view), then it grows like ``KVCache``.

Schedules: ``generate`` is ``mlx_lm.generate.generate_step`` (``N - 1`` tokens in chunks of the prefill
step, then the last token alone); ``direct`` is one ``model(prompt)`` call.
"""
from __future__ import annotations

from itertools import groupby

STEP = 256
SCHEDULES = ("generate", "direct")


MAX_CALLS = 1_000_000  # a replay longer than this is a typo (chunk 1 for a billion tokens), not a request


def calls_for(tokens: int, schedule: str, chunk: int) -> list[int]:
    """Sizes of the successive model calls that feed ``tokens`` prompt tokens into the cache."""
    if tokens <= 0:
        return []
    if schedule != "direct" and (tokens - 1) // chunk > MAX_CALLS:
        from ..errors import InputError

        raise InputError(
            f"{tokens} tokens in chunks of {chunk} is {(tokens - 1) // chunk} prefill calls; "
            f"at most {MAX_CALLS} are replayed: use a larger chunk"
        )
    if schedule == "direct":
        return [tokens]
    return [s for s, k in call_runs(tokens, chunk) for _ in range(k)]


def call_runs(tokens: int, chunk: int) -> tuple[tuple[int, int], ...]:
    """The ``generate`` schedule's calls for ``tokens`` (full chunks, the rest, then the last token) as
    ``(size, count)`` runs of equal sizes, without a list: the one home of that rule (``calls_for`` expands it; a
    prefix is stepped run by run, so 2^30 cached tokens fed one at a time are one run)."""
    if tokens <= 0:
        return ()
    head = tokens - 1
    out: list[list[int]] = []
    for s, k in ((chunk, head // chunk), (head % chunk, 1), (1, 1)):
        if s and k:
            if out and out[-1][0] == s:
                out[-1][1] += k
            else:
                out.append([s, k])
    return tuple((s, k) for s, k in out)


def _ceil_step(n: int) -> int:
    return -(-n // STEP) * STEP


def runs(calls: list[int]) -> list[tuple[int, int]]:
    """``calls`` as ``(size, count)`` runs: a prompt is ``[chunk] * k + [rest, 1]``, so a handful of runs
    stand for up to a million calls (a small prefill step under a long cached prefix)."""
    return [(s, len(list(g))) for s, g in groupby(calls)]


def kv_call(cap: int, off: int, s: int) -> tuple[int, int, int]:
    """``(capacity, offset, rows allocated)`` of a ``KVCache`` after one call of ``s`` tokens: the one home of
    its growth rule (``KVCache.update_and_fetch``), which ``kv_advance``, ``ChunkedState`` and the peak's
    per-call replay (``peak.replay.EntryState``) all call. A call that does not fit first slices the buffer
    to the offset (when the offset is not a multiple of 256), then concatenates ``256 * ceil(s / 256)`` new
    rows (the rows allocated, 0 when the call fits)."""
    if cap == 0 or off + s > cap:
        if cap and off % STEP:
            cap = off
        grow = _ceil_step(s)
        return cap + grow, off + s, grow
    return cap, off + s, 0


def kv_advance(cap: int, off: int, s: int, k: int) -> tuple[int, int]:
    """``(capacity, offset)`` of a ``KVCache`` after ``k`` calls of ``s`` tokens: the calls that fit in the
    capacity are skipped in one step, only the growing ones are replayed (``kv_call``)."""
    while k > 0:
        if cap == 0 or off + s > cap:
            cap, off, _ = kv_call(cap, off, s)
            k -= 1
            continue
        m = min(k, (cap - off) // s)
        off += m * s
        k -= m
    return cap, off


def kv_capacity(calls: list[int]) -> int:
    """Rows of a ``KVCache`` after the calls (``keys.shape[2]``)."""
    cap = off = 0
    for s, k in runs(calls):
        cap, off = kv_advance(cap, off, s, k)
    return cap


def kv_capacity_fast(tokens: int, schedule: str, chunk: int) -> int:
    """``kv_capacity(calls_for(...))`` without building the list when the answer is closed-form."""
    if tokens <= 0:
        return 0
    if schedule == "direct" or chunk % STEP == 0:
        return _ceil_step(tokens)
    return kv_capacity(calls_for(tokens, schedule, chunk))


class RotatingState:
    """Integer replay of ``RotatingKVCache``: rows (buffer length), write index, offset."""

    __slots__ = ("window", "keep", "rows", "idx", "offset")

    def __init__(self, window: int, keep: int = 0):
        self.window, self.keep = window, keep
        self.rows = self.idx = self.offset = 0

    def kept_rows(self) -> int:
        """Rows of the buffer a multi-token call keeps in temporal order before trimming to ``window - 1``
        (``_temporal_order``: the whole buffer once it has wrapped, else up to the write index)."""
        return self.rows if (self.idx == self.rows or self.idx < self.offset) else self.idx

    def rows_during(self, s: int) -> int:
        """Rows the buffer holds right after a multi-token call of ``s`` is concatenated."""
        if self.rows == 0:
            return s
        return min(self.kept_rows(), self.window - 1) + s

    def call(self, s: int) -> None:
        if s > 1:
            self.rows = self.rows_during(s)
            self.offset += s
            self.idx = self.rows
            return
        # one-token in-place update
        w = self.window
        if self.rows == 0 or (self.offset >= self.rows and self.rows < w):
            self.rows += min(STEP, w - self.offset)
            self.idx = self.offset
        if self.rows > w:
            self.rows = w
            self.idx = w
        if self.idx == w:
            self.idx = self.keep
        self.idx += 1
        self.offset += 1

    def advance(self, s: int, k: int) -> None:
        """``k`` calls of ``s`` tokens. Once the buffer is full its state repeats (multi-token calls: the
        same rows every call; one-token calls: the write index cycles over ``keep+1 .. window``), so the
        rest of the run is one step (exact: the same states as calling ``call`` k times)."""
        w = self.window
        while k > 0:
            if s > 1 and self.rows and self.idx == self.rows and self.rows_during(s) == self.rows:
                self.offset += s * k
                return
            if s == 1 and self.rows == w and self.offset >= w and self.keep < self.idx <= w:
                period = w - self.keep
                self.idx = self.keep + 1 + (self.idx - self.keep - 1 + k) % period
                self.offset += k
                return
            self.call(s)
            k -= 1


def rotating_rows(calls: list[int], window: int, keep: int = 0) -> int:
    st = RotatingState(window, keep)
    for s, k in runs(calls):
        st.advance(s, k)
    return st.rows


class ChunkedState:
    """Integer replay of llama4's ``ChunkedKVCache``: rows of the (possibly trimmed view of the) buffer."""

    __slots__ = ("chunk", "rows", "offset", "start")

    def __init__(self, chunk: int):
        self.chunk = chunk
        self.rows = self.offset = self.start = 0

    def trim_front(self) -> None:
        valid = self.offset - self.start
        if self.rows and valid > self.chunk:
            trim = valid - self.chunk
            self.start += trim
            self.rows = valid - trim

    def call(self, s: int) -> None:
        self.trim_front()
        self.rows, _, _ = kv_call(self.rows, self.offset - self.start, s)  # then it grows like a KVCache
        self.offset += s


def chunked_rows(calls: list[int], chunk: int) -> int:
    st = ChunkedState(chunk)
    for s in calls:
        st.call(s)
    return st.rows
