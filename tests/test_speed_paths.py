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
