"""``Estimator.fits`` on CUDA without a replay (``peak.fast_cuda``): bounds that hold, verdicts that agree.

On CUDA the exact replay (``prefill_peak``: MLX's graph commits, checked against traces of the H200) is the
truth the fast path answers for. So: for generated requests of several families (dense GQA, MoE, MLA
DeepSeek-V3, sliding windows, the gated-DeltaNet hybrid), chunk sizes 512 / 2048 / 4096 and lengths up to the
model's context, the bounds sit around the exact total (lower <= exact <= upper), the two-call answer equals
the replay, and ``fits`` says what the replay says but for the documented margin. The graph window bound is
checked on its own against ``graph_window_max`` over random item lists.
"""
from __future__ import annotations

import random

import pytest

from omlx_profiles import Estimator, default_registry
from omlx_profiles.estimate.estimator import fit_margin
from omlx_profiles.peak.executor import graph_window_max
from omlx_profiles.peak.fast_cuda import CudaFit, cuda_fit_for, free_graph_window, op_elements
from omlx_profiles.peak.ops.items import Item
from omlx_profiles.peak.prefill import Request, prefill_peak

# (model, chunk, random lengths, longest length tried): every family kind the CUDA model has, the engines'
# chunk sizes; lengths up to the model's context where the precompute up to there stays cheap (CI)
CASES = [
    ("meta-llama/Llama-3.1-8B-Instruct", 2048, 5, None),  # None: the model's max_context (131,072)
    ("Qwen/Qwen3-30B-A3B", 512, 3, None),  # MoE: the sort kernels' nodes change with the query count
    ("deepseek-v3", 4096, 2, 40_000),  # MLA
    ("google/gemma-3-27b-it", 2048, 2, 30_000),  # sliding windows
    ("openai/gpt-oss-20b", 4096, 2, None),  # sinks, sliding 128, MoE
    ("qwen3.5-35b-a3b", 4096, 1, 20_000),  # gated-DeltaNet hybrid
]


def _lengths(p, chunk: int, n: int, top: int | None, seed: str) -> list[int]:
    top = min(top or p.max_context, p.max_context)
    rng = random.Random(seed)
    out = {1, chunk + 1, chunk + 2, 2 * chunk + 1, top}
    out.update(rng.randint(2, top) for _ in range(n))
    # the chunk's last step (the shorter call is often the highest there)
    out.update(rng.randint(1, max(1, top // chunk - 1)) * chunk + chunk - rng.randint(1, 255) for _ in range(n))
    return sorted(x for x in out if 1 <= x <= top)


@pytest.mark.parametrize("mid,chunk,n,top", CASES)
def test_bounds_hold_and_the_two_call_answer_is_the_replay(mid, chunk, n, top):
    p = default_registry().resolve(mid).profile
    cf = cuda_fit_for(p, "cuda", None, None, False, chunk)
    assert isinstance(cf, CudaFit)
    est = Estimator(p)
    for N in _lengths(p, chunk, n, top, f"{mid} {chunk}"):
        exact = prefill_peak(p, Request(N, chunk=chunk), backend="cuda").peak_bytes
        lo, hi = cf.bounds(N)
        assert lo <= exact, (mid, chunk, N, lo, exact)
        assert hi is None or exact <= hi, (mid, chunk, N, exact, hi)
        assert cf.exact(N) == exact, (mid, chunk, N)
        req = Request(N, chunk=chunk)
        # fits decides at the REPORTED total (the replay raised to its monotone envelope, peak.envelope: never
        # below it): "fits" there (or the documented margin refusal), "does not fit" a byte below
        total = est.total_bytes(req, 0, "cuda")
        assert total >= exact, (mid, chunk, N, total, exact)
        v = est.fits(req, total, weights_bytes=0, reserve=0, backend="cuda")
        assert v.fits or (v.margin and hi is not None and hi - lo <= fit_margin(hi)), (mid, chunk, N, lo, total, hi)
        assert est.fits(req, total + fit_margin(total), weights_bytes=0, reserve=0, backend="cuda").fits
        assert not est.fits(req, total - 1, weights_bytes=0, reserve=0, backend="cuda").fits, (mid, chunk, N)


def test_prepare_builds_cuda_and_fits_then_decides_most_lengths_without_a_call():
    p = default_registry().resolve("meta-llama/Llama-3.1-8B-Instruct").profile
    est = Estimator(p)
    # a short context keeps the precompute small here; the same code builds every offset to max_context
    cf = est._cuda_fit(Request(2, chunk=4096), "cuda", None, None, False)
    cf.prepare(max_k=6)
    rng = random.Random(7)
    exact = {}
    for _ in range(30):
        N = rng.randint(1, 6 * 4096)
        exact[N] = prefill_peak(p, Request(N, chunk=4096), backend="cuda").peak_bytes
    calls = 0
    for N, e in exact.items():
        for budget in (e + (1 << 30), e - (1 << 30)):
            before = len(cf._exact)
            v = est.fits(Request(N, chunk=4096), budget, weights_bytes=0, reserve=0, backend="cuda")
            assert v.fits == (e <= budget)
            if N > 4097:  # a prompt of at most a chunk has no full call: no lower bound but its own calls
                calls += len(cf._exact) - before
    assert calls <= 2, calls  # a GiB away from the total, the bounds decide nearly every longer request


def test_a_cached_prefix_is_decided_at_the_reported_total_on_cuda():
    """After a prefix there is no ``CudaFit`` (its tables are of prompts without one); ``fits`` decides at the
    reported total, ``max(E(n, 0), U_cuda(n, c))`` of ``peak.fast_cuda_prefix`` (never below the replay):
    tests/test_fits_cuda_prefix.py."""
    p = default_registry().resolve("meta-llama/Llama-3.1-8B-Instruct").profile
    est = Estimator(p)
    req = Request(9000, cached=3000, chunk=2048)
    assert est._cuda_fit(req, "cuda", None, None, False) is None
    bd = prefill_peak(p, req, backend="cuda")
    total = est.total_bytes(req, 0, "cuda")
    assert total >= bd.held_before_bytes + bd.peak_bytes
    assert est.fits(req, total, weights_bytes=0, reserve=0, backend="cuda").fits
    assert not est.fits(req, total - 1, weights_bytes=0, reserve=0, backend="cuda").fits


def _random_items(rng: random.Random, n: int) -> list[Item]:
    out = []
    for _ in range(n):
        ops = rng.choice((0, 1, 1, 1, 2, 3, 5, 12, 40))
        k = max(1, ops)
        nodes = rng.choice((-1, -1, 0, rng.randint(0, 3 * k)))
        if rng.random() < 0.2:
            elems = tuple(rng.randint(0, 400 << 20) for _ in range(k))
        else:
            elems = rng.choice((0, rng.randint(0, 1500 << 20)))
        b = rng.randint(0, 1 << 30)
        op_bytes = ()
        if k > 1 and rng.random() < 0.3:
            cuts = sorted(rng.randint(0, b) for _ in range(k - 1))
            op_bytes = tuple(y - x for x, y in zip([0] + cuts, cuts + [b]))
        carry = rng.choice((0, 0, rng.randint(0, 1 << 28)))
        out.append(Item("t%d" % rng.randint(0, 5), b, ops, rng.randint(0, 2), carry=carry,
                        carry_items=rng.randint(1, 4) if carry else 0, out=rng.choice((-1, rng.randint(0, b))),
                        elems=elems, nodes=nodes, op_bytes=op_bytes))
    return out


def test_the_free_graph_window_is_never_below_the_graph_model():
    """Wherever the graphs start, the window from any op over the next ``inflight + 1`` graphs holds every
    window the graph model takes: random items (op, node and element counts, per-op bytes, carries) and
    commit limits small enough that the element and node rules both end graphs."""
    rng = random.Random(18)
    for t in range(300):
        items = _random_items(rng, rng.randint(1, 60))
        max_nodes = rng.choice((3, 10, 100))
        mega = rng.choice((0, 1, 500, 1000))
        inflight = rng.choice((0, 1, 3, 10))
        exact, _ = graph_window_max(items, max_nodes, mega, inflight, 2)
        up = free_graph_window(items, max_nodes, mega, inflight, 2)
        assert up >= exact, (t, up, exact)
        # a bucket's smallest call counts fewer input elements: graphs end later, never a smaller bound
        fewer = op_elements(items, 2) * 0.5
        assert free_graph_window(items, max_nodes, mega, inflight, 2, fewer) >= exact


def _scaled(items: list[Item], fs: list[float]) -> list[Item]:
    """The same items with every size (bytes, per-op bytes, elements, output, carry) scaled by ``fs``."""
    out = []
    for it, f in zip(items, fs):
        e = tuple(int(x * f) for x in it.elems) if isinstance(it.elems, tuple) else int(it.elems * f)
        ob = tuple(int(x * f) for x in it.op_bytes)
        b = sum(ob) if ob else int(it.bytes * f)
        out.append(Item(it.term, b, it.ops, it.views, carry=int(it.carry * f), carry_items=it.carry_items,
                        out=it.out if it.out < 0 else int(it.out * f), elems=e, nodes=it.nodes, op_bytes=ob))
    return out


def test_the_chain_graph_window_holds_every_call_of_a_bucket():
    """A query bucket's calls have the same items, each no larger than at the top and no smaller than at the
    bottom: the graph chain followed as an interval from the bottom's elements to the top's bounds the graph model
    of every call between (random items, sizes scaled per item; limits small enough for both rules to end graphs),
    and where both ends are the same call it is that call's window within the rounding allowance."""
    from omlx_profiles.peak.fast_cuda import chain_graph_window

    rng = random.Random(1818)
    for t in range(200):
        top = _random_items(rng, rng.randint(1, 60))
        fa = [rng.choice((1.0, rng.random())) for _ in top]
        fr = [a + (1 - a) * rng.random() for a in fa]
        bottom, mid = _scaled(top, fa), _scaled(top, fr)
        max_nodes = rng.choice((3, 10, 100))
        mega = rng.choice((0, 1, 500, 1000))
        inflight = rng.choice((0, 1, 3, 10))
        up = chain_graph_window(top, max_nodes, mega, inflight, 2, op_elements(bottom, 2))
        for items in (bottom, mid, top):
            exact, _ = graph_window_max(items, max_nodes, mega, inflight, 2)
            assert up >= exact, (t, up, exact)
        same = chain_graph_window(top, max_nodes, mega, inflight, 2, op_elements(top, 2))
        assert same - graph_window_max(top, max_nodes, mega, inflight, 2)[0] <= 4096 + same * 1e-9, t  # 1 B per op item + term roundings


def test_a_context_past_the_replay_ceiling_is_refused_before_any_call():
    """``CudaFit`` replays the full calls a length needs; past the replay's own ceiling (``peak.prefill``: MAX_CALLS
    units, a CUDA call GRAPH_CALL_COST of them) it refuses before walking one: a 2^30-token context made ``prepare``
    and ``fits`` walk 524,288 CUDA calls (hostile pass 8)."""
    import time

    from omlx_profiles.errors import UnsupportedError
    from omlx_profiles.kv.replay import MAX_CALLS
    from omlx_profiles.kv.work import GRAPH_CALL_COST

    p = default_registry().resolve("meta-llama/Llama-3.2-1B-Instruct").profile
    cf = cuda_fit_for(p, "cuda", None, None, False, 2048)
    t = time.process_time()
    with pytest.raises(UnsupportedError, match="larger chunk"):
        cf.bounds(2048 * (MAX_CALLS // GRAPH_CALL_COST + 1) + 2)
    assert not cf.F and time.process_time() - t < 1.0
