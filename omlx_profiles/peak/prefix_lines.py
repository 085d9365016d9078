"""After a cached prefix, an upper bound of the total for a model whose fast path answers the exact model only on a
backend without graph commits (a gated-DeltaNet hybrid on CPU / Metal: ``FastPeak._shapeless``; chunked attention
since session 12: llama-4-scout's report fell 3.5% on Metal between 8,189 and 8,196 cached, 100 new tokens in
chunks of 256, where its ChunkedKVCache starts trimming), monotone in the prefix.

Why: the exact total falls with the prefix where the full-attention caches' 256-row copy moves with the alignment
(qwen3.5-35b-a3b on CPU, one new token, chunk 512: 102,144 cached 2,374,701,370 B, 102,145 cached 2,176,563,936 B,
-8.3%; found in session 11), and the envelope of an exact-only model (``peak.envelope.envelope_total`` without
``upper``) is the maximum over the prompt lengths at ONE prefix, so it fell with it. ``FastPeak`` has no lines for
such a model because its buckets would split at nearly every query count (the recurrence's spans change structure
with it); a request needs only three query counts, so this builds the lines of those alone
(``peak.fast_lines.CallModel.pieces`` at ``q_min = q``: one count, one structure), memoized per (chunk, count):

    U(n, c) = max( F_S(c + (k-1) S) if k,  F_r(c + k S) if r,  L_p(c + n - 1) ),   n = k S + 1 + r,
              p = r, or S (r = 0 < k), or 1

``F_q`` the lines of a call of exactly ``q`` queries after any history of calls of at most ``S`` (the prefix's, fed
in chunks of ``S``; after a prefix a prompt shorter than a chunk follows its last token: ``prev_one``), ``L_p`` the
last token's after a call of ``p``: ``Pieces`` are running maxima over the offset and above every call at it
(every capacity phase a history can leave), so ``U(n, c) >= V(n, c)`` and ``U`` is non-decreasing in ``c`` (every
offset moves right). ``envelope_total(..., upper=)`` then reports ``max(E(n, 0), V(n, c), U over P(n))``:
non-decreasing in ``c`` (module doc of ``peak.envelope``).

In ``n`` (session 13): per-count lines are not cumulative over counts, and the exact model itself falls inside a
block (llama-4-scout cut to 4 layers on Metal, 8,100 cached, chunks of 256: 9 new tokens 154,129,232 B, 10 new
138,816,177 B; the per-count ``U`` 297,084,048 -> 287,197,168 B, so the report fell 3.3%). Where a call's item
structure is shared by a bucket of query counts (chunked attention: ``FastPeak`` answers it exactly only because
its rows cycle WITHOUT a prefix), the lines are ``FastPeak``'s own bucketed ones (``FastPeak._build`` after a prefix:
per ``CallModel.q_tops`` bucket the cumulative bound of a call of at most its top, the last token's per bucket of
the call before it, cumulative too), and the shorter call is charged as ``peak.envelope.tight_upper`` charges it:
its own lines at ``r`` (no lower for a larger ``r`` of the same bucket: one structure, every item growing with the
queries) with every lower bucket's cumulative lines, and a full chunk as the whole cumulative set. So

    U(n, c) = max( C_all(c + (k-1) S) if k,  max(C_{i-1}, F_r^i)(c + k S) if r,  L_{<=p}(c + n - 1) )

is non-decreasing in ``n`` within a block (``r`` grows at one offset, the last token moves right after a longer
call) and across blocks (the shorter call of ``S - 1`` at ``c + k S`` is under ``C_all`` there, the first full call
of the next block; the last token after a chunk is the cumulative set's top), as ``tight_upper``'s. A call whose
structure changes with nearly every query count (a gated-DeltaNet on CPU: ``FastPeak._shapeless``) keeps the
per-count lines (a bucket per count: ~45 s to build): monotone in ``n`` there is NOT claimed by construction.
"""
from __future__ import annotations

from .fast_lines import CallModel
from .kernels import _TILED_VERSION, tiled_state

_KEEP = 1 << 12  # line sets kept per FastPeak (three per chunk size and shorter-call count)


def applies(fast) -> bool:
    """Whether ``fast`` (``peak.fast.FastPeak``) answers the exact model only on a backend without graph commits: the
    case this module bounds (a gated-DeltaNet on CPU / Metal; chunked attention since session 12, whose caches'
    rows cycle with the offset: ``CallModel._steps`` bounds them after any history)."""
    return fast.exact_only and not fast._unknown and fast.routes.executor.graph_commit is None


def prefix_upper(fast, new: int, chunk: int, cached: int, memo: dict) -> int | None:
    """``U(new, cached)`` (module doc) for chunks of ``chunk``, or ``None`` (no prefix, or ``applies`` is False).
    ``memo``: the caller's line sets (kept across requests)."""
    if cached <= 0 or new <= 0 or not applies(fast):
        return None
    S = chunk
    if not _shapeless(fast, memo):
        return _bucketed(fast, new, S, cached, memo)
    k, r = divmod(new - 1, S)
    one = bool(not k and r)  # a prompt shorter than a chunk: its calls follow the prefix's last token
    v = _lines(fast, memo, S, one, "last", r or (S if k else 1)).at(cached + new - 1)
    if k:
        f = _lines(fast, memo, S, one, "one" if S == 1 else "upper", S).at(cached + S * (k - 1))
        if f > v:
            v = f
    if r:
        f = _lines(fast, memo, S, one, "one" if r == 1 else "upper", r).at(cached + S * k)
        if f > v:
            v = f
    return v


def _lines(fast, memo: dict, S: int, one: bool, mode: str, q: int):
    # keyed by the FastPeak too: one memo serves every backend / dtype of an ``Estimator`` (until session 12 it did
    # not, and a model asked on cpu first was answered on metal from the cpu lines)
    key = (fast, S, one, mode, q, _TILED_VERSION[0])  # the object itself (hashed by identity): never a stale id
    t = memo.get(key)
    if t is None:
        mkey = ("model", fast, one, _TILED_VERSION[0])
        m = memo.get(mkey)
        if m is None:
            m = memo[mkey] = CallModel(fast.profile, fast.routes, tiled_state()[1], fast.dtype, fast.nax, fast._worst,
                                       fast.kv_scale, fresh_history=False, prev_one=one)
        if len(memo) >= _KEEP:
            memo.clear()
            memo[mkey] = m
        t = memo[key] = m.pieces(q, S, mode, q_min=q, both=False)[0]
    return t


def _shapeless(fast, memo: dict) -> bool:
    """Whether the call's item structure changes with nearly every query count (``FastPeak._shapeless``; memoized):
    no bucket of counts holds, the per-count lines answer."""
    key = ("shapeless", fast, _TILED_VERSION[0])
    v = memo.get(key)
    if v is None:
        v = memo[key] = fast._shapeless()
    return v


def shorter_call_at(c, i: int, r: int, chunk: int, off: int, memo: dict, key) -> int:
    """The shorter call of ``r`` queries at offset ``off``, from a chunk's bucketed lines ``c`` (``FastPeak``'s
    ``_Chunk``; ``i`` = the bucket holding ``r``, whose top is not ``r``): ``r``'s own lines (``CallModel.pieces``
    over the bucket's layouts from the lower bucket's top + 1, built once per ``key`` in ``memo``) with the lower
    buckets' cumulative lines in the maximum, so the bound is no lower for a larger ``r`` (``envelope.tight_upper``'s
    doc). Shared by ``envelope.tight_upper`` and ``_bucketed`` below."""
    t = memo.get(key)
    if t is None:
        if len(memo) >= 1 << 14:  # every r of a few chunk sizes (``Estimator.prepare(follow_ups=True)``)
            memo.clear()
        q_min = c.tops[i - 1] + 1 if i else 1
        t = memo[key] = c.model.pieces(r, chunk, "upper", q_min=q_min)[0]
    f = t.at(off)
    if i:
        g = c.calls[i - 1].at(off)
        if g > f:
            f = g
    return f


def _bucketed(fast, new: int, S: int, cached: int, memo: dict) -> int:
    """``U(new, cached)`` from ``FastPeak``'s bucketed lines after a prefix (module doc: cumulative over the query
    count, so non-decreasing in ``new`` too)."""
    from bisect import bisect_left

    k, r = divmod(new - 1, S)
    fresh = 2 if (not k and r) else False  # a prompt shorter than a chunk follows the prefix's last token
    key = ("chunk", fast, S, fresh, _TILED_VERSION[0])
    c = memo.get(key)
    if c is None:
        if len(memo) >= _KEEP:
            memo.clear()
        c = memo[key] = fast._build(S, fresh)
    v = c.lasts[bisect_left(c.ltops, r or (S if k else 1))].at(cached + new - 1)  # the last token
    if k:
        f = c.calls[-1].at(cached + S * (k - 1))  # every full call: the whole cumulative set
        if f > v:
            v = f
    if r:
        off = cached + S * k
        i = bisect_left(c.tops, r)
        if c.tops[i] == r:
            f = c.calls[i].at(off)
        else:
            f = shorter_call_at(c, i, r, S, off, memo, ("r", fast, S, fresh, r, _TILED_VERSION[0]))
        if f > v:
            v = f
    return v
