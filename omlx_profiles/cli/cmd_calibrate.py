"""``omlx-profiles calibrate MODEL|--config F --tokens 8192,32768``: measure prefill peaks on the running
MLX backend and compare them with the estimate.

It builds the live mlx-lm model with random weights (``omlx_profiles.live.build``: nothing is downloaded),
replays ``generate_step``'s prefill (``omlx_profiles.live.measure``), records the peak over the baseline per
call and overall, prints estimate / measured with a progress bar on stderr, and saves the points to
``profiles/calibration/<backend>/<variant>.yaml`` (``--out`` to change, ``--no-save`` to skip), which the
tests check the estimator against.

Real sizes need a machine that holds the weights; ``--shrink`` builds the tiny model with the same cache
layout (the estimate then uses that tiny model's profile), ``--layers N|period`` keeps the first layers.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from ..units import normalize_dtype
from ..errors import InputError, UnsupportedError
from ..files import user_path
from .common import add_model_args, count_arg, positive_int_arg, resolve_model

MAX_CALIBRATE_TOKENS = 1 << 20
#: Every length is measured ``--repeats`` times, each a full prefill: the product is the run time, so
#: both are bounded (a typo such as ``--repeats 1m`` would otherwise start a run that never ends).
MAX_LENGTHS = 32
MAX_REPEATS = 20


def _token_list(text: str) -> list[int]:
    from ..units import parse_tokens

    out = []
    for part in text.split(","):
        part = part.strip()
        if part:
            out.append(parse_tokens(part))
    if not out:
        raise InputError("--tokens needs at least one length, e.g. 8192,32768")
    if len(out) > MAX_LENGTHS:
        raise InputError(f"--tokens lists {len(out)} lengths; calibrate measures at most {MAX_LENGTHS} per run")
    return out


def _repeats(text: str) -> int:
    v = positive_int_arg(text)
    if v > MAX_REPEATS:
        import argparse

        raise argparse.ArgumentTypeError(f"at most {MAX_REPEATS} (each repeat is a full prefill), got {text}")
    return v


def register(sub) -> None:
    import argparse

    p = sub.add_parser(
        "calibrate", help="measure prefill peaks on this machine and compare with the estimate",
        description="Build the live model (random weights), replay generate_step's prefill, and record the "
                    "measured peak over the baseline next to the estimate.",
        epilog="examples:\n"
               "  omlx-profiles calibrate llama-3.2-1b-instruct --tokens 2k,8k --shrink --layers 4\n"
               "  omlx-profiles calibrate --config path/to/config.json --tokens 8192,32768 --repeats 2\n"
               "exit codes: 0 every estimate within [1.00, 1.15] of its measurement; 1 otherwise; 2 usage",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p)
    p.add_argument("--tokens", required=True, type=_token_list, metavar="N[,N...]", help="prompt lengths")
    p.add_argument("--chunk", type=positive_int_arg, default=2048, help="prefill step size (default 2048)")
    p.add_argument("--cached", type=count_arg, default=0, metavar="N",
                   help="prefix tokens already in the cache (default 0: none)")
    p.add_argument("--repeats", type=_repeats, default=1, help="measurements per length (the max is kept)")
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16",
                   help="weights/activations (CPU MoE runs in fp32: MLX's CPU gather_mm)")
    p.add_argument("--shrink", action="store_true", help="tiny widths, same cache layout (CPU-friendly)")
    p.add_argument("--layers", metavar="N|period", help="keep the first N layers (or one pattern period)")
    p.add_argument("--out", metavar="DIR", help="directory for the YAML (default profiles/calibration/<backend>)")
    p.add_argument("--no-save", action="store_true", help="print only")
    p.set_defaults(func=run)


def _config_for(res, args) -> dict:
    layers = args.layers
    if layers is not None and layers != "period":
        try:
            layers = int(layers)
        except ValueError:
            raise InputError(f"--layers must be an integer or 'period', got {args.layers!r}") from None
    if args.config:
        from ..mlxlm.config import load_config

        cfg = load_config(args.config).data  # bounded, regular files only, errors name the file
        if args.shrink or layers is not None:
            from ..live.build import shrink_config

            cfg = shrink_config(cfg, layers=layers) if args.shrink else shrink_config(
                cfg, hidden=10**9, intermediate=10**9, vocab=cfg.get("vocab_size", 512), experts=10**9,
                top_k=10**9, layers=layers)
        return cfg
    from ..mlxlm.to_config import SynthError, config_for_profile

    try:
        return config_for_profile(res.profile, shrink=args.shrink, layers=layers)
    except SynthError as e:
        raise UnsupportedError(f"{e}") from None


def _preflight(prof, label: str, weights_nbytes: int, args, backend: str, mx) -> None:
    """Refuse what cannot finish: a prompt past the model's context, or a model plus its prefill peak
    larger than the memory this machine offers (MLX would die on an allocation failure or a segfault,
    with no message, minutes in). Uses the estimator's own numbers, which sit above the measurements."""
    from ..peak.prefill import Request, prefill_peak
    from ..units import format_bytes

    longest = max(args.tokens)
    if prof.max_context and longest > prof.max_context:
        raise InputError(f"--tokens {longest:,} is past the model's context ({prof.max_context:,} tokens, "
                         "max_position_embeddings): mlx-lm would not run it as the model was trained")
    try:
        bd = prefill_peak(prof, Request(longest, cached=args.cached, chunk=args.chunk), backend=backend,
                          mlx_version=mx.__version__)
        need = weights_nbytes + bd.held_before_bytes + bd.peak_bytes
    except UnsupportedError:
        need = weights_nbytes  # peak not modelled here: the weights alone must still fit
    have = available_memory(mx)
    if have is not None and need > have:
        raise UnsupportedError(
            f"calibrating {label} at {longest:,} tokens needs about {format_bytes(need)} "
            f"(weights {format_bytes(weights_nbytes)} + prefill peak) but this machine offers "
            f"{format_bytes(have)}; use --shrink (tiny widths, same cache layout), --layers N, or fewer tokens")


def available_memory(mx=None) -> int | None:
    """Bytes MLX may use here: the GPU's recommended working set / device memory, else the RAM free now."""
    if mx is not None:
        try:
            info = mx.device_info() if hasattr(mx, "device_info") else mx.metal.device_info()
            for key in ("max_recommended_working_set_size", "memory_size", "total_memory"):
                v = info.get(key)
                if isinstance(v, int) and v > 0 and mx.default_device() != mx.cpu:
                    return v
        except Exception:  # noqa: BLE001 - no GPU backend, or an older MLX: fall back to the RAM
            pass
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _bar(i: int, n: int, label: str, t0: float) -> None:
    width = 28
    done = int(width * i / max(n, 1))
    err = getattr(sys.stderr, "unfiltered", sys.stderr)  # the bar's own carriage return, nothing from the user
    err.write(f"\r[{'#' * done}{'.' * (width - done)}] {i}/{n} {label} ({time.time() - t0:.0f}s)")
    err.flush()
    if i >= n:
        err.write("\n")


def run(args) -> int:
    try:  # the live harness imports mlx and mlx-lm; this command is the only one that measures
        import mlx.core as mx

        from ..live.build import build_model
        from ..live.measure import backend_info, measure_prefill_peak
    except ImportError as e:
        raise UnsupportedError(f"calibrate needs mlx and mlx-lm installed ({e})") from None
    from ..estimate.calibration import calibration_dir, profile_for_config
    from ..peak.prefill import Request, prefill_peak
    from ..units import format_bytes

    for n in args.tokens:
        if not 0 <= args.cached < n:
            raise InputError(f"--cached {args.cached} must be below every --tokens value (got {n})")
        if n > MAX_CALIBRATE_TOKENS:
            raise InputError(f"--tokens {n:,}: calibrate measures at most {MAX_CALIBRATE_TOKENS:,} tokens (a prefill "
                             "that long takes hours; the estimator's terms are checked on shorter prompts)")
    if args.out and not args.no_save:  # checked before minutes of measuring, not after
        out = user_path(args.out, "--out")
        if out.is_symlink() and not out.exists():
            raise InputError(f"--out {out}: is a symbolic link to nothing; calibrate writes <variant>.yaml inside a "
                             "directory")
        if out.exists() and not out.is_dir():
            raise InputError(f"--out {out}: is not a directory (calibrate writes <variant>.yaml inside it)")
    res = resolve_model(args)
    cfg = _config_for(res, args)
    info = backend_info()
    backend = info["backend"] if info["backend"] in ("cpu", "cuda", "metal") else "cpu"
    model = build_model(cfg, args.dtype, lazy=True)  # nothing allocated yet: check it fits first
    dt = normalize_dtype(model.omlx_build_info.dtype) or args.dtype
    prof = profile_for_config(cfg, dt)
    _preflight(prof, res.profile.name, model.omlx_build_info.weights_nbytes, args, backend, mx)
    mx.eval(model.parameters())

    jobs = [(n, r) for n in args.tokens for r in range(args.repeats)]
    t0 = time.time()
    measured: dict[int, list[dict]] = {}
    for i, (n, r) in enumerate(jobs):
        _bar(i, len(jobs), f"{n} tokens, repeat {r + 1}", t0)
        measured.setdefault(n, []).append(measure_prefill_peak(model, n, args.chunk, args.cached))
    _bar(len(jobs), len(jobs), "done", t0)

    points, ok = [], True
    print(f"{res.profile.name} ({prof.mlx_model_type}, {dt}) on {backend}, MLX {info['mlx_version']}, chunk {args.chunk}")
    print(f"{'tokens':>8} {'measured':>12} {'estimate':>12} {'est/meas':>9}  peak call")
    for n, runs in measured.items():
        peak = max(r["peak_over_baseline"] for r in runs)
        try:
            bd = prefill_peak(prof, Request(n, cached=args.cached, chunk=args.chunk), backend=backend,
                              mlx_version=info["mlx_version"], dtype=dt)
            est, ratio = bd.peak_bytes, bd.peak_bytes / peak if peak else float("inf")
            where = f"call {bd.peak_call} (qL={bd.peak_q_len}, kL={bd.peak_kv_len})"
        except UnsupportedError as e:
            est, ratio, where = None, None, str(e)
        good = ratio is not None and 1.0 <= ratio <= 1.15
        ok &= good
        print(f"{n:>8} {format_bytes(peak):>12} {format_bytes(est) if est else '-':>12} "
              f"{(f'{ratio:.3f}' if ratio else '-'):>9}  {where}{'' if good else '  <- outside [1.00, 1.15]'}")
        best = max(runs, key=lambda r: r["peak_over_baseline"])
        points.append({
            "model": res.profile.name, "config_inline": cfg, "model_type": prof.mlx_model_type,
            "prefill_step_size": args.chunk, "tokens": n, "cached_tokens": args.cached, "dtype": dt,
            "kv_bytes": best["cache_nbytes"], "weights_bytes": best["weights_nbytes"],
            "peak_over_baseline": [r["peak_over_baseline"] for r in runs],
            "peak_over_baseline_max": peak,
            "estimate_at_calibration": est,
            "chunks": [{"q_len": c["q_len"], "kv_len": c["kv_len"],
                        "before": c["active_before_over_baseline"], "peak": c["peak_over_baseline"]}
                       for c in best["rows"]],
        })
    if not args.no_save:
        out_dir = user_path(args.out, "--out") if args.out else calibration_dir() / backend
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"{res.profile.name}{'-shrunk' if args.shrink else ''}.yaml"
        _write(path, backend, info, dt, points)
        print(f"saved {len(points)} point(s) to {path}")
    return 0 if ok else 1


def _write(path: Path, backend: str, info: dict, dt: str, points: list[dict]) -> None:
    import yaml

    from ..schema.export import CALIBRATION, hint_line

    head = (hint_line(CALIBRATION, 3) + "\n"  # profiles/calibration/<backend>/, the default place
            "# Prefill peaks measured by `omlx-profiles calibrate` (random weights; generate_step's prefill replayed;\n"
            "# peak_over_baseline = max over calls of mx.get_peak_memory() minus the active memory with the weights\n"
            "# (and any cached prefix) resident). Tests compare the estimator with peak_over_baseline_max.\n")
    doc = {"backend": backend, "device": info.get("default_device"), "mlx": info.get("mlx_version"),
           "mlx_lm": info.get("mlx_lm_version"), "dtype": dt, "source": "omlx-profiles calibrate", "points": points}
    class _NoAliases(yaml.SafeDumper):  # profile files refuse YAML aliases; repeat the config instead
        def ignore_aliases(self, data):
            return True

    from ..outputs import write_output

    # a calibration file is re-measured on purpose: replacing the previous one is the point
    write_output(path, head + yaml.dump(doc, Dumper=_NoAliases, sort_keys=False, width=120), suffixes=(".yaml",),
                 replace=True, what="calibration file")
