"""``omlx-profiles fit MODEL --budget SIZE``: the longest prompt whose prefill peak fits the budget.

The arithmetic is ``omlx_profiles.estimate.fit.compute_fit`` (plain values in, the ``--json`` dict out);
this module only turns the flags into those values and prints. The reserve kept free inside the budget
defaults to ``512 MiB + 5%`` of it; ``omlx_profiles.estimate.budget`` says why.
"""
from __future__ import annotations

import argparse

from ..estimate.budget import reserve_for
from ..estimate.fit import compute_fit
from .common import add_model_args, add_request_args, fit_request, print_json, resolve_model, size_arg, weights_of


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


def run(args) -> int:
    from .render import render_fit
    from .sharded import run_fit, single_budget, wants_sharding

    if wants_sharding(args):
        return run_fit(args)
    single_budget(args)
    res = resolve_model(args)
    weights = weights_of(args, res)
    reserve = reserve_for(args.budget, getattr(args, "reserve", None))
    fit = compute_fit(res, fit_request(args), args.budget, weights, reserve)
    if args.json:
        print_json(fit)
    else:
        print(render_fit(fit))
    return 0 if fit["max_tokens"] else 1
