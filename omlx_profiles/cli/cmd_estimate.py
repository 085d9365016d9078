"""``omlx-profiles estimate MODEL --tokens N``: resident KV (exact) for a prompt, per layer."""
from __future__ import annotations

from ..kv import DEFAULT_QUANTIZED_KV_START, KVQuant
from ..report import EstimateOptions, build_estimate
from ..units import format_bytes
from .common import add_model_args, positive_int_arg, print_json, resolve_model, tokens_arg


def register(sub) -> None:
    p = sub.add_parser(
        "estimate", help="memory for a prompt of N tokens",
        description="Estimate the cache bytes a model holds after a prompt of N tokens (mlx-lm 0.32 rules).",
        epilog="examples:\n  omlx-profiles estimate meta-llama/Llama-3.1-8B-Instruct --tokens 32k\n"
               "  omlx-profiles estimate qwen3-8b --tokens 8192 --kv-bits 8 --json\n"
               "  omlx-profiles estimate --config path/to/config.json --tokens 1000",
        formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    add_model_args(p)
    p.add_argument("--tokens", required=True, type=tokens_arg, help="prompt tokens (32k = 32768)")
    p.add_argument("--schedule", choices=("generate", "direct"), default="generate",
                   help="generate: mlx-lm generate_step (N-1 in chunks, then 1); direct: one model call")
    p.add_argument("--chunk", type=positive_int_arg, default=2048, help="prefill step size (default 2048)")
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), help="activation/KV dtype (default: the checkpoint's)")
    p.add_argument("--kv-bits", type=int, choices=(2, 3, 4, 5, 6, 8), help="mlx-lm KV quantization bits")
    p.add_argument("--kv-group-size", type=int, choices=(32, 64, 128), default=64)
    p.add_argument("--kv-start", type=positive_int_arg, default=DEFAULT_QUANTIZED_KV_START,
                   help=f"quantized_kv_start (default {DEFAULT_QUANTIZED_KV_START}, mlx-lm's)")
    p.add_argument("--json", action="store_true", help="machine-readable output (stable keys, see README)")
    p.set_defaults(func=run)


def options(args) -> EstimateOptions:
    quant = KVQuant(args.kv_bits, args.kv_group_size, args.kv_start) if args.kv_bits else None
    return EstimateOptions(tokens=args.tokens, schedule=args.schedule, chunk=args.chunk, dtype=args.dtype, quant=quant)


def run(args) -> int:
    res = resolve_model(args)
    est = build_estimate(res, options(args))
    if args.json:
        print_json(est)
        return 0
    print(f"{est['model']} -> {est['variant']} ({est['family']}), {est['tokens']} tokens, "
          f"{est['schedule']} schedule, chunk {est['chunk']}, {est['dtype']}")
    kinds: dict[str, list[int]] = {}
    for layer in est["layers"]:
        kinds.setdefault(layer["kind"], []).append(layer["bytes"])
    for kind, sizes in kinds.items():
        print(f"  {len(sizes):3d} x {kind:<12} {format_bytes(sum(sizes)):>12}")
    print(f"  resident KV  {format_bytes(est['kv_bytes']):>12}  ({est['kv_bytes']} bytes)")
    return 0
