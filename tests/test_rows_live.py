"""The integer growth rules in rows.py against mlx-lm's real cache classes, fed real arrays.

Each case replays a call sequence into ``KVCache`` / ``RotatingKVCache`` / ``ChunkedKVCache`` and
compares ``keys.shape[2]`` (what ``nbytes`` counts) with the integer replay. Irregular chunk sizes are
included because they break the simple ``256*ceil(N/256)`` rule.
"""
from __future__ import annotations

import random

import pytest

from omlx_profiles.kv.replay import calls_for, chunked_rows, kv_capacity, kv_capacity_fast, rotating_rows

mx = pytest.importorskip("mlx.core")
cache_mod = pytest.importorskip("mlx_lm.models.cache")

pytestmark = pytest.mark.live


def _feed(cache, calls, trim_front=False):
    for s in calls:
        if trim_front:
            cache.maybe_trim_front()
        k = mx.zeros((1, 1, s, 2), dtype=mx.float16)
        cache.update_and_fetch(k, k)
    mx.eval(cache.keys)
    return cache.keys.shape[2]


def _sequences():
    rng = random.Random(1234)
    seqs = [[1], [255], [256], [257], [300, 300, 99, 1], [512, 1], [511, 1], [1, 1, 1, 300, 1], [2048, 2048, 951, 1]]
    for n in (1, 255, 256, 257, 1000, 3000):
        for chunk in (128, 200, 256, 300, 2048):
            for sched in ("generate", "direct"):
                seqs.append(calls_for(n, sched, chunk))
    for _ in range(40):
        seqs.append([rng.choice([1, 1, 2, 7, 100, 255, 256, 257, 513]) for _ in range(rng.randint(1, 8))])
    return seqs


SEQS = _sequences()


@pytest.mark.parametrize("calls", SEQS, ids=lambda c: "-".join(map(str, c))[:60])
def test_kvcache_rows(calls):
    assert kv_capacity(calls) == _feed(cache_mod.KVCache(), calls)


@pytest.mark.parametrize("window", [1, 4, 128, 300, 4096])
@pytest.mark.parametrize("calls", SEQS[::3], ids=lambda c: "-".join(map(str, c))[:60])
def test_rotating_rows(calls, window):
    assert rotating_rows(calls, window) == _feed(cache_mod.RotatingKVCache(max_size=window, keep=0), calls)


@pytest.mark.parametrize("chunk", [64, 128, 300])
@pytest.mark.parametrize("calls", SEQS[::3], ids=lambda c: "-".join(map(str, c))[:60])
def test_chunked_rows(calls, chunk):
    assert chunked_rows(calls, chunk) == _feed(cache_mod.ChunkedKVCache(chunk), calls, trim_front=True)


@pytest.mark.parametrize("n", [0, 1, 255, 256, 257, 1000, 4097])
@pytest.mark.parametrize("chunk", [256, 300, 2048])
@pytest.mark.parametrize("sched", ["generate", "direct"])
def test_fast_path_agrees(n, chunk, sched):
    assert kv_capacity_fast(n, sched, chunk) == kv_capacity(calls_for(n, sched, chunk))
