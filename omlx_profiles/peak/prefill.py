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

from dataclasses import dataclass, field, replace

from ..dtypes import DTYPE_BYTES
from ..errors import InputError, UnsupportedError
from ..kv.replay import MAX_CALLS, SCHEDULES
from ..registry.profile import Profile
from ..validation import check_count
from .executor import graph_window_max, window_max
from .explain import CallPeak, explain, routes_used
from .kernels import KernelRoutes, tiled_state
from .layers import dense_layer, embedding_items, layer_items, logits_items
from .ops.items import CallContext, Item
from .ops.recurrent import state_snapshot_bytes, unverified_peak
from ..mlxlm.recipe_files import traits_of
from .replay import KV_SCALED_KINDS, EntryState, calls_of, entry_bytes, fill_prefix, scale_up

# How many calls of a long prompt are evaluated: the peak call is always among the last ones (the held
# cache and every kL-dependent term only grow), plus the first (nothing held yet, but the longest chunk).
_TAIL_CALLS = 3
SMALL_ARRAYS = 64 * 1024


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
        check_count("tokens", self.tokens, minimum=1)
        check_count("cached", self.cached, minimum=0)
        check_count("chunk", self.chunk, minimum=1)
        check_count("batch", self.batch, minimum=1)
        if self.cached >= self.tokens:
            raise InputError(f"cached ({self.cached}) must be less than tokens ({self.tokens}): nothing left to prefill")
        if self.schedule not in SCHEDULES:
            raise InputError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.batch != 1:
            raise UnsupportedError("unsupported: batch > 1 prefill is not modelled (mlx-lm's BatchGenerator pads and "
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


# --------------------------------------------------------------------------------------------------
# the estimate
# --------------------------------------------------------------------------------------------------


def _validate_profile(p: Profile) -> None:
    if not p.hidden_size:
        raise UnsupportedError(f"unsupported: {p.name} has no hidden_size, so its activations are unknown")
    if p.num_heads is None and p.mla is None:
        raise UnsupportedError(f"unsupported: {p.name} has no num_heads (query heads), so its attention scores are unknown")


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

    _validate_profile(profile)
    kr = routes or KernelRoutes.for_backend(backend, mlx_version)
    why = unverified_peak(profile, kr)
    if why:
        raise UnsupportedError(why)
    b = basis_for(profile, kr, measured)
    bd = _prefill_peak(profile, request, kr, dtype, nax, all_calls, kv_scale=kv_scale)
    if b.kind != MEASURED and apply_basis:
        why = no_bound_reason(profile, kr)
        if why:
            raise UnsupportedError(why)
        worst = _prefill_peak(profile, request, kr, dtype, nax, all_calls, worst=b.worst or b.kind, kv_scale=kv_scale)
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
        return "peak basis: measured (every compute trait has calibration points in band on this backend)"
    from .basis import CONSERVATIVE_CHOICES

    if b.reason:
        return (f"peak basis: {b.kind} ({b.reason}); the larger of the op model and its worst case "
                f"({'; '.join(CONSERVATIVE_CHOICES[b.worst or b.kind])})")
    return (f"peak basis: {b.kind} (no calibration in band on this backend for: {', '.join(sorted(b.unmeasured))}): the "
            f"larger of the op model and its worst case ({'; '.join(CONSERVATIVE_CHOICES[b.worst or b.kind])})")


def _prefill_peak(p: Profile, request: Request, kr: KernelRoutes, dtype: str | None, nax: bool, all_calls: bool, *,
                  worst: str | None = None, kv_scale: float = 1.0) -> Breakdown:
    """The op model's peak (``worst`` None), or its ``derived`` / ``bound`` worst case (peak/basis.py)."""
    dt, act = _activation_dtype(p, dtype)
    _, tiled = tiled_state()
    window = kr.executor.window_for(request.chunk)

    if (request.tokens // request.chunk) > MAX_CALLS:
        raise UnsupportedError(f"unsupported: {request.tokens} tokens in chunks of {request.chunk} is more than "
                               f"{MAX_CALLS} prefill calls; use a larger chunk")
    prefix_calls, calls = calls_of(request)

    types = p.layer_types
    states = {name: [EntryState(e) for e in lt.entries] for name, lt in types.items()}
    counts: dict[str, int] = {}
    for n in p.layer_names:
        counts[n] = counts.get(n, 0) + 1

    def held(started: bool, q_prev: int) -> tuple[int, int]:
        kv = snap = scaled = 0
        for name, sts in states.items():
            for st in sts:
                b = counts[name] * entry_bytes(st.e, st.rows(), act, st.off > 0)
                if st.e.kind in KV_SCALED_KINDS:
                    scaled += b
                else:
                    kv += b
                if st.e.kind == "state" and st.off > 0 and q_prev > 1:
                    snap += counts[name] * state_snapshot_bytes(p, types[name], st.e, q_prev, act)
        return kv + scale_up(scaled, kv_scale), snap

    offset = fill_prefix(states, prefix_calls)
    prefix_held, prefix_snap = held(True, 0)  # the last prefix call was 1 token: no conv view left
    held_start = prefix_held

    n_calls = len(calls)
    wanted = set(range(n_calls)) if all_calls or n_calls <= _TAIL_CALLS + 1 else \
        {0, *range(n_calls - _TAIL_CALLS, n_calls)}
    best: CallPeak | None = None
    q_prev = 0
    for ci, s in enumerate(calls):
        kv_before, snap_before = held(True, q_prev)
        steps = {name: tuple(st.step(s) for st in sts) for name, sts in states.items()}
        if ci in wanted:
            growth = growth_scaled = 0
            for name, sts in states.items():
                for st, stp in zip(sts, steps[name]):
                    e = st.e
                    if e.kind == "state":
                        add = e.state_bytes(act) if stp.old_rows == 0 else 0
                    else:
                        add = max(0, stp.new_rows - stp.old_rows) * e.row_elements * act
                    if e.kind in KV_SCALED_KINDS:
                        growth_scaled += counts[name] * add
                    else:
                        growth += counts[name] * add
            growth += scale_up(growth_scaled, kv_scale)
            cp = _call_peak(p, ci, s, offset, steps, kr, tiled, dt, act, nax, window, last=(ci == n_calls - 1),
                            kv_before=kv_before, snap_before=snap_before, growth=growth,
                            direct=request.schedule == "direct", worst=worst)
            if best is None or cp.total > best.total:
                best = cp
        offset += s
        q_prev = s
    resident_after, _ = held(True, 1)
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


def _activation_dtype(p: Profile, dtype: str | None) -> tuple[str, int]:
    """The activation dtype (``dtype`` or the profile's) and its bytes per element."""
    dt = dtype or p.dtype
    if dt not in DTYPE_BYTES:
        raise InputError(f"dtype must be one of {sorted(DTYPE_BYTES)}, got {dt!r}")
    return dt, DTYPE_BYTES[dt]


def call_items(profile: Profile, request: Request, call: int, *, backend: str = "cpu",
               mlx_version: str | None = None, dtype: str | None = None,
               routes: KernelRoutes | None = None) -> list[Item]:
    """The ops of the prompt's ``call``-th call (0-based, prefix calls not counted) in the order the
    executor runs them: the sequence ``prefill_peak`` slides its window over. Exposed so the model can be
    checked against traces of the real executor (benchmarks/cuda/probe_commits.py records every CUDA graph
    MLX commits; ``executor.graph_ends`` of these items must land on the same count)."""
    _validate_profile(profile)
    p = profile
    dt, act = _activation_dtype(p, dtype)
    kr = routes or KernelRoutes.for_backend(backend, mlx_version)
    _, tiled = tiled_state()
    prefix_calls, calls = calls_of(request)
    check_count("call", call, minimum=0)
    if call >= len(calls):
        raise InputError(f"call must be below {len(calls)} (the prompt's number of calls), got {call}")
    states = {name: [EntryState(e) for e in lt.entries] for name, lt in p.layer_types.items()}
    offset = fill_prefix(states, prefix_calls)
    for ci, s in enumerate(calls):
        steps = {name: tuple(st.step(s) for st in sts) for name, sts in states.items()}
        if ci == call:
            return _call_items(p, s, offset, steps, kr, tiled, dt, act, False, last=ci == len(calls) - 1,
                               direct=request.schedule == "direct")[1]
        offset += s
    raise AssertionError("unreachable")


def _call_items(p: Profile, s: int, offset: int, steps: dict, kr: KernelRoutes, tiled: dict, dt: str, act: int,
                nax: bool, *, last: bool, direct: bool, bound: bool = False) -> tuple[CallContext, list[Item]]:
    ctx = CallContext(q_len=s, offset=offset, act=act, dtype=dt, routes=kr, tiled=tiled, nax=nax, last=last,
                        bound=bound)
    per_type: dict[str, list[Item]] = {}
    per_type_cache_only: dict[str, list[Item]] = {}
    items: list[Item] = list(embedding_items(p, ctx))
    n = len(p.layer_names)
    compute_all = last or direct
    for i, name in enumerate(p.layer_names):
        lt = p.layer_types[name]
        cache_only = (i == n - 1) and not compute_all and not p.sends_output
        cache = per_type_cache_only if cache_only else per_type
        dense = dense_layer(p, i)
        key = (name, dense)
        if key not in cache:
            cache[key] = layer_items(p, lt, steps[name], ctx, cache_only=cache_only, dense=dense)
        items.extend(cache[key])
    if compute_all:
        items.extend(logits_items(p, ctx) if last else [])
        if direct:
            items.append(Item("logits", s * (p.vocab_size or 0) * act, 1))
    return ctx, items


def _call_peak(p: Profile, ci: int, s: int, offset: int, steps: dict, kr: KernelRoutes, tiled: dict, dt: str,
               act: int, nax: bool, window: int, *, last: bool, kv_before: int, snap_before: int, growth: int,
               direct: bool, worst: str | None = None) -> CallPeak:
    ctx, items = _call_items(p, s, offset, steps, kr, tiled, dt, act, nax, last=last, direct=direct,
                             bound=worst == "bound")
    ex = kr.executor
    run_ahead = run_ahead_ops(kr) if worst else None
    if run_ahead is not None:
        # the backend's whole run-ahead window, whatever the ops' sizes (peak/basis.py): the size rule only
        # ends a command buffer / graph earlier, so the most ops in flight is (tasks + 1) x (ops per buffer + 1)
        wmax, wterms = window_max(items, run_ahead, 1, 0)
        w2, t2 = _call_window(items, ex, s, act)
        if w2 > wmax:
            wmax, wterms = w2, t2
    else:
        wmax, wterms = _call_window(items, ex, s, act)
    pinned = _pinned(p, steps, s, act)
    routes = routes_used(p, steps, ctx)
    kv_len = max((st.kv_len for sts in steps.values() for st in sts), default=offset + s)
    return CallPeak(ci, s, kv_len, kv_before, growth, snap_before, pinned, wmax, wterms, routes)


def run_ahead_ops(kr: KernelRoutes) -> int | None:
    """The most ops MLX lets the host run ahead of the device on this backend, from MLX's source: CUDA
    (max_inflight_graphs + 1) graphs of at most max_nodes + 1 kernels (graph_commit in the kernel table);
    Metal ``MAX_ACTIVE_TASKS`` (10) + 1 command buffers of at most ``max_ops_per_buffer`` + 1 ops, 50 on the
    Max / Ultra device classes, the largest (mlx/backend/metal/device.cpp: p 20, g 40, s 50, d 50;
    transforms.cpp MAX_ACTIVE_TASKS); None where no such rule is taken from the source (CPU)."""
    gc = kr.executor.graph_commit
    if gc is not None:
        return (gc.max_inflight_graphs + 1) * (gc.max_nodes + 1)
    if kr.backend == "metal":
        return (10 + 1) * (50 + 1)
    return None


def _call_window(items: list, ex, s: int, act: int) -> tuple[int, dict]:
    if ex.graph_commit is not None:
        # how far the host runs ahead: the graph-commit cap (exact, from MLX's source); optionally also how
        # far it got in time on one device (the op window measured per chunk size), the smaller winning
        gc = ex.graph_commit
        wmax, wterms = graph_window_max(items, gc.max_nodes, gc.max_mega_elements,
                                          gc.max_inflight_graphs + gc.margin_graphs, act)
        if gc.op_window_bound:
            w2, t2 = window_max(items, ex.window_for(s), ex.op_weight, ex.view_weight)
            if w2 < wmax:
                wmax, wterms = w2, t2
    else:
        wmax, wterms = window_max(items, ex.window_for(s), ex.op_weight, ex.view_weight)
    return wmax, wterms


def _pinned(p: Profile, steps: dict, s: int, act: int) -> dict[str, int]:
    """What outlives the window: the residual stream (the layer input, held until the residual add, and
    the running hidden state) and the masks mlx-lm builds once per forward and every layer reads."""
    h = p.hidden_size
    out = {"residual_stream": s * h * act if s > 1 else 0}
    masks = 0
    if s > 1:
        seen: set[tuple[str, int]] = set()
        for name, stps in steps.items():
            lt = p.layer_types[name]
            for e, st in zip(lt.entries, stps):
                if e.kind not in ("full", "sliding", "chunked", "latent"):
                    continue
                mk = "bool" if (traits_of(p.mlx_model_type).mask == "array" or e.kind in ("sliding", "chunked")) else "causal"
                if mk == "bool":
                    key = (e.kind, st.kv_len)
                    if key not in seen:
                        seen.add(key)
                        # create_causal_mask: two int32 aranges, linds >= rinds (bool S x kL); sliding also
                        # (linds < rinds + window) and the & of the two
                        masks += (3 if e.kind == "sliding" else 1) * s * st.kv_len + 4 * (s + st.kv_len)
    out["masks"] = masks
    # arrays the item list does not itemize, each a few KiB: per-row norm statistics, RoPE frequency
    # tables, aranges, router indices, scalars (a chunk of 256 tokens has ~10-20 KiB of them live)
    out["small_arrays"] = SMALL_ARRAYS if s > 1 else 0
    return out
