"""``omlx-profiles fit MODEL --budget SIZE``: the longest prompt whose prefill peak fits the budget.

The answer is ``Estimator.max_tokens`` (the inverse of the total the estimate prints), a multiple of
the KV cache's 256-token allocation step, checked here both ways: the total at ``max_tokens`` is within
the usable memory and the total one step further is not. The breakdown printed is the same
``build_estimate`` that ``estimate --tokens max_tokens`` prints, so the two commands cannot disagree.

The reserve kept free inside the budget defaults to ``512 MiB + 5%`` of it; ``omlx_profiles.budget``
says why.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from ..budget import default_reserve
from ..errors import InputError
from ..rows import STEP
from ..units import format_bytes
from .common import add_model_args, positive_int_arg, print_json, size_arg, tokens_arg

WEIGHT_BITS = (2, 3, 4, 5, 6, 8, 16)


def add_weights_args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--weights-bits", type=int, choices=WEIGHT_BITS, metavar="BITS",
                   help="weights quantized to BITS (2-8; 16 = bf16) instead of what the model id / checkpoint says")
    g.add_argument("--weights", type=size_arg, metavar="SIZE", dest="weights_size",
                   help="the weights' size as you know it (e.g. 4.5GB), when the profile has no parameter count")
    p.add_argument("--reserve", type=size_arg, metavar="SIZE",
                   help="memory kept free inside the budget (default 512MiB + 5%% of the budget: "
                        "MLX's cache-GC threshold and the runtime; see README)")


def add_request_args(p: argparse.ArgumentParser) -> None:
    """The request shape shared by fit and chart (estimate has the same flags)."""
    p.add_argument("--chunk", type=positive_int_arg, default=2048, help="prefill step size (default 2048, mlx-lm's)")
    p.add_argument("--cached", type=tokens_arg, default=0, metavar="N",
                   help="tokens already in the cache (prefix cache): widen attention, add no KV (default 0)")
    p.add_argument("--backend", choices=("metal", "cuda", "cpu"), help="MLX backend whose kernels run the prefill")
    p.add_argument("--mlx-version", metavar="V", help="MLX version (kernel routes change between versions)")
    add_weights_args(p)


def register(sub) -> None:
    p = sub.add_parser(
        "fit", help="longest context that fits a memory budget",
        description="Find the longest prompt whose prefill peak (weights + KV + transient) fits the budget "
                    "less the reserve, rounded down to the KV cache's 256-token step, and show the breakdown "
                    "there.",
        epilog="examples:\n"
               "  omlx-profiles fit meta-llama/Llama-3.1-8B-Instruct --budget 64GiB\n"
               "  omlx-profiles fit mlx-community/Qwen3-30B-A3B-4bit --budget 48G --reserve 2GiB --json\n"
               "  omlx-profiles fit ~/models/my-model --budget 24GiB --backend metal\n"
               "exit codes: 0 a context fits; 1 nothing fits (the weights alone exceed the budget); "
               "2 usage or input error",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p)
    from .sharded import add_shard_args, budgets_arg

    p.add_argument("--budget", type=budgets_arg, required=True, metavar="SIZE",
                   help="memory MLX may use, e.g. 64GiB (on a Mac: the GPU working set, not the RAM size); "
                        "with --ranks one per rank (192GiB,128GiB) or one for all")
    add_request_args(p)
    add_shard_args(p)
    p.add_argument("--json", action="store_true", help="machine-readable output (max_tokens, at_max, next)")
    p.set_defaults(func=run)


# ----------------------------------------------------------------------------------------------
def local_dir(args, res) -> Path | None:
    """The local model directory MODEL (or --config) points at, for exact weights from safetensors."""
    for cand in (getattr(args, "config", None), getattr(args, "model", None) if isinstance(getattr(args, "model", None), str) else None,
                 res.query):
        if not cand:
            continue
        p = Path(cand).expanduser()
        if p.is_file() and p.name.endswith(".json"):
            p = p.parent
        if p.is_dir():
            return p
    return None


def resolve_weights(res, args):
    from ..weights import GIVEN, WeightsInfo, estimate_weights

    given = getattr(args, "weights_size", None)
    if given is not None:
        return WeightsInfo(given, False, GIVEN, f"as given on the command line with --weights ({given:,} bytes)")
    return estimate_weights(res, bits=getattr(args, "weights_bits", None), model_dir=local_dir(args, res))


def reserve_for(args, budget: int | None) -> int | None:
    if budget is None:
        return None
    r = args.reserve if getattr(args, "reserve", None) is not None else default_reserve(budget)
    if r > budget:
        raise InputError(f"--reserve {r} bytes is larger than the budget ({budget} bytes)")
    return r


def _estimator(res):
    from ..estimator import Estimator

    return Estimator(res.profile)


def backend_of(args) -> str:
    """The backend the estimate uses when ``--backend`` is not given (report.DEFAULT_BACKEND: metal)."""
    from ..report import DEFAULT_BACKEND

    return args.backend or DEFAULT_BACKEND


def estimate_at(res, tokens: int, args, weights, budget: int | None, reserve: int | None) -> dict:
    """``estimate --tokens N`` for this request, as its JSON dict (the one code path for all commands)."""
    from ..report import EstimateOptions, build_estimate

    opts = EstimateOptions(tokens=tokens, chunk=args.chunk, cached=args.cached, backend=backend_of(args),
                           mlx_version=args.mlx_version, budget=budget, reserve=reserve,
                           weights_bits=getattr(args, "weights_bits", None), weights=weights)
    out = build_estimate(res, opts)
    out["weights"] = weights.as_dict()
    return out


def longest(est, budget: int, weights_bytes: int, reserve: int, args, limit: int | None = None) -> int:
    """``Estimator.max_tokens`` rounded down to the KV cache's 256-token allocation step (0: nothing fits).

    Rounding down keeps the answer inside the budget (the total only grows with the prompt) and quotes
    it the way contexts are quoted; the step above it does not fit, which ``compute_fit`` checks.
    """
    kw = dict(weights_bytes=weights_bytes, reserve=reserve, cached=args.cached, chunk=args.chunk,
              backend=backend_of(args), mlx_version=args.mlx_version)
    if limit is not None:
        kw["limit"] = limit
    mt = est.max_tokens(budget, **kw)
    if mt >= STEP:
        mt = mt // STEP * STEP
    return mt if mt > args.cached else 0


def compute_fit(res, args, budget: int) -> dict:
    weights = resolve_weights(res, args)
    reserve = reserve_for(args, budget)
    max_ctx = res.profile.max_context
    base = {
        "model": res.query, "variant": res.profile.name, "family": res.profile.family,
        "budget_bytes": budget, "reserve_bytes": reserve, "usable_bytes": budget - reserve,
        "chunk": args.chunk, "cached": args.cached, "backend": backend_of(args), "mlx_version": args.mlx_version,
        "step": STEP, "max_context": max_ctx,
        "weights": weights.as_dict(), "weights_bytes": weights.bytes,
    }
    if weights.bytes is None:
        raise InputError(f"weights of {res.query!r} are unknown ({weights.reason}); fit needs them: "
                         "pass --weights SIZE if you know it")
    est = _estimator(res)
    # search past max_context (memory is the question here), then say which limit binds
    mt = longest(est, budget, weights.bytes, reserve, args, limit=max(4 * (max_ctx or 0), 1 << 22))
    if not mt:
        at0 = estimate_at(res, args.cached + 1, args, weights, budget, reserve)
        return {**base, "max_tokens": None, "limited_by": "memory", "at_max": at0, "next": None,
                "reason": f"even a {args.cached + 1}-token prompt needs {format_bytes(at0.get('total_bytes'))} "
                          f"(weights {format_bytes(weights.bytes)}) > {format_bytes(budget - reserve)} usable"}
    at = estimate_at(res, mt, args, weights, budget, reserve)
    nxt = estimate_at(res, mt + STEP, args, weights, budget, reserve)
    return {**base, "max_tokens": mt,
            "limited_by": "max_context" if (max_ctx and mt >= max_ctx) else "memory",
            "at_max": at,
            "next": {"tokens": mt + STEP, "total_bytes": nxt.get("total_bytes"), "fits": nxt.get("fits")},
            "reason": None}


def run(args) -> int:
    from ..render import render_fit
    from .common import resolve_model
    from .sharded import run_fit, single_budget, wants_sharding

    if wants_sharding(args):
        return run_fit(args)
    single_budget(args)
    res = resolve_model(args)
    fit = compute_fit(res, args, args.budget)
    if args.json:
        print_json(fit)
    else:
        print(render_fit(fit))
    return 0 if fit["max_tokens"] else 1


# ----------------------------------------------------------------------------------------------
def series_for(res, weights, args):
    """The chart's curve for one model: weights / KV at the peak / transient at evenly spaced lengths.

    ``total = weights + held before + peak``; the KV band is the cache at the peak call (prefix + the
    breakdown's ``kv_resident`` and ``kv_growth``), the transient band the rest of the peak.
    """
    from ..peak.prefill import Request
    from ..units import format_bytes
    from .cmd_chart import Series

    if weights.bytes is None:
        raise InputError(f"weights of {res.query!r} are unknown ({weights.reason}); the chart needs them: "
                         "pass --weights SIZE if you know it")
    est = _estimator(res)
    n = args.points
    top = args.max_tokens
    lo = args.cached + 1
    xs = sorted({max(lo, (top * i // n) // STEP * STEP) for i in range(1, n + 1)} | {lo, top})
    backend = backend_of(args)
    ws, kv, tr = [], [], []
    for t in xs:
        b = est.prefill_peak(Request(t, cached=args.cached, chunk=args.chunk), backend=backend,
                             mlx_version=args.mlx_version)
        k = b.held_before_bytes + b.terms.get("kv_resident", 0) + b.terms.get("kv_growth", 0)
        ws.append(weights.bytes)
        kv.append(k)
        tr.append(b.held_before_bytes + b.peak_bytes - k)
    budget = args.budget
    reserve = reserve_for(args, budget)
    mt = None
    if budget is not None:
        mt = longest(est, budget, weights.bytes, reserve, args, limit=max(top, res.profile.max_context or 0))
    args.reserve_bytes = reserve
    label = f"weights {format_bytes(weights.bytes)} ({weights.label}"
    label += f", {weights.bits}-bit)" if weights.bits and weights.bits < 16 else ")"
    return Series(res.query, xs, ws, kv, tr, label, mt, res.profile.max_context)
