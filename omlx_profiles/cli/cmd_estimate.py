"""``omlx-profiles estimate MODEL --tokens N``: resident KV (exact) for a prompt, per layer."""
from __future__ import annotations

from ..kv.bytes import DEFAULT_QUANTIZED_KV_START, KVQuant
from ..estimate.report import EstimateOptions, build_estimate
from .common import (add_model_args, add_weights_args, count_arg, positive_int_arg, print_json, resolve_model, tokens_arg,
                     weights_of)


def register(sub) -> None:
    p = sub.add_parser(
        "estimate", help="memory for a prompt of N tokens",
        description="Estimate the cache bytes a model holds after a prompt of N tokens (mlx-lm 0.32 rules).",
        epilog="examples:\n  omlx-profiles estimate meta-llama/Llama-3.1-8B-Instruct --tokens 32k\n"
               "  omlx-profiles estimate qwen3-8b --tokens 8192 --kv-bits 8 --json\n"
               "  omlx-profiles estimate --config path/to/config.json --tokens 1000\n"
               "  omlx-profiles estimate mlx-community/Qwen3-8B-4bit --tokens 128k --budget 24GiB\n"
               "  omlx-profiles estimate ~/models/Llama-3.1-8B-Instruct-4bit --tokens 32k   # exact weights\n"
               "exit codes: 0 ok (fits, or no --budget); 1 past the model's context, or does not fit the budget (or cannot be shown to: weights "
               "unknown); 2 usage or input error",
        formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    add_model_args(p)
    p.add_argument("--tokens", required=True, type=tokens_arg, help="prompt tokens (32k = 32768)")
    p.add_argument("--schedule", choices=("generate", "direct"), default="generate",
                   help="generate: mlx-lm generate_step (N-1 in chunks, then 1); direct: one model call")
    p.add_argument("--chunk", type=positive_int_arg, default=2048, help="prefill step size (default 2048)")
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), help="activation/KV dtype (default: the checkpoint's)")
    p.add_argument("--kv-bits", type=int, choices=(2, 3, 4, 5, 6, 8), help="mlx-lm KV quantization bits")
    p.add_argument("--kv-group-size", type=int, choices=(32, 64, 128), default=64)
    p.add_argument("--kv-start", type=count_arg, default=DEFAULT_QUANTIZED_KV_START,
                   help=f"quantized_kv_start (default {DEFAULT_QUANTIZED_KV_START}, mlx-lm's; 0: from the first call)")
    add_weights_args(p)  # --weights-bits, --weights, --reserve
    # prefill peak (issue 5)
    from .common import size_arg

    p.add_argument("--cached", type=count_arg, default=0, metavar="N",
                   help="tokens of the prompt already in the cache (prefix cache): they widen attention, add no KV "
                        "(default 0: none)")
    p.add_argument("--backend", choices=("metal", "cuda", "cpu"),
                   help="MLX backend whose kernels run the prefill (default metal)")
    p.add_argument("--mlx-version", metavar="V", help="MLX version: picks the kernel routes (default: the newest table)")
    from .sharded import add_shard_args, budgets_arg

    p.add_argument("--budget", type=budgets_arg, metavar="SIZE",
                   help="memory budget (e.g. 24GiB): exit 1 when weights + prefill peak exceed it less the reserve; "
                        "with --ranks one per rank (192GiB,128GiB) or one for all")
    add_shard_args(p)
    p.add_argument("--json", action="store_true", help="machine-readable output (stable keys, see README)")
    p.set_defaults(func=run)


def options(args) -> EstimateOptions:
    quant = KVQuant(args.kv_bits, args.kv_group_size, args.kv_start) if args.kv_bits else None
    return EstimateOptions(tokens=args.tokens, schedule=args.schedule, chunk=args.chunk, dtype=args.dtype, quant=quant,
                           cached=getattr(args, "cached", 0) or 0, backend=getattr(args, "backend", None),
                           mlx_version=getattr(args, "mlx_version", None), budget=getattr(args, "budget", None),
                           reserve=getattr(args, "reserve", None), weights_bits=getattr(args, "weights_bits", None))


def run(args) -> int:
    from dataclasses import replace

    from .sharded import run_estimate, single_budget, wants_sharding

    if wants_sharding(args):
        return run_estimate(args)
    single_budget(args)
    res = resolve_model(args)
    weights = weights_of(args, res)  # exact from a local dir's safetensors headers, else the profile
    est = build_estimate(res, replace(options(args), weights=weights))
    est["weights"] = weights.as_dict()
    if args.json:
        print_json(est)
    else:
        from .render import render_estimate

        print(render_estimate(est))
    # with a budget, exit 0 only when the request is shown to fit (unknown weights cannot show it); a
    # prompt past the model's context is exit 1 with or without one (the verdict said PAST, the exit said ok)
    if est.get("past_context") or (getattr(args, "budget", None) is not None and est.get("fits") is not True):
        return 1
    return 0
