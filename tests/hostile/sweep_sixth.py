"""The generator behind tests/test_hostile_sixth.py (#18, session 10): new inputs for the classes of the issue.

``python -m tests.hostile.sweep_sixth [GROUP ...]`` (``OMLX_SWEEP_DUMP=f.jsonl`` keeps every CLI case) uses
``sweep_fourth``'s runner and judge for the CLI (catch-all spy, CPU limit, no traceback / internal error /
raw control character / silent failure) and its own judge for the API and the facade: a typed error, or an
answer that is neither negative nor NaN / infinite and, for a number spelled another way (a numpy integer,
an ``int`` subclass, a ``Decimal`` with no fraction), the same answer as for the plain ``int``. Groups, each
an angle the earlier passes did not take:

* ``numeric``: what an engine passes without thinking: numpy scalars (``np.int64``, ``np.float64`` NaN,
  ``np.bool_``), ``int`` / ``str`` subclasses, ``Decimal``, ``Fraction``, an ``IntEnum`` -- into ``Request``,
  ``Estimator.fits`` / ``max_tokens`` / ``kv_bytes`` / ``prefill_peak`` / ``total_bytes`` / ``prepare`` and the
  facade's ``MemoryMonitor`` and its estimates;
* ``cuda``: every command on the CUDA model with odd chunk sizes (1, 3, 17, 255, 513, 4095), a cached
  prefix near the context and budgets at both ends: finishes or refuses within the command's CPU bound;
* ``config``: numbers in config.json spelled as floats (``4096.0``, ``1e3``), digit strings, ``-0.0``, at
  2^31 - 1 and 2^31, head counts that do not divide, a head_dim that disagrees with hidden / heads;
* ``env``: ``OMLX_PROFILES_CPU_SECONDS`` (new this session) with hostile values.
"""
from __future__ import annotations

import json
import sys
from decimal import Decimal
from enum import IntEnum
from fractions import Fraction
from pathlib import Path

from tests.hostile.sweep_common import CONFIGS, call_problems, env_var, in_groups, judge, report, report_calls, run

QWEN = json.loads((CONFIGS / "qwen3-8b.json").read_text())
MODEL = "qwen3-8b"


class _Int(int):
    pass


class _Str(str):
    pass


class _Enum(IntEnum):
    K = 1024


def numeric_values():
    """name -> (value, the plain int it spells or None)."""
    import numpy as np

    return {"np.int64": (np.int64(1024), 1024), "np.int32": (np.int32(1024), 1024), "np.uint8": (np.uint8(255), 255),
            "np.float64": (np.float64(1024.0), None), "np.nan": (np.float64("nan"), None), "np.bool_": (np.bool_(True), None),
            "int-subclass": (_Int(1024), 1024), "IntEnum": (_Enum.K, 1024), "Decimal": (Decimal(1024), None),
            "Fraction": (Fraction(1024, 1), None), "str-subclass": (_Str("1024"), None), "np.array": (np.array(1024), None),
            "np.int64-neg": (np.int64(-5), None), "np.int64-huge": (np.int64(2**62), None)}


def numeric_calls():
    """(label, thunk, reference thunk or None) per argument x value."""
    import omlx_profiles as op
    from omlx_profiles.compat import MemoryMonitor
    from omlx_profiles.peak.request import Request

    prof = op.default_registry().resolve(MODEL).profile
    est = op.Estimator(prof)
    out = []
    for k, (v, plain) in numeric_values().items():
        ref = (lambda f, p=plain: (lambda: f(p))) if plain is not None else (lambda f: None)

        def add(label, f):
            out.append((f"{label}[{k}]", (lambda f=f, v=v: f(v)), ref(f)))

        add("Request(tokens)", lambda x: est.total_bytes(Request(x), 0, "cpu"))
        add("Request(chunk)", lambda x: est.total_bytes(Request(4096, chunk=x), 0, "cpu"))
        add("Request(cached)", lambda x: est.total_bytes(Request(4096, cached=x), 0, "cpu"))
        add("fits(budget)", lambda x: est.fits(Request(1000), x, backend="cpu").fits)
        add("fits(weights)", lambda x: est.fits(Request(1000), 64 << 30, weights_bytes=x, backend="cpu").total_bytes)
        add("fits(reserve)", lambda x: est.fits(Request(1000), 64 << 30, reserve=x, backend="cpu").fits)
        add("max_tokens(budget)", lambda x: est.max_tokens(x, backend="cpu"))
        add("max_tokens(limit)", lambda x: est.max_tokens(64 << 30, limit=x, backend="cpu"))
        add("kv_bytes(tokens)", lambda x: est.kv_bytes(x))
        add("op.kv_bytes(tokens)", lambda x: op.kv_bytes(prof, x))
        add("prepare(chunk)", lambda x: est.prepare(x, backend="cpu"))
        add("total_bytes(weights)", lambda x: est.total_bytes(Request(1000), x, "cpu"))
        add("MemoryMonitor(max_kv)", lambda x: MemoryMonitor(x, backend="cpu").max_kv_cache_memory)
        add("MemoryMonitor(max_memory)", lambda x: MemoryMonitor(1 << 30, backend="cpu", max_memory=x).max_memory)

        def facade(meth, *args, **kw):
            def f(x):
                m = MemoryMonitor(None, eviction_enabled=False, backend="cpu", max_memory=1 << 36)
                m.set_profile(prof)
                return getattr(m, meth)(*[x if a is ... else a for a in args], **kw)
            return f

        add("prefill_peak_bytes(new)", facade("estimate_prefill_peak_bytes", ..., 2048))
        add("prefill_peak_bytes(chunk)", facade("estimate_prefill_peak_bytes", 4096, ...))
        add("block_memory(tokens)", facade("estimate_block_memory", ...))
        add("prompt_kv(tokens)", facade("estimate_prompt_kv_bytes", ...))
        add("set_profile(dtype_size)", lambda x: (lambda m: (m.set_profile(prof, dtype_size=x),
                                                              m.estimate_block_memory(64))[1])(
            MemoryMonitor(1 << 30, backend="cpu")))
    return out


#: the API calls whose refusal must be typed (``OmlxProfilesError``); the facade's may be ValueError / TypeError,
#: as oMLX's own checks raise
TYPED = ("Request", "fits", "max_tokens", "kv_bytes", "op.kv_bytes", "prepare", "total_bytes")


def numeric_allowed(label: str):
    from omlx_profiles.errors import OmlxProfilesError

    return OmlxProfilesError if label.startswith(TYPED) else (OmlxProfilesError, ValueError, TypeError)


def numeric_problems(label: str, fn, ref) -> list[str]:
    """``call_problems`` plus: a number spelled another way answers as the plain int it spells."""
    def same_as_plain(label, got):
        if got is None or ref is None:
            return []
        try:
            want = ref()
        except BaseException as e:  # noqa: BLE001
            want = f"raised {type(e).__name__}"
        return [] if got == want else [f"WRONG {got!r} != plain int's {want!r}"]

    return call_problems(label, fn, numeric_allowed, same_as_plain)


def report_numeric() -> int:
    return report_calls("numeric", [(label, (fn, ref)) for label, fn, ref in numeric_calls()],
                        problems=lambda label, fr: numeric_problems(label, *fr))


def cuda_cases(root: Path):
    ctx = "40960"
    for chunk in ("1", "3", "17", "255", "513", "4095"):
        yield ["estimate", MODEL, "--backend", "cuda", "--tokens", "32k", "--chunk", chunk], None
        yield ["fit", MODEL, "--backend", "cuda", "--budget", "24GiB", "--chunk", chunk], None
    for cached in ("40000", "40958", "40959"):
        yield ["estimate", MODEL, "--backend", "cuda", "--tokens", ctx, "--cached", cached], None
        yield ["fit", MODEL, "--backend", "cuda", "--budget", "1PiB", "--cached", cached], None
    for budget in ("1B", "17GiB", "1PiB"):
        yield ["fit", "gemma-3-27b-it", "--backend", "cuda", "--budget", budget], None
        yield ["fit", "llama-3.1-8b-instruct", "--backend", "cuda", "--budget", budget, "--ranks", "2",
               "--parallel", "tensor"], None
    yield ["chart", MODEL, "gemma-3-27b-it", "--backend", "cuda", "--budget", "64GiB", "-o", str(root / "c.svg")], None
    yield ["chart", MODEL, "--backend", "cuda", "--chunk", "17", "-o", str(root / "d.svg")], None


def config_cases(root: Path):
    variants = {"float-layers": {"num_hidden_layers": 36.0}, "sci-hidden": {"hidden_size": 4.096e3},
                "str-heads": {"num_attention_heads": "32"}, "negzero-kv": {"num_key_value_heads": -0.0},
                "max-int-ctx": {"max_position_embeddings": 2**31 - 1}, "over-int-ctx": {"max_position_embeddings": 2**31},
                "heads-not-divisible": {"num_key_value_heads": 7}, "head-dim-odd": {"head_dim": 127},
                "head-dim-disagrees": {"head_dim": 64, "hidden_size": 4096}, "vocab-1": {"vocab_size": 1},
                "inter-0": {"intermediate_size": 0}, "float-window": {"sliding_window": 4096.5},
                "ctx-1": {"max_position_embeddings": 1}, "kv-more-than-q": {"num_key_value_heads": 64}}
    for name, patch in variants.items():
        d = root / name
        d.mkdir()
        (d / "config.json").write_text(json.dumps({**QWEN, **patch}))
        yield ["estimate", str(d), "--tokens", "4k"], None
        yield ["fit", str(d), "--budget", "64GiB", "--backend", "cuda"], None


def report_env(root: Path) -> int:
    argv = ["estimate", MODEL, "--tokens", "1k"]

    def problems(label, value):
        with env_var("OMLX_PROFILES_CPU_SECONDS", value):
            return judge(argv, run(argv))

    values = ("", " ", "-1", "nan", "inf", "1e999", "0x10", "\u0661", "1_000", "3.5", "0", "abc", "\x1b[2J")
    return report_calls("env", [(f"OMLX_PROFILES_CPU_SECONDS={v!r}", v) for v in values], problems=problems)


GROUPS = ("numeric", "cuda", "config", "env")


def main(argv: list[str]) -> int:
    def one(g: str, sub: Path) -> int:
        if g == "numeric":
            return report_numeric()
        if g == "env":
            return report_env(sub)
        return report(g, {"cuda": cuda_cases, "config": config_cases}[g](sub))

    return 1 if in_groups(argv or list(GROUPS), one) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
