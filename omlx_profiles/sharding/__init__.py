"""Per-rank memory when mlx-lm shards a model over an ``mlx.distributed`` group (tensor or pipeline).

The plan of each mlx-lm module (which projections split which way, which caches a rank keeps whole) is
data: ``profiles/mlx_lm/sharding.yaml`` (``schema.py``, loaded by ``plan.py``). ``ranks.py`` turns a
``Profile`` into one per-rank ``Profile`` (a layer slice, or divided heads and widths), so the exact KV
arithmetic and the prefill-peak model of one process apply to each rank unchanged; ``weights.py`` splits
the weights term per rank; ``report.py`` assembles the per-rank estimate, verdicts and ``fit``.
No mlx import here.
"""
from __future__ import annotations

from .plan import load_plan, plan_for
from .ranks import ShardSpec, pipeline_ranges, rank_profiles
from .report import ShardedOptions, rank_weights, sharded_estimate, sharded_fit

__all__ = ["ShardSpec", "ShardedOptions", "load_plan", "pipeline_ranges", "plan_for", "rank_profiles",
           "rank_weights", "sharded_estimate", "sharded_fit"]
