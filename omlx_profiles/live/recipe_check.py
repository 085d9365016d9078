"""The live check of one module recipe: the REAL mlx-lm model against the recipe's estimate, per layer.

``check_module(name)``: the recipe's tiny config (``mlxlm.recipes.live_config``) is built by mlx-lm
itself (``build_model``: ``_get_classes`` + ``ModelArgs.from_dict`` + ``Model``, random weights, MLX
CPU); the same config goes through the extraction path (``extract_config`` -> recipe interpreter ->
profile); every prompt length N of the plan goes through generate_step (prefill step 256) and one
direct call, and each layer's live ``nbytes`` (per CacheList child) must equal ``kv_report``'s. With
``kv_bits`` 4 and 8 the estimate either matches the live QuantizedKVCache bytes or refuses - and then
mlx-lm must really fail (or keep the cache unquantized) too.

The long runs (N=3000) go through the same model and cache code lazily (``live.lazy_replay``: the model
calls without ``mx.eval``): an mlx-lm cache's ``nbytes`` is its arrays' shapes x itemsize, and MLX knows
every shape when an op is recorded, so nothing evaluated could differ; evaluating them cost ~60% of this
check's time (a 3000-token bf16 call on MLX's CPU backend is ~5-13 s, quadratic in N). That the lazy
report equals the evaluated one is checked per module at N=257, both schedules.

Truth is the live model: nothing here compares with numbers this package produced earlier.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

from ..units import normalize_dtype
from ..errors import UnsupportedError
from ..extraction.from_config import extract_config
from ..kv.bytes import KVQuant, kv_report
from ..mlxlm.model_types import REMAPPING
from ..mlxlm.recipes import live_config, recipe
from .build import build_model
from .lazy_replay import replay_lazily
from .probe import cache_report, run_schedule

CLASS_OF = {"full": {"KVCache", "QuantizedKVCache"}, "sliding": {"RotatingKVCache"}, "chunked": {"ChunkedKVCache"},
            "latent": {"KVCache", "QuantizedKVCache"}, "indexer": {"KVCache"}, "state": {"ArraysCache"},
            "none": {"KVCache", "QuantizedKVCache"}}  # none: a slot entry mlx-lm lists and never writes
NS = (1, 255, 256, 257)
LONG_N = 3000
CHUNK = 256  # the prefill step the checks run mlx-lm with (a chunk size, not kv.replay.STEP, KVCache's allocation step)
QUANT = ((4, 32), (8, 32))


@dataclass
class CheckResult:
    module: str
    passed: bool
    runs: int = 0
    layers: int = 0
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    quantized: str = ""  # "checked" | "refused (live fails too)" | "unchanged (no to_quantized)"

    def as_dict(self) -> dict:
        return {"passed": self.passed, "runs": self.runs, "layers": self.layers, "seconds": round(self.seconds, 2),
                "kv_bits": self.quantized, "problems": self.problems[:10]}


def _compare(profile, live: list[dict], dtype: str, n: int, schedule: str, quant: KVQuant | None) -> tuple[int, list[str]]:
    rep = kv_report(profile, n, dtype=dtype, quant=quant, schedule=schedule, chunk=CHUNK)
    where = f"N={n} {schedule}{'@' + str(CHUNK) if schedule == 'generate' else ''} {dtype}" + (
        f" kv_bits={quant.bits}" if quant else "")
    kinds = profile.layer_types
    layers = [l for l in rep.layers if any(e.kind != "none" or e.slot for e in kinds[l.kind].entries)]
    if len(layers) != len(live):
        return 0, [f"{where}: live cache list has {len(live)} entries, the recipe gives {len(layers)}"]
    bad = []
    for est, got in zip(layers, live):
        tag = f"{where} layer {est.index} ({est.kind})"
        if est.nbytes != got["nbytes"]:
            bad.append(f"{tag}: estimate {est.nbytes} != live {got['nbytes']}")
        entries = profile.layer_types[est.kind].entries
        listed = len(entries) > 1 or entries[0].in_list  # a CacheList, of one member too
        children = got.get("children") if listed else [got]
        if listed and (got["class"] != "CacheList" or len(children or []) != len(entries)):
            bad.append(f"{tag}: expected a CacheList of {len(entries)}, live is {got['class']}")
            continue
        for e, eb, ch in zip(entries, est.entries, children):
            if ch["class"] not in CLASS_OF.get(e.kind, set()):
                bad.append(f"{tag}: {e.kind} cache should be {sorted(CLASS_OF.get(e.kind, ()))}, live is {ch['class']}")
            if listed and eb.nbytes != ch["nbytes"]:
                bad.append(f"{tag}: {e.kind} part estimate {eb.nbytes} != live {ch['nbytes']}")
            if e.kind == "sliding" and (ch.get("max_size"), ch.get("keep", 0)) != (e.window, e.keep):
                bad.append(f"{tag}: window/keep {e.window}/{e.keep} != live {ch.get('max_size')}/{ch.get('keep')}")
    return len(layers), bad


def _overlay(rec, cfg: dict, extra: dict) -> dict:
    """``cfg`` with ``extra`` over the language model's keys (under ``text.key`` for a wrapper)."""
    out = dict(cfg)
    if rec.text is not None:
        out[rec.text.key] = {**out[rec.text.key], **extra}
    else:
        out.update(extra)
    return out


def _build_probed(rec, extra: dict | None = None):
    """The tiny model, with the head-dim probe (``recipes.HEAD_DIM_PROBE``) where mlx-lm runs with it.

    Some modules read ``head_dim`` but reshape attention's output to ``hidden_size`` (exaone), so they only
    run when head_dim == hidden // heads; for them the rule cannot matter and the check runs without it."""
    for probe in (True, False):
        cfg = _overlay(rec, live_config(rec, probe_head_dim=probe), extra or {})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # CPU gather_mm promotes MoE models to float32 (said in build_model)
            model = build_model(cfg, rec.live.dtype)
        if not probe:
            return model, cfg
        try:
            run_schedule(model, 1, "direct", prefill_step=CHUNK)
            return model, cfg
        except Exception:  # noqa: BLE001 - mlx-lm's own shapes refuse head_dim != hidden // heads
            continue
    raise AssertionError("unreachable")


def _dtype_of(model) -> str:
    """The built model's dtype in the estimator's names (``dtypes``' one alias table); a dtype outside the
    three is an error, not a guess."""
    dt = normalize_dtype(model.omlx_build_info.dtype)
    if dt is None:
        raise ValueError(f"live model dtype {model.omlx_build_info.dtype!r} is not bf16, fp16 or fp32")
    return dt


def check_module(module: str, *, long: bool | None = None) -> CheckResult:
    """Build ``module``'s tiny live model and compare every layer's resident bytes with the recipe's."""
    rec = recipe(module)
    if rec is None:
        raise UnsupportedError(f"unsupported: no module recipe profiles/mlx_lm/{module}.yaml")
    t0 = time.monotonic()
    res = CheckResult(module, False)
    model, cfg = _build_probed(rec)
    dt = _dtype_of(model)
    profile = extract_config(cfg, source=f"{module} live config", dtype=dt).profile()
    plan = [("generate", n) for n in NS] + [("direct", n) for n in NS]
    _run_plan(model, profile, dt, plan, res, "")
    if rec.live.long if long is None else long:
        for schedule in ("generate", "direct"):
            if _lazy_report(model, NS[-1], schedule) != _report(model, NS[-1], schedule):
                res.problems.append(f"N={NS[-1]} {schedule}: the lazy replay's caches differ from the evaluated "
                                    "ones, so the long runs cannot be replayed lazily for this module")
        _run_plan(model, profile, dt, [("generate", LONG_N), ("direct", LONG_N)], res, "", lazy=True)
    res.quantized = _check_quantized(model, profile, dt, res)
    short = [("generate", n) for n in NS] + [("direct", n) for n in NS]
    for i, extra in enumerate(rec.live.also):
        m2, cfg2 = _build_probed(rec, extra)
        dt2 = _dtype_of(m2)
        p2 = extract_config(cfg2, source=f"{module} live config + also[{i}]", dtype=dt2).profile()
        _run_plan(m2, p2, dt2, short, res, f"also[{i}] {extra}: ")
    # every model_type mlx-lm remaps onto this module: the same tiny config under that name, built by
    # mlx-lm's own remapping and read through this package's
    for alias in sorted(a for a, m in REMAPPING.items() if m == module):
        acfg = {**cfg, "model_type": alias}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m3 = build_model(acfg, rec.live.dtype)
        dt3 = _dtype_of(m3)
        p3 = extract_config(acfg, source=f"{alias} live config", dtype=dt3).profile()
        _run_plan(m3, p3, dt3, [("generate", 257), ("direct", 257)], res, f"model_type {alias}: ")
    res.passed = not res.problems and res.layers > 0
    res.seconds = time.monotonic() - t0
    return res


def _report(model, n: int, schedule: str) -> list[dict]:
    return cache_report(run_schedule(model, n, schedule, prefill_step=CHUNK))


def _lazy_report(model, n: int, schedule: str) -> list[dict]:
    return cache_report(replay_lazily(model, n, schedule, prefill_step=CHUNK))


def _run_plan(model, profile, dt: str, plan, res: CheckResult, tag: str, *, lazy: bool = False) -> None:
    for schedule, n in plan:
        live = (_lazy_report if lazy else _report)(model, n, schedule)
        c, bad = _compare(profile, live, dt, n, schedule, None)
        res.runs += 1
        res.layers += c
        res.problems += [tag + b for b in bad]


def _check_quantized(model, profile, dt: str, res: CheckResult) -> str:
    outcome = "checked"
    for bits, group in QUANT:
        q = KVQuant(bits, group, 0)
        try:
            kv_report(profile, 257, dtype=dt, quant=q, schedule="generate", chunk=CHUNK)
        except UnsupportedError as e:
            try:
                run_schedule(model, 257, "generate", prefill_step=CHUNK, kv_bits=bits, kv_group_size=group,
                             quantized_kv_start=0)
            except Exception:  # noqa: BLE001 - mlx-lm fails as the estimate said (NotImplementedError, ...)
                outcome = "refused (mlx-lm fails too)"
                continue
            res.problems.append(f"kv_bits={bits}: the estimate refuses ({e}) but mlx-lm ran")
            continue
        try:
            live = cache_report(run_schedule(model, 257, "generate", prefill_step=CHUNK, kv_bits=bits,
                                             kv_group_size=group, quantized_kv_start=0))
        except Exception as e:  # noqa: BLE001 - mlx-lm's own failure is the finding, not a crash of the check
            res.problems.append(f"kv_bits={bits}: the estimate gives a number but mlx-lm fails "
                                f"({type(e).__name__}: {str(e)[:200]}); if the module cannot run a quantized "
                                "cache, say why in the recipe's kv_bits_fails")
            continue
        c, bad = _compare(profile, live, dt, 257, "generate", q)
        res.runs += 1
        res.layers += c
        res.problems += bad
        if "QuantizedKVCache" not in {r["class"] for r in live}:
            outcome = "unchanged (no cache kind has to_quantized)"
    return outcome
