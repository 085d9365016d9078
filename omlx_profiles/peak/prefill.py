"""The prefill peak of a whole prompt, whether a request fits a budget, and the longest prompt that does.

A prompt goes through ``generate_step``'s calls (N-1 tokens in chunks of the prefill step, then the last
token alone; a prefix-cache hit starts from a cache that already holds ``cached`` tokens). For every call
the peak is

    held before the call (cache buffers + conv-state views)     -- exact, replayed with rows.py's rules
  + rows the call adds to every cache (kv_growth)               -- exact, charged for all layers at once
  + what the call's ops allocate while they run (peak/ops, peak/layers) -- term by term, over the executor window

and the prompt's peak is the maximum over calls, minus what was held before the prompt (the prefix),
weights excluded: ``Breakdown.peak_bytes``. ``Breakdown.terms`` splits that number so the parts add up
to it exactly.
"""
from __future__ import annotations

from dataclasses import replace

from ..units import check_dtype
from ..errors import InputError, UnsupportedError
from ..kv.replay import MAX_CALLS
from ..kv.work import GRAPH_CALL_COST, charge
from ..registry.profile import Profile
from ..units import check_flag
from .call import (SMALL_ARRAYS, activation_dtype, call_items, call_peak, growth_bytes, held_bytes, run_ahead_ops,
                   validate_profile)
from .explain import CallPeak, explain
from .kernels import KernelRoutes, tiled_state
from .ops.recurrent import unverified_peak
from .replay import EntryState, calls_of, fill_prefix
from .request import Breakdown, Request, Verdict
__all__ = ["Breakdown", "Request", "SMALL_ARRAYS", "Verdict", "call_items", "prefill_peak", "run_ahead_ops"]

# How many calls of a long prompt are evaluated: among calls that grow no cache the peak is among the last
# ones (the held cache and every kL-dependent term only grow), plus the first (nothing held yet, but the
# longest chunk). A call that grows a cache also copies it (KVCache's concatenate), so the LAST call that grows
# each layer type's caches is evaluated too: with chunks under 256 tokens it can be far from the tail (a
# 2383-token prompt in chunks of 7 grows the full-attention caches every ~37 calls), and skipping it was under
# the truth and made the peak fall as the cached prefix grew (issue 14 item 4).
_TAIL_CALLS = 3


def prefill_peak(profile: Profile, request: Request, *, backend: str = "cpu", mlx_version: str | None = None,
                 dtype: str | None = None, nax: bool = False, routes: KernelRoutes | None = None,
                 all_calls: bool = False, measured: frozenset[str] | None = None,
                 apply_basis: bool = True, kv_scale: float = 1.0) -> Breakdown:
    """The prefill peak of ``request`` on ``backend`` (see the module doc). ``dtype`` overrides the
    profile's activation dtype (an MoE model on MLX's CPU backend runs in fp32). ``all_calls`` evaluates
    every call instead of the first and the last few.

    ``peak_basis`` (peak/basis.py): where the profile's compute traits have no calibration in band on this
    backend, the peak is the larger of the op model and its worst case (``CallContext.bound``: attention
    unfused in fp32, no donation, the whole run-ahead window). ``measured`` replaces the table of measured
    traits (the leave-one-family-out test); ``apply_basis=False`` returns the op model alone (what the
    calibration tests compare with the measured peaks).

    ``kv_scale``: the full-attention caches' stored bytes per activation-width byte (the oMLX facade's MLA
    ``kv_bytes_per_token``, DSA's extra caches, a cache stored wider than the activations); it scales what
    those caches hold and add, not the copies a growing cache makes while it runs (kept at the activation
    width: the safe side)."""
    from .basis import MEASURED, basis_for, no_bound_reason

    if isinstance(kv_scale, bool) or not isinstance(kv_scale, (int, float)) or not (0 < kv_scale < float("inf")):
        raise InputError(f"kv_scale must be a positive finite number, got {kv_scale!r}")
    kv_scale = float(kv_scale)
    check_flag("nax", nax)
    if dtype is not None:
        check_dtype(dtype, "")

    validate_profile(profile)
    kr = routes or KernelRoutes.for_backend(backend, mlx_version)
    why = unverified_peak(profile, kr)
    if why:
        raise UnsupportedError(why)
    b = basis_for(profile, kr, measured, chunk=request.chunk, tokens=request.tokens)
    bd = _prefill_peak(profile, request, kr, dtype, nax, all_calls, kv_scale=kv_scale)
    if b.kind != MEASURED and apply_basis:
        why = no_bound_reason(profile, kr)
        if why:
            raise UnsupportedError(why)
        worst = _prefill_peak(profile, request, kr, dtype, nax, all_calls, worst=b.worst_case, kv_scale=kv_scale)
        if worst.peak_bytes > bd.peak_bytes:
            bd = worst
    return replace(bd, peak_basis=b.kind, basis=b.as_dict(),
                   explanation=bd.explanation + (_basis_line(b),))


def _no_negative_terms(terms: dict[str, int]) -> None:
    """A prefix whose rotating caches hold more than the peak call's (a sliding layer trimmed to its window
    after a 1-token prefix call) makes ``kv_resident`` negative: the peak nets it, and the breakdown charges
    it against the growth and then the largest terms, so every term stays a byte count (found by
    tests/test_properties_peak.py: gpt-oss-20b, cpu, 1 cached + 3 new tokens, chunk 2)."""
    debt = sum(-v for v in terms.values() if v < 0)
    if not debt:
        return
    for k in [k for k, v in terms.items() if v < 0]:
        del terms[k]
    for k in sorted(terms, key=lambda k: (k != "kv_growth", -terms[k])):
        take = min(debt, terms[k])
        terms[k] -= take
        debt -= take
        if not terms[k]:
            del terms[k]
        if not debt:
            break


def _basis_line(b) -> str:
    if b.kind == "measured":
        return ("peak basis: measured (every compute trait has calibration points in band on this backend)"
                + (f"; {b.band}" if b.band else ""))
    from .basis import CONSERVATIVE_CHOICES

    if b.reason:
        return (f"peak basis: {b.kind} ({b.reason}); the larger of the op model and its worst case "
                f"({'; '.join(CONSERVATIVE_CHOICES[b.worst or b.kind])})")
    return (f"peak basis: {b.kind} (no calibration in band on this backend for: {', '.join(sorted(b.unmeasured))}): the "
            f"larger of the op model and its worst case ({'; '.join(CONSERVATIVE_CHOICES[b.worst or b.kind])})")


def _prefill_peak(p: Profile, request: Request, kr: KernelRoutes, dtype: str | None, nax: bool, all_calls: bool, *,
                  worst: str | None = None, kv_scale: float = 1.0) -> Breakdown:
    """The op model's peak (``worst`` None), or its ``derived`` / ``bound`` worst case (peak/basis.py)."""
    dt, act = activation_dtype(p, dtype)
    _, tiled = tiled_state()
    window = kr.executor.window_for(request.chunk)

    # the prompt's own calls are replayed one by one; the prefix's are fast-forwarded in runs (replay.fill_prefix:
    # a million one-token prefix calls are one run), so only the former are limited
    if (request.new_tokens // request.chunk) > MAX_CALLS:
        raise UnsupportedError(f"{request.new_tokens} new tokens in chunks of {request.chunk} is more than "
                               f"{MAX_CALLS} prefill calls; use a larger chunk")
    prefix_calls, calls = calls_of(request)
    if kr.executor.graph_commit is not None:  # each call walks its graph commits: priced as such (kv/work.py)
        charge(len(calls), request.chunk, GRAPH_CALL_COST - 1)
        # one replay's ceiling in the same unit: MAX_CALLS CPU-backend calls of work. The CLI's command budget
        # (500,000 units, charged just above) refuses first; the Python API and the oMLX facade have no budget,
        # and a 2^30-token request on CUDA (524,289 calls of 2048, ~3-6 ms each) ran ~50 min (hostile pass 8)
        if len(calls) * GRAPH_CALL_COST > MAX_CALLS:
            raise UnsupportedError(
                f"{len(calls):,} prefill calls of {request.chunk:,} tokens: on a backend that commits graphs (CUDA) "
                f"a call walks its graphs (~{GRAPH_CALL_COST}x a CPU call), so one replay makes at most "
                f"{MAX_CALLS // GRAPH_CALL_COST:,}; use a larger chunk or fewer tokens")

    types = p.layer_types
    states = {name: [EntryState(e) for e in lt.entries] for name, lt in types.items()}
    counts: dict[str, int] = {}
    for n in p.layer_names:
        counts[n] = counts.get(n, 0) + 1

    def held(q_prev: int) -> tuple[int, int]:
        return held_bytes(p, states, counts, act, q_prev, kv_scale)

    offset = fill_prefix(states, prefix_calls)
    prefix_held, prefix_snap = held(0)  # the last prefix call was 1 token: no conv view left
    held_start = prefix_held

    n_calls = len(calls)
    wanted = set(range(n_calls)) if all_calls or n_calls <= _TAIL_CALLS + 1 else \
        {0, *range(n_calls - _TAIL_CALLS, n_calls)}
    known: list[int] | None = None  # the full calls' exact totals (CUDA's table), where looked up
    if kr.executor.graph_commit is not None and len(wanted) < n_calls and request.schedule == "generate":
        # CUDA: a full call's total is not monotone in its offset (graph commits move), so the highest full call
        # joins the evaluated ones, from the per-chunk table of every full call (``fast_cuda.full_call_totals``)
        k = 0
        while k < n_calls - 1 and calls[k] == request.chunk:
            k += 1
        if k > 1:
            from .fast_cuda import full_call_totals

            F = full_call_totals(p, kr, request.chunk, dtype, nax, kv_scale, worst, prefix_calls, k)
            top = max(F[:k])
            wanted.add(F.index(top))
            known = F[:k]
    best: CallPeak | None = None
    q_prev = 0
    last_growing: dict[str, tuple] = {}  # layer type -> the latest call that grew one of its caches (not evaluated)
    # CUDA: a full call's total is in the table already (``known``); its breakdown is only needed if it is the
    # highest, so it is evaluated last, once (a call's graph windows are walked once per prompt, not once per
    # candidate: 4-5 candidates a prompt, ~35 ms each for a gated-DeltaNet at chunk 2048). Candidates keep their
    # order (the first of equal totals wins, as before).
    order: list[tuple[int, tuple]] = []  # (total or -1, args) in evaluation order

    def peak_of(ci, s, offset, steps, kv_before, snap_before):
        growth = growth_bytes(states, steps, counts, act, kv_scale)
        return call_peak(p, ci, s, offset, steps, kr, tiled, dt, act, nax, window, last=(ci == n_calls - 1),
                         kv_before=kv_before, snap_before=snap_before, growth=growth,
                         direct=request.schedule == "direct", worst=worst)

    def evaluate(ci, s, offset, steps, kv_before, snap_before):
        nonlocal best
        args = (ci, s, offset, steps, kv_before, snap_before)
        if known is not None and ci < len(known):
            order.append((known[ci], args))
            return
        cp = peak_of(*args)
        order.append((cp.total, cp))
        if best is None or cp.total > best.total:
            best = cp

    for ci, s in enumerate(calls):
        kv_before, snap_before = held(q_prev)
        steps = {name: tuple(st.step(s) for st in sts) for name, sts in states.items()}
        if ci in wanted:
            evaluate(ci, s, offset, steps, kv_before, snap_before)
        else:
            for name, stps in steps.items():
                if any(stp.new_rows != stp.old_rows or stp.zero_rows or stp.trim_rows for stp in stps):
                    last_growing[name] = (ci, s, offset, steps, kv_before, snap_before)
        offset += s
        q_prev = s
    for ci, *rest in sorted({v[0]: v for v in last_growing.values()}.values(), key=lambda v: v[0]):
        if ci not in wanted:
            evaluate(ci, *rest)
    if known is not None and order:
        top_total, top = max(order, key=lambda t: t[0])  # max keeps the first of equal totals
        if not isinstance(top, CallPeak):
            cp = peak_of(*top)
            if cp.total != top_total:  # the table disagrees with the call (never seen): every candidate evaluated
                cp = max((x if isinstance(x, CallPeak) else peak_of(*x) for _, x in order), key=lambda c: c.total)
            top = cp
        best = top
    resident_after, _ = held(1)
    assert best is not None
    terms: dict[str, int] = {}
    kv_resident = best.held_before - held_start
    if kv_resident:
        terms["kv_resident"] = kv_resident
    if best.growth:
        terms["kv_growth"] = best.growth
    if best.snapshot:
        terms["state_snapshot"] = best.snapshot
    for k, v in best.pinned.items():
        if v:
            terms[k] = terms.get(k, 0) + v
    for k, v in sorted(best.window_terms.items(), key=lambda kv: -kv[1]):
        if v:
            terms[k] = terms.get(k, 0) + v
    _no_negative_terms(terms)
    peak = sum(terms.values())
    transient = best.window + sum(best.pinned.values())
    expl = explain(p, request, kr, best, peak, resident_after, held_start, window, n_calls)
    return Breakdown(
        peak_bytes=peak,
        resident_kv_bytes=resident_after,
        held_before_bytes=held_start,
        kv_growth_bytes=best.growth,
        transient_bytes=transient,
        peak_call=best.index,
        peak_q_len=best.q_len,
        peak_kv_len=best.kv_len,
        calls=n_calls,
        terms=terms,
        routes=best.routes,
        backend=kr.backend,
        mlx_version=kr.mlx_version,
        inflight_ops=window,
        explanation=expl,
    )
