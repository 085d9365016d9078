"""Plain-text tables for the CLI: aligned columns, no colour, no third-party imports.

The renderers take the same JSON-able dicts that ``--json`` prints, so the table and the JSON can never
disagree: a number is computed once (``report.py`` / the estimator) and only formatted here.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from ..units import format_bytes, format_tokens

RULE = "-"


def table(rows: Iterable[Sequence[object] | None], headers: Sequence[str] | None = None,
          align: str | None = None, indent: int = 2, gap: int = 2) -> str:
    """Aligned columns; ``align`` is one letter per column (``l``/``r``); a ``None`` row is a rule."""
    body = [None if r is None else [("" if c is None else str(c)) for c in r] for r in rows]
    head = [str(h) for h in headers] if headers else None
    cols = max([len(r) for r in body if r is not None] + [len(head) if head else 0] or [0])
    widths = [0] * cols
    for r in ([head] if head else []) + [r for r in body if r is not None]:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))
    align = (align or "l" + "r" * (cols - 1)).ljust(cols, "r")
    pad = " " * indent
    sep = " " * gap

    def line(r: list[str]) -> str:
        cells = [(c.rjust(w) if a == "r" else c.ljust(w)) for c, w, a in zip(r + [""] * (cols - len(r)), widths, align)]
        return (pad + sep.join(cells)).rstrip()

    total_width = sum(widths) + gap * (cols - 1)
    out = []
    if head:
        out.append(line(head))
        out.append(pad + RULE * total_width)
    for r in body:
        out.append(pad + RULE * total_width if r is None else line(r))
    return "\n".join(out)


def nbytes(n: int | None) -> str:
    """``4,294,967,296`` (exact bytes, for people who compare numbers), ``-`` when unknown."""
    return "-" if n is None else f"{n:,}"


def tokens(n: int) -> str:
    """``32,768 (32k)``: the count as given and as context lengths are quoted."""
    short = format_tokens(n)
    return f"{n:,}" if short == str(n) else f"{n:,} ({short})"


def wrap(text: str, width: int = 100, indent: str = "  ") -> str:
    import textwrap

    return textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_on_hyphens=False, break_long_words=False)


def percent(part: int, whole: int) -> str:
    if not whole:
        return ""
    pc = 100 * part / whole
    return "<1%" if 0 < pc < 0.5 else f"{pc:.0f}%"


_TERM_NAMES = {
    "kv_resident": "KV cache held before the peak call",
    "kv_growth": "KV rows the peak call adds",
    "kv_update_copy": "KV update copies",
    "kv_copy": "KV update copies",
    "state_snapshot": "conv-state views of the previous chunk",
    "residual_stream": "residual stream",
    "residual": "residual adds",
    "masks": "attention masks",
    "mask": "attention mask",
    "mlp": "MLP activations",
    "moe": "MoE activations",
    "rms_norm": "RMS norm outputs",
    "rope": "RoPE outputs",
    "qkv_proj": "q/k/v projections",
    "o_proj": "attention output projection",
    "logits": "logits",
    "embedding": "embedding lookup",
    "envelope": "monotone envelope (a shorter prompt or prefix peaks higher)",
}

#: Terms that are cache memory (the KV band of the chart), not transient.
KV_TERMS = ("kv_resident", "kv_growth")


def term_label(name: str) -> str:
    if name.endswith(".carried"):  # outputs of earlier ops still alive as inputs of the ops at the peak
        return term_label(name[: -len(".carried")]) + " (still held)"
    if name in _TERM_NAMES:
        return _TERM_NAMES[name]
    if name.startswith("sdpa."):
        route, _, what = name[5:].partition("_")
        what = {"scores": "attention scores", "out": "attention output", "q_scaled": "scaled queries",
                "causal_mask": "causal mask", "mask": "mask"}.get(what, what.replace("_", " "))
        return f"SDPA ({route}): {what}"
    return name.replace("_", " ").replace(".", ": ")


def breakdown_dict(est: dict) -> dict:
    b = est.get("breakdown")
    return b if isinstance(b, dict) else {}


def breakdown_terms(est: dict) -> dict[str, int]:
    """The terms of an estimate's ``breakdown`` (``{"terms": {...}}`` or the terms themselves)."""
    b = breakdown_dict(est)
    terms = b.get("terms", b)
    return {k: v for k, v in terms.items() if type(v) is int}


def breakdown_explanation(est: dict) -> list[str]:
    e = breakdown_dict(est).get("explanation")
    if isinstance(e, str):
        return [s for s in e.splitlines() if s.strip()]
    if isinstance(e, (list, tuple)):
        return [str(s) for s in e]
    return []


def held_before(est: dict) -> int:
    b = breakdown_dict(est)
    v = b.get("held_before_bytes", est.get("held_before_bytes", 0))
    return v if type(v) is int else 0


def kv_at_peak(est: dict) -> int | None:
    """Cache bytes held at the peak: the prefix held before the prompt + the KV terms of the breakdown."""
    terms = breakdown_terms(est)
    if not terms:
        return None
    return held_before(est) + sum(terms.get(k, 0) for k in KV_TERMS)


def weights_label(est: dict) -> str:
    w = est.get("weights")
    if isinstance(w, dict):
        if w.get("bytes") is None:
            return "weights (unknown)"
        bits = w.get("bits")
        extra = f", {bits}-bit" if bits and bits < 16 else (f", {est.get('dtype')}" if bits == 16 and est.get("dtype")
                                                            in ("bf16", "fp16") else (", fp32" if bits == 32 else ""))
        return f"weights ({w.get('label', 'exact' if w.get('exact') else 'approximate')}{extra})"
    return "weights" if est.get("weights_bytes") is not None else "weights (unknown)"


def weights_note(w: dict) -> str:
    if w.get("exact") and w.get("files"):
        n = w["files"]
        return (f"exact, from the safetensors headers of {w.get('directory')} ({n} file{'s' if n != 1 else ''}, "
                f"{w.get('tensors')} tensors)" + (f"; {w['reason']}" if w.get("reason") else ""))
    if w.get("reason"):
        return w["reason"]
    return ("exact, " if w.get("exact") else "") + str(w.get("source"))


def kv_kinds(est: dict) -> str:
    """``32 x full`` or ``28 x sliding + 6 x full``: the resident KV's layers, grouped by kind."""
    counts: dict[str, int] = {}
    for layer in est.get("layers") or ():
        counts[layer["kind"]] = counts.get(layer["kind"], 0) + 1
    return " + ".join(f"{n} x {k}" for k, n in counts.items())


def header_lines(est: dict) -> list[str]:
    head = f"{est['model']} -> {est['variant']} ({est['family']})"
    bits = [tokens(est["tokens"]) + " tokens"]
    if est.get("cached"):
        bits.append(f"{est['cached']:,} already cached")
    bits.append(f"{est['schedule']} schedule, chunk {est['chunk']}")
    bits.append(str(est.get("dtype")))
    if est.get("kv_bits"):
        bits.append(f"KV {est['kv_bits']}-bit (group {est['kv_group_size']})")
    if est.get("backend"):
        v = est.get("mlx_version")
        bits.append(f"backend {est['backend']}" + (f" (MLX {v})" if v else ""))
    return [head, "  " + ", ".join(bits)]


def estimate_rows(est: dict) -> list[list[object] | None]:
    """weights / KV / each transient term / total, then budget, reserve, headroom.

    The rows above the total add up to it exactly: ``total = weights + held before the prompt + peak``
    and ``peak = sum(breakdown terms)``; the KV row is the cache at the peak (prefix + the KV terms).
    Without a peak model in the estimate, the rows are weights and resident KV only, and no total.
    """
    rows: list[list[object] | None] = []
    total = est.get("total_bytes")
    w = est.get("weights_bytes")

    def row(label, n):
        return [label, format_bytes(n), nbytes(n), percent(n, total) if (total and n is not None) else ""]

    rows.append(row(weights_label(est), w))
    kinds = kv_kinds(est)
    kv_peak = kv_at_peak(est)
    if kv_peak is None:
        kv = est.get("kv_bytes")
        rows.append(row(f"resident KV ({kinds})" if kinds else "resident KV", kv))
    else:
        label = "KV cache at the peak" + (f" ({kinds})" if kinds else "")
        rows.append(row(label, kv_peak))
        others = {k: v for k, v in breakdown_terms(est).items() if k not in KV_TERMS}
        if others:
            call = breakdown_dict(est).get("peak_call")
            where = (f" (call {call['index'] + 1}/{call['of']})"
                     if isinstance(call, dict) and {"index", "of"} <= call.keys() else "")
            rows.append([f"transient at the peak{where}:", "", "", ""])
            for name, v in others.items():
                rows.append(row(f"  + {term_label(name)}", v))
    if total is not None:
        rows.append(None)
        basis = est.get("peak_basis")
        rows.append([f"total at the prefill peak ({basis})" if basis else "total at the prefill peak",
                     format_bytes(total), nbytes(total), "100%"])
    elif est.get("peak_bytes") is not None:
        over = held_before(est) + est["peak_bytes"]
        rows.append(None)
        basis = est.get("peak_basis")
        rows.append([f"total without the weights ({basis})" if basis else "total without the weights",
                     format_bytes(over), nbytes(over), ""])
    budget = est.get("budget_bytes")
    if budget is not None:
        rows.append(None)
        rows.append(["budget", format_bytes(budget), nbytes(budget), ""])
        if est.get("reserve_bytes") is not None:
            rows.append(["  - reserve", format_bytes(est["reserve_bytes"]), nbytes(est["reserve_bytes"]), ""])
        h = est.get("headroom_bytes")
        if h is not None:
            rows.append(["headroom" if h >= 0 else "over the usable budget by", format_bytes(abs(h)), nbytes(abs(h)), ""])
    return rows


def verdict(est: dict) -> str | None:
    fits = est.get("fits")
    if est.get("past_context"):
        return f"verdict: PAST THE MODEL'S CONTEXT - {est['past_context']}"
    if est.get("budget_bytes") is None:
        return None
    if fits is None:
        if est.get("weights_bytes") is None:
            return "verdict: UNKNOWN - the weights are unknown (see above), so the total is too"
        return "verdict: UNKNOWN - " + str(est.get("peak_unknown") or "the prefill peak is not modelled here")
    usable = est["budget_bytes"] - (est.get("reserve_bytes") or 0)
    used = percent(est["total_bytes"], usable)
    if fits:
        return f"verdict: FITS - total {format_bytes(est['total_bytes'])} is {used} of the {format_bytes(usable)} usable"
    return (f"verdict: DOES NOT FIT - total {format_bytes(est['total_bytes'])} exceeds the "
            f"{format_bytes(usable)} usable by {format_bytes(est['total_bytes'] - usable)}")


def basis_notes(est: dict) -> list[str]:
    """``prefill peak basis: measured | derived | bound (why)``: what the total rests on (peak/basis.py). Every
    table with a prefill total says it (estimate, fit, sharded estimate and fit; chart's lines): a number no
    measurement backs is a bound and says so."""
    return [f"prefill {line.strip()}" for line in breakdown_explanation(est) if line.strip().startswith("peak basis:")]


def render_estimate(est: dict) -> str:
    out = header_lines(est)
    out.append("")
    out.append(table(estimate_rows(est), ["component", "size", "bytes", "share"], "lrrr"))
    w = est.get("weights")
    # how the model was resolved comes first: a local directory overriding a registry name, a config
    # disagreeing with the variant it answers to (files on disk win, and the user is told)
    notes = [f"note: {n}" for n in (est.get("resolution") or {}).get("notes", [])]
    if isinstance(w, dict):
        notes.append("weights: " + weights_note(w))
    if est.get("peak_unknown"):
        notes.append(f"prefill peak: unknown - {est['peak_unknown']}")
    notes.extend(basis_notes(est))
    notes.extend(f"attention: {line.strip()[len('SDPA of '):]}" for line in breakdown_explanation(est)
                 if line.strip().startswith("SDPA of "))
    notes.extend(f"prefill peak: {line.strip()}" for line in breakdown_explanation(est)
                 if line.strip().startswith("assumes a warmed-up process"))
    if est.get("kv_bytes") is not None and kv_at_peak(est) is not None:
        notes.append(f"after the prompt the caches hold {format_bytes(est['kv_bytes'])} (kv_bytes)")
    if notes:
        out.append("")
        out.extend(wrap(n) for n in notes)
    v = verdict(est)
    if v:
        out.append("")
        out.append(v)
    return "\n".join(out)


def render_fit(fit: dict) -> str:
    """The longest context for a budget, the breakdown there, and the step that no longer fits."""
    at = fit["at_max"]
    out = [f"{fit['model']} -> {fit['variant']} ({fit['family']})",
           f"  budget {format_bytes(fit['budget_bytes'])} - reserve {format_bytes(fit['reserve_bytes'])} "
           f"= {format_bytes(fit['usable_bytes'])} usable; chunk {fit['chunk']}"
           + (f", {fit['cached']:,} cached" if fit.get("cached") else "")
           + (f", backend {fit['backend']}" if fit.get("backend") else ""),
           ""]
    mt = fit["max_tokens"]
    if mt is None:
        out.append(f"does not fit at any context: {fit.get('reason') or 'weights alone exceed the usable memory'}")
        out.extend(wrap(n) for n in basis_notes(at or {}))
        return "\n".join(out)
    out.append(f"longest context that fits: {tokens(mt)} tokens")
    if fit.get("max_context") and mt >= fit["max_context"]:
        more = fit.get("memory_max_tokens")
        out.append(f"  (the model's max_context is {tokens(fit['max_context'])}: memory is not what limits it"
                   + (f"; memory alone would allow {tokens(more)})" if more and more > mt else ")"))
    out.append("")
    out.append(table(estimate_rows({**at, "budget_bytes": None}), [f"at {mt:,} tokens", "size", "bytes", "share"],
                     "lrrr"))
    nxt = fit.get("next")
    if nxt and fit.get("limited_by") != "max_context":
        out.append("")
        out.append(f"  one step more ({tokens(nxt['tokens'])} tokens) needs {format_bytes(nxt['total_bytes'])} "
                   f"> {format_bytes(fit['usable_bytes'])} usable")
    w = at.get("weights")
    if isinstance(w, dict):
        out.append(wrap("weights: " + weights_note(w)))
    out.extend(wrap(n) for n in basis_notes(at))
    return "\n".join(out)
