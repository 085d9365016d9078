"""``--ranks N --parallel tensor|pipeline [--split a,b,...]`` for estimate, fit and chart.

The flags are added by ``add_shard_args``; when ``--ranks`` is given the command hands over to
``run_estimate`` / ``run_fit`` / ``chart_series`` here, which turn the arguments into plain values
(``sharding.ShardSpec``, ``sharding.ShardedOptions``) and print one column per rank. ``--budget`` takes
one size for every rank or one per rank (``192GiB,128GiB``) for machines of different sizes.
"""
from __future__ import annotations

import argparse

from ..errors import InputError
from ..units import format_bytes, parse_size

PARALLEL = ("tensor", "pipeline")


def budgets_arg(text: str) -> tuple[int, ...]:
    """``64GiB`` or ``192GiB,128GiB`` (one per rank)."""
    parts = [s.strip() for s in str(text).split(",")]
    if not parts or any(not s for s in parts):
        raise argparse.ArgumentTypeError(f"expected SIZE or SIZE,SIZE,... (one per rank), got {text!r}")
    try:
        return tuple(parse_size(s, "budget") for s in parts)
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _ascii_int(text: str) -> int:
    """``int()`` also reads ``١``, ``３`` and ``1_000``; counts on the command line are ASCII digits (as in
    ``units``), and at most 9 of them."""
    t = text.strip()
    if not (t.isascii() and t.isdigit() and len(t) <= 9):
        raise ValueError(text)
    return int(t)


def split_arg(text: str) -> tuple[int, ...]:
    try:
        out = tuple(_ascii_int(s) for s in str(text).split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected layer counts per rank like 31,30, got {text!r}") from None
    if any(v <= 0 for v in out):
        raise argparse.ArgumentTypeError(f"layer counts must be positive, got {text!r}")
    return out


def ranks_arg(text: str) -> int:
    try:
        n = _ascii_int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of ranks, got {text!r}") from None
    if not 1 <= n <= 1024:
        raise argparse.ArgumentTypeError(f"--ranks must be from 1 to 1024, got {n}")
    return n


def add_shard_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("several machines (mlx.distributed, mlx-lm sharded_load)")
    g.add_argument("--ranks", type=ranks_arg, metavar="N", help="number of processes (machines) the model is sharded over")
    g.add_argument("--parallel", choices=PARALLEL,
                   help="tensor: model.shard(group) (heads and MLP split); pipeline: model.model.pipeline(group) "
                        "(layers split); required with --ranks")
    g.add_argument("--split", type=split_arg, metavar="A,B,...",
                   help="pipeline layers per rank (rank 0 first; rank 0 runs the last layers); default mlx-lm's even split")


def single_budget(args) -> None:
    """Without ``--ranks``, ``--budget`` must be one size: unwrap it for the single-machine code."""
    b = getattr(args, "budget", None)
    if isinstance(b, tuple):
        if len(b) > 1:
            raise InputError(f"--budget gives {len(b)} sizes: several budgets need --ranks N --parallel ...")
        args.budget = b[0]


def wants_sharding(args) -> bool:
    if getattr(args, "ranks", None) is None:
        for flag in ("parallel", "split"):
            if getattr(args, flag, None) is not None:
                raise InputError(f"--{flag} needs --ranks N")
        return False
    if getattr(args, "parallel", None) is None:
        raise InputError("--ranks needs --parallel tensor or --parallel pipeline")
    return True


def _options(args, budgets: tuple[int, ...]):
    from ..estimate.report import DEFAULT_BACKEND
    from ..sharding import ShardedOptions, ShardSpec

    spec = ShardSpec(args.ranks, args.parallel, getattr(args, "split", None))
    if len(budgets) > 1 and len(budgets) != spec.ranks:
        raise InputError(f"--budget gives {len(budgets)} sizes for {spec.ranks} ranks: give one, or one per rank")
    if getattr(args, "kv_bits", None):
        raise InputError("--kv-bits with --ranks is not modelled yet (the per-rank peak with quantized KV)")
    return ShardedOptions(spec, chunk=args.chunk, cached=getattr(args, "cached", 0) or 0,
                          schedule=getattr(args, "schedule", "generate"), backend=args.backend or DEFAULT_BACKEND,
                          mlx_version=getattr(args, "mlx_version", None), dtype=getattr(args, "dtype", None),
                          budgets=budgets, reserve=getattr(args, "reserve", None))


def _weights(res, args, opts):
    from ..estimate.safetensors import read_checkpoint, weight_files
    from ..sharding import rank_profiles, rank_weights
    from .common import model_dir as local_dir, weights_of

    views = rank_profiles(res.profile, opts.spec)
    d = local_dir(args, res)
    if d is not None and getattr(args, "weights_size", None) is None and weight_files(d):
        return views, rank_weights(res.profile, opts.spec, views, checkpoint=read_checkpoint(d))
    return views, rank_weights(res.profile, opts.spec, views, whole=weights_of(args, res))


def _budgets(args) -> tuple[int, ...]:
    b = getattr(args, "budget", None)
    return () if b is None else (b if isinstance(b, tuple) else (b,))


def run_estimate(args) -> int:
    from .common import print_json, resolve_model

    res = resolve_model(args)
    opts = _options(args, _budgets(args))
    views, weights = _weights(res, args, opts)
    from ..sharding import sharded_estimate

    est = _past_context(res, sharded_estimate(res, opts, args.tokens, weights, views))
    if args.json:
        print_json(est)
    else:
        print(render_sharded(est))
    if est.get("past_context") or (opts.budgets and est["fits"] is not True):  # as the single-machine estimate
        return 1
    return 0


def _past_context(res, est: dict) -> dict:
    """The single-machine rule (``report.past_context``) on a sharded estimate: a prompt past the model's
    context is never a "fits" verdict, whatever the ranks hold."""
    from ..estimate.report import past_context

    why = past_context(res.profile, est.get("tokens") or 0)
    est["past_context"] = why
    budgeted = est.get("fits") is not None or any(r.get("budget_bytes") is not None for r in est.get("per_rank", ()))
    if why and budgeted:  # as report.build_estimate: with a budget, never "fits", even with weights unknown
        est["fits"] = False
    return est


def run_fit(args) -> int:
    from ..sharding import sharded_fit
    from .common import print_json, resolve_model

    from ..estimate.fit import cached_within_context

    res = resolve_model(args)
    opts = _options(args, _budgets(args))
    cached_within_context(res, opts.cached)
    views, weights = _weights(res, args, opts)
    from ..estimate import fit as fit_module
    from ..estimate.fit import search_limit
    from ..kv.work import WorkExceeded, work_limit

    # the headline never passes the model's context: search to it first; only if every rank holds it, how far
    # memory alone goes (information) within a work bound, as the single fit (estimate/fit.memory_beyond): the
    # search to 4 x the context on CUDA was refused by the replay budget or ran for tens of seconds
    mc = res.profile.max_context
    full = search_limit(mc, opts.chunk)
    fit = sharded_fit(res, opts, weights, views, limit=min(mc, full) if mc else None)
    fit["memory_max_tokens"], fit["memory_max_tokens_exact"] = fit["max_tokens"], True
    if mc and fit["max_tokens"] and fit["max_tokens"] >= mc and full > mc:
        fit["memory_max_tokens_exact"] = False
        try:
            with work_limit(fit_module.PAST_CONTEXT_CALLS) as box:
                more = sharded_fit(res, opts, weights, views, limit=full, breakdowns=False)
            fit["memory_max_tokens"], fit["memory_max_tokens_exact"] = more["max_tokens"], True
        except WorkExceeded as e:
            if e.box is not box:
                raise
    if args.json:
        print_json(fit)
    else:
        print(render_sharded_fit(fit))
    return 0 if fit["max_tokens"] else 1


def chart_series(res, args) -> list:
    """One chart panel per rank: its weights, KV at the peak and transient (+ communication) per length."""
    from ..estimate.estimator import Estimator
    from ..peak.prefill import Request
    from ..kv.replay import STEP
    from ..sharding import sharded_fit
    from ..sharding.report import comm_bytes
    from ..estimate.fit import Series

    budgets = _budgets(args)
    if len(budgets) > 1:
        raise InputError("chart draws one budget line: give one --budget for every rank")
    opts = _options(args, budgets)
    views, weights = _weights(res, args, opts)
    if any(w.bytes is None for w in weights):
        raise InputError(f"weights of {res.query!r} are unknown ({weights[0].reason}); the chart needs them: "
                         "pass --weights SIZE if you know it")
    from ..estimate.fit import POINT_LAYERS

    # Bounded as the single-model chart is: ranks that hold the same layers (every rank of --parallel
    # tensor) are replayed once, and the points scale down with the layers replayed in all (never below
    # 24). 64 tensor ranks of a 256-layer model replayed 64 x 160 points: minutes of CPU.
    from ..sharding.report import replay_key

    distinct = {replay_key(v.profile): v.profile for v in views}
    layers = sum(len(p.layer_names) for p in distinct.values())
    n, top, lo = min(args.points, max(24, POINT_LAYERS // max(1, layers))), args.max_tokens, opts.cached + 1
    xs = sorted({max(lo, (top * i // n) // STEP * STEP) for i in range(1, n + 1)} | {lo, top})
    # the budget marker within the axis or the model's context (as the single chart's): past it the search is
    # fit's question, and on CUDA it was refused by the replay budget
    fit = (sharded_fit(res, opts, weights, views, limit=max(args.max_tokens, res.profile.max_context or 0),
                       breakdowns=False) if budgets else None)
    from ..units import DTYPE_BYTES

    from ..estimate.fit import basis_notes, sample_points

    # the reported (enveloped) total, as the single chart and the sharded estimate: the raw replay is not
    # monotone after a prefix on CUDA, and drew a rank under what `estimate --ranks` prints
    estimators = {key: Estimator(p) for key, p in distinct.items()}

    def at(t: int) -> dict:
        return {key: e.prefill_peak(Request(t, cached=opts.cached, chunk=opts.chunk), backend=opts.backend,
                                    mlx_version=opts.mlx_version) for key, e in estimators.items()}

    sampled = sample_points(xs, at)  # within the chart's seconds (estimate/fit.CHART_SECONDS), coarse to fine
    xs = [t for t, _ in sampled]
    peaks = {key: [row[key] for _, row in sampled] for key in distinct}
    out = []
    for v, w in zip(views, weights):
        ws, kv, tr = [], [], []
        act = DTYPE_BYTES[opts.dtype or v.profile.dtype]
        key = replay_key(v.profile)
        for b in peaks[key]:
            k = b.held_before_bytes + b.terms.get("kv_resident", 0) + b.terms.get("kv_growth", 0)
            c = comm_bytes(v, opts.spec, b.peak_q_len, res.profile.hidden_size, act)
            ws.append(w.bytes)
            kv.append(k)
            tr.append(b.held_before_bytes + b.peak_bytes + c - k)
        mt = fit["max_tokens_per_rank"][v.rank] if fit else None
        label = f"{res.query} rank {v.rank}/{opts.spec.ranks} ({opts.spec.parallel}, layers {v.start}-{v.end - 1})"
        out.append(Series(label, xs, ws, kv, tr, f"weights {format_bytes(w.bytes)} ({w.label})", mt,
                          res.profile.max_context, notes=basis_notes(peaks[key])))
    from ..estimate.budget import default_reserve

    args.budget = budgets[0] if budgets else None
    args.reserve_bytes = None if args.budget is None else (
        opts.reserve if opts.reserve is not None else default_reserve(args.budget))
    return out


# -- rendering: one column per rank ------------------------------------------------------------------
def _rows(per: list[dict]) -> list:
    def col(key):
        return [format_bytes(r[key]) if r[key] is not None else "unknown" for r in per]

    rows = [["layers"] + [f"{r['layers'][0]}-{r['layers'][1] - 1}" for r in per],
            ["weights"] + [f"{format_bytes(r['weights_bytes'])} ({r['weights']['label']})"
                           if r["weights_bytes"] is not None else "unknown" for r in per],
            ["resident KV after the prompt"] + col("kv_bytes"),
            ["held before (prefix KV)"] + col("held_before_bytes"),
            ["prefill peak (over held)"] + col("peak_bytes"),
            ["prefill peak basis"] + [str(r.get("peak_basis") or "unknown") for r in per],
            ["communication buffers"] + col("comm_bytes"),
            None,
            ["total"] + col("total_bytes")]
    if any(r["budget_bytes"] is not None for r in per):
        rows += [["usable (budget - reserve)"] + [format_bytes(r["usable_bytes"]) for r in per],
                 ["headroom"] + [format_bytes(r["headroom_bytes"]) if r["headroom_bytes"] is not None else "unknown"
                                 for r in per],
                 ["fits"] + [{True: "yes", False: "NO", None: "unknown"}[r["fits"]] for r in per]]
    return rows


def render_sharded(est: dict) -> str:
    from .render import table

    per = est["per_rank"]
    head = (f"{est['model']} -> {est['variant']} ({est['mlx_model_type']}), {est['ranks']} ranks, "
            f"{est['parallel']} parallel (mlx-lm {est['mlx_lm']})\n"
            f"  {est['tokens']:,} tokens, chunk {est['chunk']}, backend {est['backend']}")
    out = [head, "", table(_rows(per), ["per rank"] + [f"rank {r['rank']}" for r in per])]
    notes = []
    for r in per:
        if r["weights"]["reason"]:
            notes.append(f"  rank {r['rank']} weights: {r['weights']['reason']}")
            break
    # what each rank's total rests on (peak/basis.py), once per distinct line: ranks of one model share it
    from .render import basis_notes, wrap

    lines: dict[str, list[int]] = {}
    for r in per:
        for line in basis_notes(r):
            lines.setdefault(line, []).append(r["rank"])
    for line, ranks in lines.items():
        who = "every rank" if len(ranks) == len(per) else "rank" + ("s " if len(ranks) > 1 else " ") + \
            ", ".join(map(str, ranks))
        notes.append(wrap(f"{who}: {line}"))
    if est["parallel"] == "pipeline":
        notes.append("  pipeline: rank 0 runs the last layers; every rank keeps the embeddings, final norm and head")
    if est.get("past_context"):
        notes.append(f"verdict: PAST THE MODEL'S CONTEXT - {est['past_context']}")
    elif est["fits"] is not None:
        notes.append("fits on every rank" if est["fits"] else
                     "does NOT fit on rank(s) " + ", ".join(str(r["rank"]) for r in per if r["fits"] is False))
    return "\n".join(out + ([""] + notes if notes else []))


def render_sharded_fit(fit: dict) -> str:
    out = [f"{fit['model']} -> {fit['variant']} ({fit['mlx_model_type']}), {fit['ranks']} ranks, "
           f"{fit['parallel']} parallel",
           "  budgets: " + ", ".join(f"rank {i} {format_bytes(b)}" for i, b in enumerate(fit["budgets"])),
           "  longest context per rank: " + ", ".join(f"rank {i} {t:,}" for i, t in
                                                      enumerate(fit["max_tokens_per_rank"])), ""]
    if not fit["max_tokens"]:
        out.append(f"does not fit at any context: rank {fit['binding_rank']} cannot hold even a "
                   f"{fit['cached'] + 1}-token prompt")
    else:
        mem = fit.get("memory_max_tokens") or fit["max_tokens"]
        if not fit.get("memory_max_tokens_exact", True):
            from .render import PAST_CONTEXT_CUT

            out.append(f"longest context every rank holds: {fit['max_tokens']:,} tokens (the model's max_context; "
                       f"how far memory alone would go was not searched: {PAST_CONTEXT_CUT})")
        elif mem > fit["max_tokens"]:
            out.append(f"longest context every rank holds: {fit['max_tokens']:,} tokens (the model's max_context; "
                       f"memory alone would allow {mem:,}, rank {fit['binding_rank']} binds)")
        else:
            out.append(f"longest context every rank holds: {fit['max_tokens']:,} tokens (rank {fit['binding_rank']} "
                       "binds)")
    out.append("")
    out.append(render_sharded(fit["at_max"]))
    return "\n".join(out)
