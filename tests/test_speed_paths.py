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


def test_bucket_windows_equal_the_plain_forms():
    """The vectorized ``free_graph_window`` / ``chain_graph_window`` (session 12) equal session 11's op-by-op forms on
    generated item lists of every shape the executor splits (per-op bytes and elements, nodes, carries)."""
    from omlx_profiles.peak.fast_cuda import chain_graph_window, free_graph_window, op_elements
    from tests.test_fits_cuda import _random_items, _scaled

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
