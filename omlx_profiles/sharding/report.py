"""Per-rank estimate and fit of a sharded model: one column per rank, a verdict per rank.

Each rank's total is ``weights (its share) + held before (its prefix KV) + prefill peak (its profile)
+ communication``. The communication term is the buffer a collective allocates on top of what one
process would: tensor parallelism ends every attention and MLP block with an ``all_sum`` whose output is
a fresh ``[q_len, hidden]`` array; in a pipeline every rank but the last receives the previous stage's
hidden state (``recv_like``: ``[q_len, hidden]``). The pipeline's ``send`` returns its input (no new
buffer) and its final ``all_gather`` runs only at the last token (only the caches are evaluated in a
prefill chunk), where it is ``N x hidden``: negligible, and covered because the term is charged at the
peak call's ``q_len``. The term is a bound (one buffer alive at the peak), not a measurement.

``fit`` is the longest prompt every rank can hold: the minimum over the ranks of the single-rank answer
(``Estimator.max_tokens`` on the rank's profile with its weights and communication buffer as the fixed
part), rounded down to the KV cache's 256-token step.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..estimate.budget import resolve_reserve
from ..units import DTYPE_BYTES
from ..errors import InputError
from ..estimate.estimator import Estimator
from ..estimate.fit import search_limit
from ..kv import kv_report
from ..peak.prefill import Request
from ..kv.replay import STEP
from .plan import load_plan
from .ranks import RankView, ShardSpec, rank_profiles
from .weights import RankWeights, approximate, from_headers


@dataclass(frozen=True)
class ShardedOptions:
    """The request, as plain values. ``budgets``: one per rank, or one for every rank (or empty)."""

    spec: ShardSpec
    chunk: int = 2048
    cached: int = 0
    schedule: str = "generate"
    backend: str = "metal"
    mlx_version: str | None = None
    dtype: str | None = None
    budgets: tuple[int, ...] = ()
    reserve: int | None = None
    nax: bool = False

    def budget_of(self, rank: int) -> int | None:
        if not self.budgets:
            return None
        if len(self.budgets) == 1:
            return self.budgets[0]
        if len(self.budgets) != self.spec.ranks:
            raise InputError(f"--budget gives {len(self.budgets)} sizes for {self.spec.ranks} ranks: give one size "
                             "for every rank, or one per rank")
        return self.budgets[rank]


def rank_weights(profile, spec: ShardSpec, views: list[RankView], *, checkpoint=None, whole=None) -> list[RankWeights]:
    """Weights per rank: exact from ``checkpoint`` (``CheckpointHeaders``), else ``whole`` split by share."""
    tp = None
    if spec.parallel == "tensor":
        tp = load_plan().modules[profile.mlx_model_type].tensor
    if checkpoint is not None:
        return from_headers(checkpoint, views, spec, tp, profile.num_layers)
    total = getattr(whole, "bytes", None)
    why = getattr(whole, "reason", None) or getattr(whole, "source", "") or "unknown"
    return approximate(total, why, views, spec, _shared_bytes(profile, whole), profile.num_layers)


def _shared_bytes(profile, whole) -> int:
    """Bytes every rank holds whole: embedding (+ untied head) at the whole model's average bytes per
    parameter, plus the small tensors ``shard()`` leaves unsplit in every layer -- norms (input, post-attention,
    q/k: at most 4 x hidden) and the MoE router (experts x hidden) -- at 4 bytes each. Those are fp32 at
    most and mlx-lm keeps them out of the 4-bit groups, so averaging them into the split part put a rank
    ~13 MB under the measured weights on Qwen3-30B-A3B (two H200s, issue 17); counted whole on every rank,
    for every layer, they can only be over."""
    w = getattr(profile, "weights", None)
    params = getattr(w, "embedding_params", None)
    if not params and profile.vocab_size and profile.hidden_size:
        params = profile.vocab_size * profile.hidden_size * (1 if profile.tie_word_embeddings else 2)
    params = params or 0
    total, total_params = getattr(whole, "bytes", None), getattr(whole, "params", None)
    if total and total_params:
        embed = -(-params * total // total_params)
    else:
        embed = params * DTYPE_BYTES.get(profile.dtype, 2)
    hidden = profile.hidden_size or 0
    experts = getattr(getattr(profile, "moe", None), "num_experts", 0) or 0
    small = profile.num_layers * (4 * hidden + experts * hidden) + hidden
    return embed + 4 * small


def comm_bytes(view: RankView, spec: ShardSpec, q_len: int, hidden: int | None, act: int) -> int:
    """The collective's output buffer alive at the peak call (see the module docstring)."""
    if spec.ranks == 1 or not hidden:
        return 0
    if spec.parallel == "pipeline" and view.rank == spec.ranks - 1:
        return 0  # the first stage only sends
    return q_len * hidden * act


def _act(profile, dtype: str | None) -> int:
    return DTYPE_BYTES[dtype or profile.dtype]


def _verdict(total: int | None, budget: int | None, reserve: int | None) -> dict:
    # the reserve through the one check (estimate.budget.resolve_reserve: a count, 0 .. 1 PiB), as sharded_fit's
    # and the single-machine verdict's: a reserve of -1 here answered "usable = budget + 1", 1.5 a float
    # (hostile pass 8: sharded_estimate answered what sharded_fit and Estimator.fits refuse)
    if budget is None:
        return {"budget_bytes": None, "reserve_bytes": None if reserve is None else resolve_reserve(0, reserve),
                "usable_bytes": None, "fits": None, "headroom_bytes": None}
    r = resolve_reserve(budget, reserve)
    if r > budget:
        raise InputError(f"--reserve {r} bytes is larger than the budget ({budget} bytes)")
    usable = budget - r
    return {"budget_bytes": budget, "reserve_bytes": r, "usable_bytes": usable,
            "fits": None if total is None else total <= usable,
            "headroom_bytes": None if total is None else usable - total}


def _head(res, opts: ShardedOptions, views: list[RankView]) -> dict:
    p = res.profile
    return {"model": res.query, "variant": p.name, "family": p.family, "mlx_model_type": p.mlx_model_type,
            "parallel": opts.spec.parallel, "ranks": opts.spec.ranks,
            "layers_per_rank": [v.end - v.start for v in views], "chunk": opts.chunk, "cached": opts.cached,
            "schedule": opts.schedule, "backend": opts.backend, "mlx_version": opts.mlx_version,
            "mlx_lm": load_plan().mlx_lm}


def replay_key(profile) -> str:
    """What a rank's replay depends on: its profile less its name. Pipeline ranks holding as many layers of
    the same kinds replay the same prompt (64 pipeline ranks of qwen2.5-72b are 2 shapes, and were 64
    searches: refused by the work budget after 2.6 s)."""
    import dataclasses

    return repr(dataclasses.replace(profile, name=""))


def rank_estimate(view: RankView, opts: ShardedOptions, tokens: int, w: RankWeights, hidden: int | None,
                  memo: dict | None = None) -> dict:
    """One rank's estimate; ``memo`` shares the replay between ranks holding the same layers (every rank
    of --parallel tensor: 64 ranks replayed the same prompt 64 times).

    The peak is ``Estimator.prefill_peak``'s, the reported total (the replay raised to its monotone envelope)
    that the single-machine estimate prints and that ``sharded_fit`` searches on: the raw replay put a rank of
    gpt-oss-20b on CUDA up to 10% under it after a prefix, and not monotone in the prompt."""
    p = view.profile
    key = replay_key(p)
    if memo is None or key not in memo:
        rep = kv_report(p, tokens, schedule=opts.schedule, chunk=opts.chunk, dtype=opts.dtype)
        bd = Estimator(p).prefill_peak(Request(tokens, cached=opts.cached, chunk=opts.chunk, schedule=opts.schedule),
                                       backend=opts.backend, mlx_version=opts.mlx_version, dtype=opts.dtype,
                                       nax=opts.nax)
        if memo is None:
            memo = {}
        memo[key] = (rep, bd)
    rep, bd = memo[key]
    comm = comm_bytes(view, opts.spec, bd.peak_q_len, hidden, _act(p, opts.dtype))
    total = None if w.bytes is None else w.bytes + bd.held_before_bytes + bd.peak_bytes + comm
    out = {"rank": view.rank, "layers": [view.start, view.end], "kv_bytes": rep.total,
           "weights_bytes": w.bytes, "weights": w.as_dict(), "held_before_bytes": bd.held_before_bytes,
           "peak_bytes": bd.peak_bytes, "peak_basis": bd.peak_basis, "comm_bytes": comm, "total_bytes": total,
           "breakdown": bd.as_dict()}
    out.update(_verdict(total, opts.budget_of(view.rank), opts.reserve))
    return out


def sharded_estimate(res, opts: ShardedOptions, tokens: int, weights: list[RankWeights],
                     views: list[RankView] | None = None) -> dict:
    """The per-rank estimate at ``tokens`` (``res``: a registry ``Resolution``)."""
    views = views or rank_profiles(res.profile, opts.spec)
    memo: dict = {}
    per = [rank_estimate(v, opts, tokens, w, res.profile.hidden_size, memo) for v, w in zip(views, weights)]
    fits = [r["fits"] for r in per]
    out = _head(res, opts, views)
    out.update({"tokens": tokens, "per_rank": per,
                "fits": None if any(f is None for f in fits) else all(fits),
                "resolution": res.as_dict() if hasattr(res, "as_dict") else None})
    return out


def sharded_fit(res, opts: ShardedOptions, weights: list[RankWeights], views: list[RankView] | None = None, *,
                limit: int | None = None, breakdowns: bool = True) -> dict:
    """The longest prompt every rank holds within its budget (the binding rank named), and the estimate there.

    ``limit``: search no further (default ``search_limit``: past the model's context); a rank that holds the
    limit answers the limit as given (not rounded to the cache step: the CLI asks for the model's context
    first). ``breakdowns`` False: no estimate at the answer and one step further (``at_max`` / ``next``
    None), for a search whose answer alone is wanted (how far memory alone goes)."""
    views = views or rank_profiles(res.profile, opts.spec)
    if not opts.budgets:
        raise InputError("fit needs --budget (one size, or one per rank)")
    unknown = [v.rank for v, w in zip(views, weights) if w.bytes is None]
    if unknown:
        raise InputError(f"weights of rank(s) {unknown} are unknown ({weights[unknown[0]].reason}); fit needs them: "
                         "point MODEL at a local model directory or pass --weights SIZE")
    hidden = res.profile.hidden_size
    # the single fit's search (estimate/fit.py): up to 4 x max_context but never past the token limit, in
    # growing windows; ranks that hold the same layers with the same weights and budget (every rank of
    # --parallel tensor) are searched once (8 tensor ranks searched 8 times: 2.8 s for an 8B model)
    limit = limit or search_limit(res.profile.max_context, opts.chunk)
    per_rank, seen = [], {}
    for v, w in zip(views, weights):
        budget = opts.budget_of(v.rank)
        reserve = resolve_reserve(budget, opts.reserve)  # the one check, as _verdict and Estimator.fits
        if reserve > budget:
            raise InputError(f"--reserve {reserve} bytes is larger than rank {v.rank}'s budget ({budget} bytes)")
        comm = comm_bytes(v, opts.spec, opts.chunk, hidden, _act(v.profile, opts.dtype))
        key = (replay_key(v.profile), w.bytes + comm, budget, reserve)
        if key not in seen:
            seen[key] = Estimator(v.profile).max_tokens(budget, limit=limit, weights_bytes=w.bytes + comm,
                                                        reserve=reserve, cached=opts.cached, chunk=opts.chunk,
                                                        backend=opts.backend, mlx_version=opts.mlx_version,
                                                        schedule=opts.schedule, dtype=opts.dtype, nax=opts.nax)
        mt = seen[key]
        if STEP <= mt < limit:
            mt = mt // STEP * STEP
        per_rank.append(mt if mt > opts.cached else 0)
    best = min(per_rank)
    binding = per_rank.index(best)
    out = _head(res, opts, views)
    out.update({"budgets": [opts.budget_of(v.rank) for v in views], "max_tokens_per_rank": per_rank,
                "max_tokens": best or None, "binding_rank": binding, "step": STEP,
                "max_context": res.profile.max_context})
    if not breakdowns:
        out["at_max"] = out["next"] = None
        return out
    at = best if best else opts.cached + 1
    out["at_max"] = sharded_estimate(res, opts, at, weights, views)
    nxt = sharded_estimate(res, opts, best + STEP, weights, views) if best else None
    out["next"] = None if nxt is None else {"tokens": best + STEP, "fits": nxt["fits"],
                                           "total_bytes": [r["total_bytes"] for r in nxt["per_rank"]]}
    return out


__all__ = ["ShardedOptions", "comm_bytes", "rank_estimate", "rank_weights", "replay_key", "sharded_estimate",
           "sharded_fit"]
