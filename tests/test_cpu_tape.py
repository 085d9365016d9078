"""The CPU tape placement (``peak/ops/tape.py``) moves bytes between executor slots and nothing else.

What it models is checked against measurements elsewhere (tests/test_peak_live.py, the CPU calibration points of
tests/test_calibration.py, the two-rank ring of tests/test_sharded_live.py; the replay behind the placement data is
benchmarks/cpu_replay/). Here: the split and merged items keep every byte, every executor slot and every carry of
the items they replace, for the architectures of those tests, so the placement can only move where bytes sit. CPU
cost: 0.1 s (8 architectures; mlx is imported only through test_peak_live's configs).
"""
from __future__ import annotations

import dataclasses

import pytest

from omlx_profiles.estimate.calibration import profile_for_config
from omlx_profiles.peak.call import items_of_call
from omlx_profiles.peak.kernels import KernelRoutes
from omlx_profiles.peak.replay import EntryState
from omlx_profiles.units import DTYPE_BYTES

from .test_peak_live import ARCHS


def _without_placement(kr: KernelRoutes) -> KernelRoutes:
    fo = kr.table.fast_ops
    norm = fo.rms_norm.model_copy(update={"placement": {}})
    table = kr.table.model_copy(update={"fast_ops": fo.model_copy(update={"rms_norm": norm,
                                                                          "norm_rope_tail_dispatches": None})})
    return dataclasses.replace(kr, table=table)


def _items(p, kr, dtype, s=256, offset=512):
    states = {name: [EntryState(e) for e in lt.entries] for name, lt in p.layer_types.items()}
    for sts in states.values():
        for st in sts:
            st.step(offset)
    steps = {name: tuple(st.step(s) for st in sts) for name, sts in states.items()}
    return items_of_call(p, s, offset, steps, kr, {}, dtype, DTYPE_BYTES[dtype], False, last=False, direct=False)[1]


def _slots(items, kr):
    ex = kr.executor
    return sum(max(1, it.ops * ex.op_weight + it.views * ex.view_weight) for it in items)


@pytest.mark.parametrize("arch", list(ARCHS))
def test_placement_moves_bytes_only(arch):
    dtype, cfg = ARCHS[arch]
    p = profile_for_config(cfg, dtype)
    kr = KernelRoutes.for_backend("cpu", "0.32.4")
    placed, plain = _items(p, kr, dtype), _items(p, _without_placement(kr), dtype)
    assert kr.fast_ops.rms_norm.placement and kr.fast_ops.norm_rope_tail_dispatches
    assert len(placed) > len(plain), f"{arch}: no norm was placed"
    assert sum(it.bytes for it in placed) == sum(it.bytes for it in plain)
    assert _slots(placed, kr) == _slots(plain, kr)
    assert sorted(it.carry for it in placed if it.carry) == sorted(
        [it.carry for it in plain if it.carry] + [it.out if it.out >= 0 else it.bytes for i, it in enumerate(plain)
                                                  if it.term == "rms_norm" and i + 1 < len(plain)
                                                  and plain[i + 1].term == "rope" and plain[i + 1].bytes > 0])
    # every carry still ends where it ended: on the item (or the last piece of the item) it reached before
    for it in placed:
        assert it.carry_items <= 8, f"{arch}: a carry reaches past the executor's look-back"
