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
