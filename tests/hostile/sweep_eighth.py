"""The generator behind the eighth pass of tests/test_hostile_seventh.py (#18, session 12): the CLI and the Python
API take the same domain and give the same answer.

``python -m tests.hostile.sweep_eighth [GROUP ...]`` runs every case twice, once as ``omlx-profiles ARGV``
(in-process, ``sweep_common.run``: catch-all spy, CPU limit) and once as the Python API call that asks the same
question, and judges the PAIR. Why this angle: session 11 found ``--cached 0`` refused by the CLI ("must be at least
1 token") and accepted by the API as "no prefix" -- a script passing ``--cached $N`` had to special-case 0, and no
crash judge sees that. The earlier passes judged each surface alone; a value one surface takes and the other
refuses, or answers differently, passes every one of them. Misbehaving here:

* ``DISAGREE``: one surface refuses (CLI exit 2 / a typed ``OmlxProfilesError``) and the other answers;
* ``WRONG``: both answer, and a number both give differs (KV bytes, prefill peak, total, the verdict, the
  longest prompt);
* ``UNTYPED``: the API raised something not in ``omlx_profiles.errors`` (and not the facade's ``ValueError``);
* whatever ``sweep_common.judge`` says of the CLI side (traceback, catch-all, silent failure, hang).

Groups (every option with an API counterpart, at its edges: 0, 1, the model's context and one past it, 2^30 and
one past it, 1 PiB and one past it):

* ``estimate``: ``--tokens``, ``--chunk``, ``--cached``, ``--schedule``, ``--dtype``, ``--mlx-version``,
  ``--budget`` / ``--reserve`` / ``--weights`` against ``Estimator.prefill_peak`` / ``fits`` and ``kv_report``;
* ``kvquant``: ``--kv-bits`` / ``--kv-group-size`` / ``--kv-start`` against ``KVQuant`` + ``kv_report``;
* ``fit``: ``--budget`` / ``--cached`` / ``--chunk`` / ``--weights`` against ``Estimator.max_tokens``;
* ``facade``: the oMLX facade's counts (``cached_tokens``, ``kv_len``, ``chunk_size``) against ``Request``'s.
"""
from __future__ import annotations

import json
import os
import sys

from tests.hostile.sweep_common import call_problems, in_groups, judge, run

MODELS = ("qwen3-8b", "gemma-3-4b-it", "deepseek-v2-lite")  # full attention; sliding; MLA + MoE
BACKENDS = ("cpu", "metal", "cuda")
T30 = 1 << 30
PIB = 1 << 50


def _json(out: str):
    try:
        return json.loads(out)
    except ValueError:
        return None


def _api(fn):
    """``("ok", value)``, ``("refused", message)`` (an error the CLI turns into exit 2), ``("unsupported", message)``
    (``UnsupportedError``: the CLI's exit 1 "unsupported:") or ``("untyped", message)``."""
    from omlx_profiles.errors import OmlxProfilesError, UnsupportedError

    try:
        return "ok", fn()
    except UnsupportedError as e:
        return "unsupported", str(e)[:200]
    except OmlxProfilesError as e:
        return "refused", str(e)[:200]
    except Exception as e:  # noqa: BLE001 - what the judge is about
        return "untyped", f"{type(e).__name__}: {str(e)[:200]}"


def pair_problems(argv: list[str], api, keys: tuple[str, ...], cpu: float = 20.0) -> list[str]:
    """Judge one CLI case and its API twin: ``api()`` returns a dict of the ``keys`` the CLI's JSON also has."""
    res = run(argv, cpu=cpu)
    bad = [b for b in judge(argv, res) if not b.startswith("SLOW")]
    code, out, err = res[0], res[1], res[2]
    state, val = _api(api)
    if state == "untyped":
        bad.append(f"UNTYPED {val}")
        return bad
    # the CLI's refusals: exit 2 (an input error), exit 1 with "unsupported:" and no answer (UnsupportedError)
    j = _json(out)
    # estimate answers the KV and says its peak is unknown (exit 0, or 1 with a budget: "verdict: UNKNOWN"), where
    # the API's prefill_peak raises UnsupportedError: the same refusal of the peak (docs/errors.md's exit table)
    unsupported = (code == 1 and err.lstrip().startswith("unsupported:") and j is None) or \
        ("peak_bytes" in keys and code in (0, 1) and isinstance(j, dict) and j.get("peak_unknown") is not None)
    cli_state = "refused" if code == 2 else "unsupported" if unsupported else "ok"
    if cli_state != state:
        bad.append(f"DISAGREE cli exit {code} ({err.strip()[:160]!r}) vs api {state} ({str(val)[:160]!r})")
        return bad
    if state == "ok" and code in (0, 1):
        j = _json(out)
        if j is None:
            bad.append("CLI --json gave no JSON")
            return bad
        for k in keys:
            if k == "memory_max_tokens" and j.get("memory_max_tokens_exact") is False:
                continue  # fit searched past the context within its work budget: "at least N", not the answer
            got = 0 if k == "memory_max_tokens" and j.get(k) is None else j.get(k)  # null: nothing fits
            if k in val and got != val[k]:
                bad.append(f"WRONG {k}: cli {j.get(k)!r} vs api {val[k]!r}")
    return bad


# -- estimate -------------------------------------------------------------------------------------------
def estimate_cases(name: str, backend: str):
    import omlx_profiles as op
    from omlx_profiles.kv.bytes import kv_report
    from omlx_profiles.peak.request import Request

    res = op.default_registry().resolve(name)
    p = res.profile
    est = op.Estimator(p)
    ctx = p.max_context or 131072

    def api(tokens, cached=0, chunk=2048, schedule="generate", dtype=None, mlx=None, budget=None, reserve=None,
            weights=None):
        def f():
            req = Request(tokens, cached=cached, chunk=chunk, schedule=schedule)
            kv = kv_report(p, tokens, schedule=schedule, chunk=chunk, dtype=dtype)
            bd = est.prefill_peak(req, backend=backend, mlx_version=mlx, dtype=dtype)
            out = {"kv_bytes": kv.total, "peak_bytes": bd.peak_bytes,
                   "held_before_bytes": bd.held_before_bytes}
            if budget is not None:
                v = est.fits(req, budget, weights_bytes=weights, reserve=reserve, backend=backend, mlx_version=mlx,
                             dtype=dtype)
                out["reserve_bytes"] = v.reserve_bytes
                out["usable_bytes"] = v.usable_bytes
                if not v.margin:
                    out["fits"] = v.fits
                if weights is not None:
                    out["total_bytes"] = v.total_bytes
            return out
        return f

    base = ["estimate", name, "--backend", backend, "--json"]
    small = 4096 if backend != "cuda" else 3000
    for t in (1, 2, small, ctx, ctx + 1, T30, T30 + 1):
        if t > 4 * ctx and t <= T30:  # a 2^30-token replay costs minutes: the work budget refuses both
            continue
        yield base + ["--tokens", str(t)], api(t)
    for c in (1, 255, small - 1, small, T30, T30 + 1):
        t = 64 if c == 1 else small
        yield base + ["--tokens", str(t), "--chunk", str(c)], api(t, chunk=c)
    for c in (0, 1, small - 1, small, small + 1, T30):
        yield base + ["--tokens", str(small), "--cached", str(c)], api(small, cached=c)
    yield base + ["--tokens", str(small), "--schedule", "direct"], api(small, schedule="direct")
    yield base + ["--tokens", str(small), "--schedule", "direct", "--chunk", "100"], api(small, schedule="direct",
                                                                                         chunk=100)
    for dt in ("bf16", "fp16", "fp32"):
        yield base + ["--tokens", str(small), "--dtype", dt], api(small, dtype=dt)
    for v in ("0.30.0", "0.32.4", "99.0", "0.1"):
        yield base + ["--tokens", str(small), "--mlx-version", v], api(small, mlx=v)
    for b in (0, 1, 64 << 30, PIB, PIB + 1):
        yield base + ["--tokens", str(small), "--budget", str(b)], api(small, budget=b)
        yield base + ["--tokens", str(small), "--budget", str(b), "--weights", "1"], api(small, budget=b, weights=1)
    for r in (0, 1, 64 << 30, (64 << 30) + 1):
        yield base + ["--tokens", str(small), "--budget", "64GiB", "--reserve", str(r)], api(small, budget=64 << 30,
                                                                                          reserve=r)
    for w in (0, 1, PIB, PIB + 1):
        yield base + ["--tokens", str(small), "--budget", "1PiB", "--weights", str(w)], api(small, budget=PIB,
                                                                                         weights=w)


# -- KV quantization ------------------------------------------------------------------------------------
def kvquant_cases(name: str):
    import omlx_profiles as op
    from omlx_profiles.kv.bytes import KVQuant, kv_report

    p = op.default_registry().resolve(name).profile

    def api(bits, group, start):
        def f():
            q = KVQuant(bits, group, start) if start is not None else KVQuant(bits, group)
            return {"kv_bytes": kv_report(p, 8192, quant=q).total}
        return f

    for bits in (1, 2, 3, 4, 5, 6, 7, 8, 16):
        yield ["estimate", name, "--tokens", "8192", "--kv-bits", str(bits), "--json"], api(bits, 64, None)
    for g in (16, 32, 64, 128, 256):
        yield ["estimate", name, "--tokens", "8192", "--kv-bits", "4", "--kv-group-size", str(g), "--json"], \
            api(4, g, None)
    for s in (0, 1, 4096, 8191, 8192, T30, T30 + 1):
        yield ["estimate", name, "--tokens", "8192", "--kv-bits", "4", "--kv-start", str(s), "--json"], api(4, 64, s)


# -- fit --------------------------------------------------------------------------------------------------
def fit_cases(name: str, backend: str):
    import omlx_profiles as op
    from omlx_profiles.estimate.fit import _rounded, search_limit
    from omlx_profiles.estimate.weights import estimate_weights

    res = op.default_registry().resolve(name)
    p = res.profile
    est = op.Estimator(p)
    w0 = estimate_weights(res).bytes

    def api(budget, cached=0, chunk=2048, weights=None):
        def f():
            w = w0 if weights is None else weights
            m = est.max_tokens(budget, weights_bytes=w, cached=cached, chunk=chunk, backend=backend,
                               limit=search_limit(p.max_context, chunk))
            return {"memory_max_tokens": _rounded(m, cached)}  # fit quotes the 256-token step below
        return f

    base = ["fit", name, "--backend", backend, "--json"]
    for b in (0, 1, 24 << 30, 192 << 30, PIB, PIB + 1):
        yield base + ["--budget", str(b)], api(b)
    ctx = p.max_context or 131072
    # (a prefix at or past max_context: fit refuses it, "no prompt can follow"; max_tokens is memory alone, by design)
    for c in (0, 1, 4096, ctx - 1):
        yield base + ["--budget", "192GiB", "--cached", str(c)], api(192 << 30, cached=c)
    for ch in (256, 4096, T30, T30 + 1):
        yield base + ["--budget", "192GiB", "--chunk", str(ch)], api(192 << 30, chunk=ch)
    for w in (0, 1, PIB, PIB + 1):
        yield base + ["--budget", "192GiB", "--weights", str(w)], api(192 << 30, weights=w)


# -- facade ----------------------------------------------------------------------------------------------
def facade_problems() -> list[tuple[str, list[str]]]:
    """The facade's counts against ``Request``'s domain: a count both take alike, both refuse alike (the facade's
    ``ValueError`` -- ``InputError`` is one -- for a typed error)."""
    import omlx_profiles as op
    from omlx_profiles.compat.monitor import MemoryMonitor
    from omlx_profiles.peak.request import Request

    p = op.default_registry().resolve("qwen3-8b").profile
    out = []
    for backend in ("cpu", "cuda"):
        m = MemoryMonitor(64 << 30, backend=backend)
        m.set_profile(p)
        for new, chunk, cached in ((1, 1, 0), (4096, 2048, 0), (4096, 2048, 1), (1, 2048, 40959), (4096, 0, 0),
                                   (4096, 2048, -1), (T30, 2048, 0), (T30 + 1, 2048, 0), (4096, T30 + 1, 0),
                                   (4096, 2048, T30)):
            label = f"{backend} new={new} chunk={chunk} cached={cached}"
            if VERBOSE:
                print("  facade", label, flush=True)
            fa = _api_value(lambda: m.estimate_prefill_peak_bytes(new, chunk, cached_tokens=cached))
            ap = _api_value(lambda: Request(new + cached, cached=cached, chunk=chunk))
            bad = []
            if fa[0] == "untyped":
                bad.append(f"UNTYPED facade {fa[1]}")
            if (fa[0] == "ok") != (ap[0] == "ok") and new > 0:
                bad.append(f"DISAGREE facade {fa[0]} ({str(fa[1])[:120]}) vs Request {ap[0]} ({str(ap[1])[:120]})")
            out.append((label, bad))
    return out


def _api_value(fn):
    try:
        return "ok", fn()
    except ValueError as e:  # InputError is a ValueError; the facade raises ValueError as oMLX's callers expect
        return "refused", str(e)[:200]
    except Exception as e:  # noqa: BLE001
        return "untyped", f"{type(e).__name__}: {str(e)[:200]}"


# -- driver ------------------------------------------------------------------------------------------------
def _report(group: str, cases, keys) -> int:
    import time

    n = found = 0
    for argv, api in cases:
        n += 1
        t0 = time.process_time()
        bad = pair_problems(argv, api, keys)
        if bad:
            found += 1
            print(f"[{group}] {' '.join(argv)}: {'; '.join(bad)}", flush=True)
        elif VERBOSE:
            print(f"  {time.process_time() - t0:6.2f} ok {' '.join(argv)}", flush=True)
    print(f"== {group}: {n} cases, {found} misbehaving", flush=True)
    return found


EST_KEYS = ("kv_bytes", "peak_bytes", "held_before_bytes", "reserve_bytes", "usable_bytes", "fits", "total_bytes")


def group_cases(g: str):
    if g == "estimate":
        for i, name in enumerate(MODELS):
            for b in BACKENDS:
                yield from estimate_cases(name, b)
    elif g == "kvquant":
        for name in MODELS:
            yield from kvquant_cases(name)
    elif g == "fit":
        for i, name in enumerate(MODELS):
            yield from fit_cases(name, BACKENDS[i % len(BACKENDS)])


GROUPS = ("estimate", "kvquant", "fit", "facade")
VERBOSE = bool(os.environ.get("OMLX_SWEEP_VERBOSE"))


def main(argv: list[str]) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    def one(g: str, sub) -> int:
        if g == "facade":
            rows = facade_problems()
            bad = [(lab, b) for lab, b in rows if b]
            for lab, b in bad:
                print(f"[facade] {lab}: {'; '.join(b)}", flush=True)
            print(f"== facade: {len(rows)} cases, {len(bad)} misbehaving", flush=True)
            return len(bad)
        keys = {"estimate": EST_KEYS, "kvquant": ("kv_bytes",), "fit": ("memory_max_tokens",)}[g]
        return _report(g, group_cases(g), keys)

    return 1 if in_groups(argv or list(GROUPS), one) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
