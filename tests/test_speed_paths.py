"""The fast paths session 11 put in for speed give the same numbers as the loops they replace (issue 18: per-call
cost). Cheap: generated item lists, no model replay (< 1 s)."""
from __future__ import annotations

import random

import pytest

from omlx_profiles.peak import executor
from omlx_profiles.peak.ops.items import Item


def _items(rng: random.Random, n: int) -> list[Item]:
    out = []
    for _ in range(n):
        b = rng.choice([0, rng.randint(1, 1 << 40), rng.random() * 1e9])
        carry = rng.choice([0, 0, rng.randint(1, 1 << 35), rng.random() * 1e7])
        out.append(Item("t", b, rng.randint(1, 4), 0, carry=carry, carry_items=rng.randint(0, 12),
                        out=rng.choice([-1, 0, rng.randint(1, 1 << 30)])))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_carried_per_item_numpy_equals_the_loop(seed, monkeypatch):
    """``executor._carried_numpy`` (lists of >= 64 items) adds the same floats in the same order as the loop: equal
    lists, element by element (not approximately: the golden estimates are byte-identical through it)."""
    rng = random.Random(seed)
    for _ in range(40):
        items = _items(rng, rng.randint(64, 400))
        fast = executor.carried_per_item(items)
        monkeypatch.setattr(executor, "_NUMPY_CARRIED", 1 << 30)
        loop = executor.carried_per_item(items)
        monkeypatch.setattr(executor, "_NUMPY_CARRIED", 64)
        assert fast == loop


def _commit_items(rng: random.Random, n: int) -> list[Item]:
    """Items as the CUDA replay makes them: shared objects (a call's layers), even or per-op elements, per-op bytes,
    fractional nodes per op, sizes from none to many graphs' worth."""
    pool = []
    for _ in range(rng.randint(1, 12)):
        ops = rng.choice([1, 1, 2, 3, rng.randint(4, 40), rng.randint(90, 400)])
        elems = rng.choice([0, rng.randint(1, 1 << 22), rng.random() * 3e6,
                            tuple(rng.randint(0, 1 << 21) for _ in range(ops))])
        op_bytes = tuple(rng.randint(0, 1 << 24) for _ in range(ops)) if rng.random() < 0.3 else ()
        pool.append(Item("t", sum(op_bytes) if op_bytes else rng.randint(0, 1 << 30), ops,
                         elems=elems, nodes=rng.choice([-1, 0, ops, rng.randint(1, 3 * ops)]), op_bytes=op_bytes))
    return [rng.choice(pool) for _ in range(n)]


@pytest.mark.parametrize("seed", range(3))
def test_graph_ends_one_step_items_equal_the_walk(seed, monkeypatch):
    """``executor.graph_ends`` adds an item that ends no graph in one step: the same ends (floats, exactly) as
    walking every item (``_COMMIT_MARGIN`` infinite), over node and element limits that end graphs inside items,
    between them and not at all."""
    rng = random.Random(seed)
    for _ in range(60):
        items = executor.split_ops(_commit_items(rng, rng.randint(1, 300)))
        args = (rng.choice([2, 7, 100, 10_000]), rng.choice([0, 1, 3, 1024]), rng.choice([1, 2, 4]))
        fast = executor.graph_ends(items, *args)
        monkeypatch.setattr(executor, "_COMMIT_MARGIN", float("inf"))
        walked = executor.graph_ends(items, *args)
        monkeypatch.setattr(executor, "_COMMIT_MARGIN", 1e-6)
        assert fast == walked


def _plain_graph_ends(items, max_nodes, max_mega_elements, act):
    """Session 12's ``graph_ends``: every item that reaches a limit walked step by step (one ``need`` per graph), no
    repeated steps added at once. The reference the session-13 form must equal float for float."""
    from math import ceil

    el_limit = (max_mega_elements + 1) << 20
    node_limit = max_nodes + 1 - 1e-9
    ends, pos, n_nodes, n_el = [], 0.0, 0.0, 0.0
    for it in items:
        ops, npo, even, per_op, whole_n, whole_e = executor._commit_counts(it, act)
        if per_op is None and n_nodes + whole_n < max_nodes + 1 - 1e-6 and n_el + whole_e < el_limit:
            n_nodes, n_el, pos = n_nodes + whole_n, n_el + whole_e, pos + ops
            continue
        left = ops
        while left > 0:
            if per_op:
                need, epo = 1, per_op[ops - left]
            else:
                need, epo = left, even
                if npo > 0:
                    need = min(need, max(1, ceil((max_nodes + 1 - n_nodes) / npo - 1e-9)))
                if epo > 0:
                    need = min(need, max(1, ceil((el_limit - n_el) / epo - 1e-9)))
            n_nodes += need * npo
            n_el += need * epo
            pos += need
            left -= need
            if n_nodes >= node_limit or n_el >= el_limit:
                ends.append(pos)
                n_nodes = n_el = 0.0
    if not ends or ends[-1] < pos:
        ends.append(pos)
    return ends


@pytest.mark.parametrize("seed", range(3))
def test_graph_ends_repeated_steps_equal_the_plain_walk(seed):
    """``executor.graph_ends`` adds the identical graphs a long evenly spread item makes after a commit in one step
    (session 13: a gated-DeltaNet call's recurrence items, 384 ops of 1 node, a graph every 101 ops): the same ends,
    float for float, as walking them one graph at a time, over items of 1 node per op (the GDN case), fractional
    nodes, element-bound graphs (1 op a graph), per-op elements, and limits that end graphs inside items or never."""
    rng = random.Random(100 + seed)
    for _ in range(30):
        pool = _commit_items(rng, 0)
        for _ in range(rng.randint(1, 6)):
            ops = rng.choice([128, 384, rng.randint(2, 600)])
            elems = rng.choice([0, ops * 393216, rng.random() * 1e12])
            pool.append(Item("r", rng.randint(0, 1 << 30), ops, elems=elems,
                             nodes=rng.choice([ops, 2 * ops, rng.randint(1, 5 * ops)])))
        # a graph's nodes a hair under the limit after the step from zero (101 / npo just above 33): that step ends no
        # graph, and the next one must not be taken as its repeat
        pool.append(Item("h", 1 << 20, 384, elems=0, nodes=101 * 384 / (33 + 5e-10)))
        items = executor.split_ops([rng.choice(pool) for _ in range(rng.randint(1, 200))])
        args = (rng.choice([100, 100, 2, 7, 10_000]), rng.choice([0, 1, 3, 1000]), rng.choice([1, 2, 4]))
        assert executor.graph_ends(items, *args) == _plain_graph_ends(items, *args)


# -- session 12: the CUDA bucket bounds' graph ends and windows (peak/fast_cuda.py) -----------------------------------
def _cum_arrays(rng: random.Random, n: int):
    """Non-decreasing cumulative sums with flats (0-node / 0-element ops), fractional steps (2.8 nodes per op: the float
    sums are not exact) and jumps (an op of 1025 nodes, one of 1 Gi elements)."""
    import numpy as np

    nodes = [rng.choice((0.0, 1.0, 1.0, 2.5, 2.8, 1025.0)) for _ in range(n)]
    els = [rng.choice((0.0, 3.0, rng.random() * 5e6, float(1 << 30))) for _ in range(n)]
    return (np.concatenate(([0.0], np.cumsum(nodes))), np.concatenate(([0.0], np.cumsum(els))))


@pytest.mark.parametrize("seed", range(3))
def test_graph_ends_equal_the_plain_searches(seed, monkeypatch):
    """``_first_reach`` (blocked) and ``_graph_ends`` (the elements searched only where they end a graph first) give the
    integers of the plain ``searchsorted`` formula they replace, blocks forced small so that every path runs."""
    import numpy as np

    from omlx_profiles.peak import fast_cuda

    monkeypatch.setattr(fast_cuda, "_REACH_BLOCK", 7)
    rng = random.Random(seed)
    for _ in range(30):
        n = rng.randint(1, 300)
        node_cum, el_cum = _cum_arrays(rng, n)
        tn = rng.choice((3 + 1e-6, 101 + 1e-6, 100 - 1e-7))
        te = rng.choice((1.0, float(1 << 20), float(1 << 30), float(1001 << 20) * (1 + 1e-9)))  # 1 Gi: ties
        target = node_cum[:-1] + tn
        assert np.array_equal(fast_cuda._first_reach(node_cum, target), np.searchsorted(node_cum, target, side="left"))
        yn = np.searchsorted(node_cum, node_cum[:-1] + tn, side="left")
        ye = np.searchsorted(el_cum, el_cum[:-1] + te, side="left")
        plain = np.append(np.maximum(np.minimum(np.minimum(yn, ye), n), np.arange(1, n + 1)), n)
        assert np.array_equal(fast_cuda._graph_ends(node_cum, el_cum, tn, te, n), plain)
        # the chain from 0 at its positions only (session 13: ``chain_graph_window``), also cut to a number of ends
        orbit = [0]
        while orbit[-1] < n:
            orbit.append(int(plain[orbit[-1]]))
        assert fast_cuda._graph_chain(node_cum, el_cum, tn, te, n) == orbit
        k = rng.randint(0, len(orbit) + 3)
        assert fast_cuda._graph_chain(node_cum, el_cum, tn, te, n, k) == (orbit + [n] * k)[:k + 1]
        for lim in ((-1.0, te), (tn, 0.0)):  # limits that end no graph (the x + 1 guard)
            g = fast_cuda._graph_ends(node_cum, el_cum, *lim, n)
            orbit = [0]
            while orbit[-1] < n:
                orbit.append(int(g[orbit[-1]]))
            assert fast_cuda._graph_chain(node_cum, el_cum, *lim, n) == orbit


def _plain_windows(items, max_nodes, max_mega, inflight, act, op_elems):
    """``free_graph_window`` and ``chain_graph_window`` as session 11 wrote them (every op searched, one graph at a
    time): the reference the vectorized forms must equal."""
    import numpy as np

    from omlx_profiles.peak.fast_cuda import _Ops

    o = _Ops(items, act)
    total = int(o.per_node.size)
    node_cum = np.concatenate(([0.0], np.cumsum(o.per_node)))
    upto = np.concatenate(([0.0], np.cumsum(o.per_byte)))
    cmax = o.carried[o.owner]
    el_cum = np.concatenate(([0.0], np.cumsum(op_elems)))
    el_lim = float((max_mega + 1) << 20)
    yn = np.searchsorted(node_cum, node_cum[:-1] + max_nodes + 1 + 1e-6, side="left")
    ye = np.searchsorted(el_cum, el_cum[:-1] + el_lim * (1 + 1e-9), side="left")
    G = np.append(np.maximum(np.minimum(np.minimum(yn, ye), total), np.arange(1, total + 1)), total)
    ends = np.arange(total + 1)
    for _ in range(inflight + 1):
        ends = G[ends]
    free = int(float(np.max(upto[ends[:-1]] - upto[:-1] + cmax)) * (1 + 1e-12)) + 1 + o.m
    tol_n = 8 * float(np.spacing(max(node_cum[-1], 1.0))) + 1e-12

    def chain_ends(per_el, high):
        ec = np.concatenate(([0.0], np.cumsum(per_el)))
        tol_e = 8 * float(np.spacing(max(ec[-1], el_lim)))
        if high:
            tn, te = max_nodes + 1 - 1e-9 + tol_n, el_lim + tol_e
        else:
            tn = max_nodes + 1 - 1e-9 * max(1.0, float(np.max(o.per_node))) - tol_n
            te = el_lim - 1e-9 * max(1.0, float(np.max(per_el))) - tol_e
        a = np.searchsorted(node_cum, node_cum[:-1] + tn, side="left")
        b = np.searchsorted(ec, ec[:-1] + te, side="left")
        return np.append(np.maximum(np.minimum(np.minimum(a, b), total), np.arange(1, total + 1)), total)

    g_lo, g_hi = chain_ends(o.per_el, False), chain_ends(op_elems, True)
    L, H = [0], [0]
    while L[-1] < total:
        L.append(int(g_lo[L[-1]]))
        H.append(int(g_hi[H[-1]]))
    best = 0.0
    for g in range(len(L) - 1):
        s = max(0, g - inflight)
        v = upto[min(H[g + 1], total)] - upto[L[s]] + float(np.max(cmax[L[s]:min(H[s], total - 1) + 1]))
        best = max(best, v)
    return free, int(best * (1 + 1e-12)) + 1 + o.m


@pytest.mark.parametrize("blocked", [False, True, "unsampled"])
def test_bucket_windows_equal_the_plain_forms(blocked, monkeypatch):
    """The vectorized ``free_graph_window`` / ``chain_graph_window`` (session 12) equal session 11's op-by-op forms on
    generated item lists of every shape the executor splits (per-op bytes and elements, nodes, carries); ``blocked``:
    the free window's branch and bound (``_max_window``) on blocks of 3 ops from 8 ops on, with (session 13) and
    without (``unsampled``) its first look at a few blocks' chains (long ones: every op at once)."""
    from omlx_profiles.peak import fast_cuda
    from omlx_profiles.peak.fast_cuda import chain_graph_window, free_graph_window, op_elements
    from tests.test_fits_cuda import _random_items, _scaled

    if blocked:
        monkeypatch.setattr(fast_cuda, "_WINDOW_BLOCK", 3)
        monkeypatch.setattr(fast_cuda, "_WINDOW_BLOCKED", 8)
    if blocked == "unsampled":
        monkeypatch.setattr(fast_cuda, "_WINDOW_SAMPLES", 0)
    rng = random.Random(12)
    for _ in range(60):
        items = _random_items(rng, rng.randint(1, 120))
        mn, me, inf = rng.choice((3, 10, 100)), rng.choice((0, 1, 4, 1000)), rng.choice((0, 1, 3, 10))
        small = op_elements(_scaled(items, [rng.uniform(0.3, 1.0) for _ in items]), 2)
        free, chain = _plain_windows(items, mn, me, inf, 2, small)
        assert free_graph_window(items, mn, me, inf, 2, small) == free
        assert chain_graph_window(items, mn, me, inf, 2, small) == chain


@pytest.mark.parametrize("seed", range(3))
def test_window_scan_numpy_equals_the_loop(seed, monkeypatch):
    """``executor._scan_numpy`` (>= 64 items: every CPU / Metal call) gives the loop's windows: the same
    ``{start: bytes}`` (keys, float values and order) and the same largest window, over windows narrower than one
    item, a few items and wider than the call, with and without view slots."""
    rng = random.Random(seed)
    for _ in range(40):
        items = _items(rng, rng.randint(64, 300)) + [Item("t", rng.randint(0, 1 << 45), rng.randint(1, 9),
                                                           rng.randint(0, 3))]
        rng.shuffle(items)
        window, ow, vw = rng.choice([1, 3, 57, 114, 600, 5000]), rng.choice([1, 2]), rng.choice([0, 1])
        fast_sums, loop_sums = [], []
        fast = executor.window_max(items, window, ow, vw, all_sums=fast_sums)
        monkeypatch.setattr(executor, "_NUMPY_SCAN", 1 << 30)
        loop = executor.window_max(items, window, ow, vw, all_sums=loop_sums)
        monkeypatch.setattr(executor, "_NUMPY_SCAN", 64)
        assert fast == loop
        assert [list(d.items()) for d in fast_sums] == [list(d.items()) for d in loop_sums]


def _plain_embed(a, b):
    """``_Ops.embed`` as session 11 wrote it (every op gathered): the reference of the per-item form."""
    import operator

    import numpy as np

    from omlx_profiles.peak.fast_cuda import _shape_of

    sa, sb = a.sig, b.sig
    if len(sa) != len(sb) or a.m != b.m or _shape_of(sa) != _shape_of(sb):
        return None
    if not (np.all(a.byts <= b.byts) and np.all(a.outs <= b.outs) and np.all(a.carries <= b.carries)):
        return None
    ca, cb = a.counts, b.counts
    diff = np.fromiter(map(operator.ne, sa, sb), dtype=bool, count=len(sa))
    if np.any(diff & (a.special | b.special)) or np.any(ca > cb) or np.any(a.nodes > b.nodes + 1e-9):
        return None
    d = cb - ca
    starts_a = np.concatenate(([0], np.cumsum(ca)))[:-1]
    item = np.repeat(np.arange(len(cb)), cb)
    local = np.arange(int(cb.sum())) - np.concatenate(([0], np.cumsum(cb)))[:-1][item]
    mask = local >= d[item]
    ai = np.where(mask, starts_a[item] + local - d[item], 0)
    same = ~diff[item]
    pna, pea, pba = a.per_node[ai], a.per_el[ai], a.per_byte[ai]
    if np.any((pea > b.per_el) & same) or np.any((pba > b.per_byte) & same):
        return None
    lo_nodes = np.where(mask, np.minimum(pna, b.per_node), 0.0)
    lo_el = np.where(mask, np.minimum(pea, b.per_el), 0.0)
    slack = 0.0
    if diff.any():
        ex = np.where(diff, cb * np.maximum(a.byts / np.maximum(ca, 1) - b.byts / np.maximum(cb, 1), 0.0), 0.0)
        slack = 2.0 * float(ex.max())
    return lo_nodes, lo_el, slack


def test_embed_per_item_equals_the_per_op_form():
    """``_Ops.embed`` (per item, session 12) gives the arrays of the per-op form, bit for bit, or None where it does:
    generated bottom / top pairs of a loop's spans (op counts that grow) and fixed items, some of them ``special``
    (per-op bytes or elements: compared and taken op by op), some sizes above the top's (None)."""
    from omlx_profiles.peak.fast_cuda import _Ops

    rng = random.Random(1812)
    seen = {True: 0, False: 0}
    for _ in range(120):
        shape = []
        for _ in range(rng.randint(2, 25)):
            ops = rng.choice((1, 2, 4))
            shape.append((rng.random() < 0.4, rng.randint(0, 1 << 24), rng.randint(0, 1 << 26), rng.choice((1, 3)),
                          ops, rng.random() < 0.3 and ops > 1, rng.random() < 0.2))

        def call(steps, q):
            out = []
            for k, (grows, b, e, npo, ops, per_op, el_tuple) in enumerate(shape):
                if grows:
                    n = steps[k]
                    out.append(Item("span", int(b * n), n * 2, carry=int(b * n) // 3, carry_items=1, out=0,
                                    elems=int(e * n), nodes=npo * n * 2, grows=True))
                    continue
                bb = int(b * q)
                first = bb * 9 // 10 if q < 1 else bb // ops  # a bottom's first op may hold more than the top's
                rest = (bb - first) // (ops - 1) if ops > 1 else 0
                op_bytes = tuple([first] + [rest] * (ops - 2) + [bb - first - rest * (ops - 2)]) if per_op else ()
                elems = tuple(int(e * q * (j + 1) / ops) for j in range(ops)) if el_tuple else int(e * q)
                out.append(Item("op%d" % (k % 4), bb, ops, carry=bb // 5, carry_items=1, elems=elems, nodes=npo * ops,
                                op_bytes=op_bytes))
            return out

        top = [rng.randint(0, 9) for _ in shape]
        bottom = [rng.randint(0, x) for x in top]
        q = rng.choice((0.4, 1.0, 1.3))  # 1.3: fixed items above the top's: None
        a, b = _Ops(call(bottom, q), 2), _Ops(call(top, 1.0), 2)
        got, want = a.embed(b), _plain_embed(a, b)
        assert (got is None) == (want is None)
        seen[got is None] += 1
        if got is not None:
            assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes() and got[2] == want[2]
    assert seen[True] and seen[False] > 30


@pytest.mark.parametrize("name", ["gemma-3-4b-it", "qwen3.5-35b-a3b", "llama-4-scout"])
def test_call_walk_clone_equals_a_deep_copy(name):
    """``CallWalk.clone`` copies each cache state's integers and shares its entry (session 13: ``copy.deepcopy`` was
    most of a clone): a clone and a deep copy step to the same totals and states (sliding, recurrent, chunked caches),
    and stepping the clone leaves the original as it was."""
    import copy
    import json
    from pathlib import Path

    from omlx_profiles.extraction.from_config import extract_config
    from omlx_profiles.peak.fast_cuda import CallWalk
    from omlx_profiles.peak.kernels import KernelRoutes
    from omlx_profiles.registry import load_registry

    if name == "llama-4-scout":  # chunked attention (tests/module_configs), cut to 4 layers as test_properties_api's
        cfg = json.loads((Path(__file__).parent / "module_configs" / "llama-4-scout-17b-16e.json").read_text())
        cfg["text_config"]["num_hidden_layers"] = 4
        p = extract_config(cfg, source="llama-4-scout-17b-16e.json").profile()
    else:
        p = load_registry().resolve(name).profile
    w = CallWalk(p, KernelRoutes.for_backend("cuda", None), 512, None, False, 1.0, None)
    for s in (512, 512, 300):
        w.step(s, evaluate=False)

    def sub(x):
        return None if x is None else tuple(getattr(x, a) for a in type(x).__slots__)

    def slots(walk):
        return {n: [(st.cap, st.off, sub(st.rot), sub(st.chk)) for st in sts] for n, sts in walk.states.items()}

    before = slots(w)
    a = w.clone()
    b = copy.copy(w)
    b.states = copy.deepcopy(w.states)
    for s in (512, 1, 9000 % 512, 512, 1):
        assert a.step(s, evaluate=True) == b.step(s, evaluate=True)
        assert slots(a) == slots(b)
    assert slots(w) == before
