"""One rank of a sharded mlx-lm model, measured: ``python -m omlx_profiles.live.sharded SPEC.json OUT.json``.

Why a separate process per rank: ``mx.distributed`` gives one group per process, and MLX's ring backend
connects processes over TCP (here loopback only). The launcher (``tests/test_sharded_live.py``, or
``mlx.launch --backend ring``) sets ``MLX_RANK`` and ``MLX_HOSTFILE``; every rank runs the same cases in
the same order, because every collective (``all_sum``, ``send`` / ``recv``, ``all_gather``) must be
matched by the other ranks.

Per case the rank does what ``mlx_lm.utils.sharded_load`` does to a local model directory: load it
lazily, ``model.shard(group)`` (tensor) or ``model.model.pipeline(group)`` (pipeline), evaluate the
parameters (only the rank's share is ever materialized), then prefill a prompt exactly as
``generate_step`` does (``live.peak.measure_prefill_peak``). It reports its weight bytes (sum of
``nbytes`` of its parameters), its cache bytes (``sum(c.nbytes for c in cache)``) and its peak over the
baseline (``mx.get_peak_memory()``), per call.
"""
from __future__ import annotations

import gc
import json
import sys
import time
from pathlib import Path


def run_case(case: dict, group) -> dict:
    import mlx.core as mx
    from mlx.utils import tree_flatten

    from .build import load_local
    from .measure import measure_prefill_peak

    model, _ = load_local(case["path"], lazy=True)
    if case["parallel"] == "tensor":
        model.shard(group)
    else:
        split = case.get("split")
        if split:
            model.model.pipeline(group, split)
        else:
            model.model.pipeline(group)
    mx.eval(model.parameters())
    inner = getattr(model, "model", None)
    layers = [int(getattr(inner, "start_idx", 0) or 0), int(getattr(inner, "end_idx", None) or len(model.layers))]
    weights = sum(p.nbytes for _, p in tree_flatten(model.parameters()))
    best = None
    for _ in range(case.get("repeats", 1)):
        r = measure_prefill_peak(model, case["tokens"], case["chunk"])
        rows = [row["peak_over_baseline"] for row in r["rows"]]
        best = rows if best is None else [max(a, b) for a, b in zip(best, rows)]
    out = {"name": case["name"], "rank": group.rank(), "size": group.size(), "weights_nbytes": int(weights), "layers": layers,
           "cache_nbytes": r["cache_nbytes"], "peak_over_baseline": max(best), "call_peaks": best,
           "q_lens": [row["q_len"] for row in r["rows"]]}
    del model
    gc.collect()
    mx.clear_cache()
    return out


def main(argv: list[str]) -> int:
    import mlx.core as mx

    spec = json.loads(Path(argv[0]).read_text())
    mx.set_default_device(mx.cpu)
    group = mx.distributed.init(backend="ring", strict=True)
    t0 = time.monotonic()
    results = [run_case(c, group) for c in spec["cases"]]
    Path(argv[1]).write_text(json.dumps({"rank": group.rank(), "size": group.size(), "seconds": time.monotonic() - t0,
                                         "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
