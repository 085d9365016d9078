"""``omlx-profiles chart MODEL [MODEL...] --max-tokens 256k --budget 64GiB -o mem.png``.

Memory against context length, one panel per model: weights, resident KV and the prefill transient
stacked, the total on top, the budget (and the usable line under the reserve) across, and the longest
context that fits marked where the total crosses it. The points are the estimator's own numbers
(``Estimator.prefill_peak`` per length; the crossing is ``Estimator.max_tokens``, the same call as
``fit``), so the picture, ``estimate`` and ``fit`` agree.

matplotlib is imported only inside ``plot`` (Agg backend, no display needed): the other commands, and
an engine importing the package, never load it.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import InputError
from ..files import shown_path
from ..estimate.budget import reserve_for
from ..estimate.fit import CHART_SECONDS, Series, series_for
from ..units import format_bytes, format_tokens
from .common import add_model_args, add_request_args, fit_request, size_arg, tokens_arg, weights_of

GIB = 1024**3
DEFAULT_POINTS = 160
FORMATS = (".png", ".svg", ".pdf")  # what the chart is offered as; matplotlib picks the writer by extension


def register(sub) -> None:
    p = sub.add_parser(
        "chart", help="plot memory against context length for one or more models (PNG)",
        description="Plot weights + resident KV + prefill transient against context length, with the "
                    "budget line and the longest context that fits marked. Needs matplotlib "
                    "(pip install 'omlx-profiles[chart]').",
        epilog="examples:\n"
               "  omlx-profiles chart meta-llama/Llama-3.1-8B-Instruct --budget 64GiB -o mem.png\n"
               "  omlx-profiles chart mlx-community/Qwen3-8B-4bit google/gemma-3-27b-it --max-tokens 128k "
               "--budget 48G -o cmp.png\n"
               "exit codes: 0 written; 2 usage or input error (unknown model, bad size, no matplotlib)",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p, many=True)
    p.add_argument("--max-tokens", type=tokens_arg, default=256 * 1024, metavar="N",
                   help="right end of the context axis (default 256k)")
    from .sharded import add_shard_args, budgets_arg

    p.add_argument("--budget", type=budgets_arg, metavar="SIZE", help="memory budget line, e.g. 64GiB")
    p.add_argument("-o", "--output", default="mem.png", metavar="FILE",
                   help="output file: .png, .svg or .pdf (default mem.png); a new file unless --force")
    p.add_argument("--force", action="store_true", help="replace the output file if it exists")
    p.add_argument("--points", type=int, default=DEFAULT_POINTS, help=argparse.SUPPRESS)
    add_request_args(p)
    add_shard_args(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from .common import resolve_model
    from .sharded import chart_series, single_budget, wants_sharding

    sharded = wants_sharding(args)
    if not sharded:
        single_budget(args)
    models = list(args.model or [])
    if not models and not args.config:
        raise InputError("give at least one MODEL (or --config PATH)")
    if len(models) > 6:
        raise InputError(f"at most 6 models per chart, got {len(models)}")
    if getattr(args, "weights_size", None) is not None and len(models) > 1:
        raise InputError("--weights gives one model's size: use it with a single MODEL")
    if args.max_tokens < 256:
        raise InputError(f"--max-tokens must be at least 256, got {args.max_tokens}")
    if not 8 <= args.points <= 2000:
        raise InputError("--points must be between 8 and 2000")
    from ..outputs import check_output

    check_output(args.output, suffixes=FORMATS, replace=args.force, what="-o")  # before minutes of work
    out = []
    if sharded:
        if len(models) > 1:
            raise InputError("chart --ranks draws one model (one panel per rank): give a single MODEL")
        out = chart_series(resolve_model(args, models[0] if models else None), args)
    req = fit_request(args)
    reserve = reserve_for(args.budget, args.reserve) if not sharded else getattr(args, "reserve_bytes", None)
    pairs = []
    for q in (models or [None]) if not sharded else []:  # every model resolved before any point is replayed
        res = resolve_model(args, q)
        weights = weights_of(args, res)
        if weights.bytes is None:  # series_for's sentence, up front (it came after the other models' points: 3.5 s)
            series_for(res, weights, req, points=args.points, max_tokens=args.max_tokens, budget=args.budget,
                       reserve=reserve)
        pairs.append((res, weights))
    for res, weights in pairs:
        out.append(series_for(res, weights, req, points=args.points, max_tokens=args.max_tokens,
                              budget=args.budget, reserve=reserve, seconds=CHART_SECONDS / len(models or [None])))
    path = plot(out, args.budget, reserve, args.output, args.max_tokens, force=args.force)
    print(f"wrote {shown_path(path)}")
    for s in out:
        if s.max_tokens is not None and args.budget is not None:
            if s.max_context and s.max_tokens > s.max_context:  # never a verdict past the model's context
                print(f"  {s.label}: fits up to the model's context, {s.max_context:,} tokens (max_context), in "
                      f"{format_bytes(args.budget)}; memory alone would allow {s.max_tokens:,}")
            elif s.max_tokens >= args.max_tokens:
                print(f"  {s.label}: fits over the whole range (at least {args.max_tokens:,} tokens) in "
                      f"{format_bytes(args.budget)}")
            elif s.max_tokens:
                print(f"  {s.label}: fits up to {s.max_tokens:,} tokens in {format_bytes(args.budget)}")
            else:
                print(f"  {s.label}: does not fit {format_bytes(args.budget)} at any length")
        for n in s.notes:
            print(f"  {s.label}: {n}")
    return 0


def plot(series: list[Series], budget: int | None, reserve: int | None, output: str, max_tokens: int, *,
         force: bool = False) -> str:
    """Draw the panels and write the file (``outputs.write_output``: a new file unless ``force``);
    returns the path written."""
    import os

    # the chart is drawn with Agg whatever the environment says: MPLBACKEND names an interactive backend,
    # which this command never uses, and matplotlib raises ValueError on import for one it does not know
    # (MPLBACKEND=bogus was "internal error"); it is set aside while matplotlib is imported
    saved = os.environ.pop("MPLBACKEND", None)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter, MultipleLocator
    except ImportError:
        raise InputError("chart needs matplotlib: pip install 'omlx-profiles[chart]'") from None
    finally:
        if saved is not None:
            os.environ["MPLBACKEND"] = saved

    n = len(series)
    cols = 1 if n == 1 else 2
    rows = -(-n // cols)
    legend_rows = 3 if cols == 1 else 1
    height = 4.6 * rows + 0.35 + 0.3 * legend_rows
    fig, axes = plt.subplots(rows, cols, figsize=(7.5 * cols, height), squeeze=False, sharey=True)
    colors = {"weights": "#9e9e9e", "kv": "#3b75af", "transient": "#ef8636", "budget": "#c0392b"}
    top = max([max(s.totals) for s in series if s.totals] + [budget or 0]) / GIB
    ymax = top * 1.15 if top > 0 else 1.0
    xstep = _tick_step(max_tokens / 1024)
    for i, s in enumerate(series):
        ax = axes[i // cols][i % cols]
        x = [t / 1024 for t in s.tokens]
        w = [v / GIB for v in s.weights]
        k = [v / GIB for v in s.kv]
        tr = [v / GIB for v in s.transient]
        tot = [a + b + c for a, b, c in zip(w, k, tr)]
        ax.stackplot(x, w, k, tr, colors=[colors["weights"], colors["kv"], colors["transient"]],
                     labels=["weights", "KV cache", "prefill transient (activations, copies, scores)"],
                     alpha=0.9, linewidth=0)
        ax.plot(x, tot, color="black", linewidth=1.3, label="total at the prefill peak")
        if budget is not None:
            ax.axhline(budget / GIB, color=colors["budget"], linewidth=1.6, label=f"budget {format_bytes(budget)}")
            line = (budget - (reserve or 0)) / GIB
            if reserve:
                ax.axhline(line, color=colors["budget"], linewidth=1, linestyle=":",
                           label=f"usable {format_bytes(budget - reserve)} (budget - {format_bytes(reserve)} reserve)")
            if s.max_tokens is not None and s.max_tokens < s.tokens[-1]:
                xm = s.max_tokens / 1024
                ax.axvspan(xm, x[-1], color=colors["budget"], alpha=0.07, linewidth=0)
                ax.axvline(xm, color=colors["budget"], linestyle="--", linewidth=1)
                ax.plot([xm], [line], marker="o", color=colors["budget"], markersize=5)
                left = xm > 0.4 * x[-1]  # the label goes where there is room: left of the crossing if far right
                ax.annotate(f"fits up to {format_tokens_pretty(s.max_tokens)} tokens",
                            xy=(xm, line), xytext=(-12 if left else 12, 28), textcoords="offset points",
                            ha="right" if left else "left", va="bottom", fontsize=9, color=colors["budget"],
                            bbox=dict(boxstyle="round,pad=0.3", fc="white", ec=colors["budget"], lw=0.8),
                            arrowprops=dict(arrowstyle="->", color=colors["budget"], lw=1))
                ax.text((xm + x[-1]) / 2, ymax * 0.985, "does not fit", ha="center", va="top", fontsize=8,
                        color=colors["budget"])
            elif s.max_tokens is not None:
                ax.text(0.98, 0.96, f"fits across the whole range", transform=ax.transAxes, ha="right", va="top",
                        fontsize=9, color="#2e7d32",
                        bbox=dict(boxstyle="round,pad=0.3", fc="white", ec="#2e7d32", lw=0.8))
        if s.max_context and s.max_context < s.tokens[-1]:
            ax.axvline(s.max_context / 1024, color="#555555", linestyle="-.", linewidth=0.9)
            ax.text(s.max_context / 1024, ymax * 0.03, f"model max_context {format_tokens(s.max_context)}",
                    fontsize=8, color="#333333", va="bottom", ha="center", rotation=90,
                    bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="none", alpha=0.8))
        sub = s.weights_label
        ax.set_title(s.label + (f"\n{sub}" if sub else ""), fontsize=10)
        ax.set_xlim(0, x[-1])
        ax.set_ylim(0, ymax)
        ax.set_xlabel("prompt length in tokens (k = 1024)")
        if i % cols == 0:
            ax.set_ylabel("memory (GiB)")
        ax.xaxis.set_major_locator(MultipleLocator(xstep))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}k" if v else "0"))
        ax.grid(True, alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=-(-len(labels) // legend_rows), fontsize=9, frameon=False)
    for j in range(n, rows * cols):
        axes[j // cols][j % cols].set_visible(False)
    fig.suptitle("Memory at the prefill peak against prompt length", fontsize=12)
    fig.tight_layout(rect=(0, (0.1 + 0.26 * legend_rows) / height, 1, 1))
    import io

    from ..outputs import write_output

    buf = io.BytesIO()
    try:
        fig.savefig(buf, dpi=110, format=Path(output).suffix.lower().lstrip("."))
    finally:
        plt.close(fig)
    return str(write_output(output, buf.getvalue(), suffixes=FORMATS, replace=force, what="-o"))


def _tick_step(kmax: float) -> float:
    """A power-of-two tick step (in k tokens) giving 4-8 ticks: 32k, 64k, ... as contexts are quoted."""
    step = 1.0 / 256
    while kmax / step > 8:
        step *= 2
    return step


def format_tokens_pretty(n: int) -> str:
    return f"{n:,}" + (f" ({format_tokens(n)})" if format_tokens(n) != str(n) else "")
