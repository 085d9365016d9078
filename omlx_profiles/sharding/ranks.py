"""One ``Profile`` per rank: what each process of an mlx-lm sharded model holds and computes.

Why a Profile per rank: a rank runs the same mlx-lm code on fewer layers (pipeline) or on fewer heads and
narrower projections (tensor), so the exact KV arithmetic (``kv.kv_report``) and the prefill-peak model
(``peak.prefill``) of one process apply to it unchanged; only the communication buffers are extra
(``report.comm_bytes``).

* pipeline (``PipelineMixin.pipeline``, mlx-lm 0.32.2): ``split[r]`` layers per rank, by default an even
  split where the low ranks take the extra layers; rank ``r`` runs the layers *after* those of ranks
  ``r+1 .. N-1``, so rank 0 runs the last layers. Caches exist only for the rank's layers
  (``Model.layers`` is ``pipeline_layers``). A module whose ``pipeline`` has a rule of its own says so in
  the plan (``pipeline_split``): the high ranks take the extra layers (``extra_to_first_layers``), or its
  default is its own and only an explicit split is modelled (``own_default``), or it is refused (``own``).
* tensor (``Model.shard``): heads, KV heads (where the K/V projections split), MLP and expert widths,
  recurrent states (where the mixer's input splits) and the vocabulary (where ``lm_head`` splits) are
  divided by N; every other cache (the MLA latent, the DSA indexer) is held whole by every rank.
  ``mx.split`` needs each split axis to divide by N: anything that does not is an error here too.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..errors import InputError, UnsupportedError
from ..registry.profile import LayerType, Profile, StateTensorSpec
from .plan import PARALLEL, plan_for
from ..schema.sharding import ShardingFile, TensorPlan

MAX_RANKS = 1024
_ATTENTION = ("full", "sliding", "chunked")


@dataclass(frozen=True)
class ShardSpec:
    """How the model is spread: ``ranks`` processes, ``tensor`` or ``pipeline``, optional layer split."""

    ranks: int
    parallel: str
    split: tuple[int, ...] | None = None

    def __post_init__(self):
        if type(self.ranks) is not int or not 1 <= self.ranks <= MAX_RANKS:
            raise InputError(f"ranks must be an integer from 1 to {MAX_RANKS}, got {self.ranks!r}")
        if self.parallel not in PARALLEL:
            raise InputError(f"parallel must be tensor or pipeline, got {self.parallel!r}")
        if self.split is not None:
            if self.parallel != "pipeline":
                raise InputError("a layer split (--split) applies to --parallel pipeline only")
            if len(self.split) != self.ranks:
                raise InputError(f"--split has {len(self.split)} entries for {self.ranks} ranks")
            if any(type(s) is not int or s <= 0 for s in self.split):
                raise InputError(f"--split entries must be positive layer counts, got {list(self.split)}")


@dataclass(frozen=True)
class RankView:
    """One rank: its index, the model layers it runs ``[start, end)``, and its per-rank profile."""

    rank: int
    start: int
    end: int
    profile: Profile


def pipeline_ranges(num_layers: int, ranks: int, split: tuple[int, ...] | None = None, rule: str = "mixin",
                    module: str = "") -> list[tuple[int, int]]:
    """``[start, end)`` of the layers each rank runs, exactly as the module's ``pipeline`` computes them
    (``rule``: the plan's ``pipeline_split``; ``PipelineMixin.pipeline`` for most modules)."""
    who = f"mlx-lm module {module!r}" if module else "this module"
    if rule == "own" or (rule == "own_default" and split is None):
        how = "any split" if rule == "own" else "its default split (not PipelineMixin's even one)"
        extra = "" if rule == "own" else "; pass --split with the layers per rank (rank 0 first)"
        raise UnsupportedError(f"{who} computes {how} by a rule of its own that is not modelled{extra}")
    if rule == "extra_to_first_layers":
        if split is not None:
            raise UnsupportedError(f"{who}'s pipeline() takes no split (--split)")
        if ranks > num_layers:
            raise InputError(f"{ranks} pipeline ranks for {num_layers} layers: every rank needs at least one layer")
        base, extra = divmod(num_layers, ranks)
        out = []
        for r in range(ranks):
            seg = ranks - r - 1  # rank 0 runs the last segment; the first segments take the extra layers
            start = seg * base + min(seg, extra)
            out.append((start, start + base + (1 if seg < extra else 0)))
        return out
    if split is None:
        if ranks > num_layers:
            raise InputError(f"{ranks} pipeline ranks for {num_layers} layers: every rank needs at least one layer")
        base, extra = divmod(num_layers, ranks)
        split = tuple(base + (1 if r < extra else 0) for r in range(ranks))
    if len(split) != ranks:
        raise InputError(f"--split has {len(split)} entries for {ranks} ranks")
    if sum(split) != num_layers or any(s <= 0 for s in split):
        raise InputError(f"--split {','.join(map(str, split))} must be positive and sum to the model's "
                         f"{num_layers} layers")
    out = []
    for r in range(ranks):
        start = sum(split[r + 1:])
        out.append((start, start + split[r]))
    return out


def rank_profiles(profile: Profile, spec: ShardSpec, plan: ShardingFile | None = None) -> list[RankView]:
    """Per-rank profiles for ``spec`` (raises ``UnsupportedError`` when mlx-lm cannot shard it that way)."""
    mp = plan_for(profile.mlx_model_type, spec.parallel, plan)
    if spec.parallel == "pipeline":
        ranges = pipeline_ranges(profile.num_layers, spec.ranks, spec.split, mp.pipeline_split,
                                 profile.mlx_model_type)
        return [RankView(r, s, e, _layer_slice(profile, s, e, r, spec.ranks)) for r, (s, e) in enumerate(ranges)]
    tp = _tensor_profile(profile, mp.tensor, spec.ranks)
    return [RankView(r, 0, profile.num_layers, tp) for r in range(spec.ranks)]


def _layer_slice(p: Profile, start: int, end: int, rank: int, n: int) -> Profile:
    names = p.layer_names[start:end]
    return dataclasses.replace(p, name=f"{p.name} [rank {rank}/{n}: layers {start}-{end - 1}]", num_layers=end - start,
                               sends_output=rank != 0,
                               layer_names=names, layer_types={k: v for k, v in p.layer_types.items() if k in names})


def _div(what: str, value: int | None, n: int, model: str) -> int | None:
    if value is None:
        return None
    if value % n:
        raise UnsupportedError(f"{model}: {what} = {value} does not divide by {n} ranks, so mlx-lm's "
                               "tensor sharding cannot split it evenly")
    return value // n


def _tensor_profile(p: Profile, tp: TensorPlan, n: int) -> Profile:
    if n == 1:
        return p
    who = p.name
    att = tp.caches.attention == "divided"
    state = tp.caches.state == "divided"
    types = {}
    for name, lt in p.layer_types.items():
        entries = []
        for e in lt.entries:
            if e.kind in _ATTENTION and att:
                e = dataclasses.replace(e, n_kv=_div(f"KV heads of layer kind {name!r}", e.n_kv, n, who))
            elif e.kind == "state" and state:
                # the bytes are one rank's; the shape stays the whole model's (which axis mlx-lm splits is not
                # declared), so the peak's state ops keep charging the unsplit dims: the upper side
                e = dataclasses.replace(e, tensors=tuple(
                    StateTensorSpec(t.name, _div(f"state tensor {t.name!r} of {name!r}", t.elements, n, who), t.dtype,
                                    t.shape)
                    for t in e.tensors))
            entries.append(e)
        types[name] = LayerType(lt.name, tuple(entries))
    moe = p.moe
    if moe is not None and moe.moe_intermediate_size:
        moe = moe.model_copy(update={"moe_intermediate_size": _div("moe_intermediate_size", moe.moe_intermediate_size,
                                                                     n, who)})
    if p.num_heads is None:
        raise UnsupportedError(f"{who} has no num_heads, so its tensor-sharded heads are unknown")
    return dataclasses.replace(
        p, name=f"{p.name} [tensor rank of {n}]", tensor_ranks=n,
        num_heads=_div("num_heads (attention heads)", p.num_heads, n, who),
        num_kv_heads=_div("num_kv_heads", p.num_kv_heads, n, who) if att else p.num_kv_heads,
        intermediate_size=_div("intermediate_size", p.intermediate_size, n, who),
        vocab_size=_div("vocab_size", p.vocab_size, n, who) if tp.vocab == "sharded" else p.vocab_size,
        layer_types=types, moe=moe)


__all__ = ["RankView", "ShardSpec", "pipeline_ranges", "rank_profiles"]
