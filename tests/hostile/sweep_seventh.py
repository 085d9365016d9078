"""The generator behind tests/test_hostile_seventh.py (#18, session 11): new inputs for every class of the issue.

``python -m tests.hostile.sweep_seventh [GROUP ...]`` (``OMLX_SWEEP_DUMP=f.jsonl`` keeps every CLI case) runs
and judges through ``sweep_common`` (catch-all spy, CPU limit, no traceback / internal error / raw control
character / silent failure). The earlier passes mostly asked "is a bad input refused in a sentence"; this one
asks, per class, whether two ways of asking the same question get the same answer (a silently wrong answer
is invisible to a crash judge):

* ``same`` (silently wrong): every real config in tests/configs read from a model directory, through
  ``--config`` and by its registry id gives the same KV bytes at 32k and the same context, or the notes say
  why they differ; the JSON and the text output agree;
* ``context`` (verdicts past the context): every registry model at ``max_context`` + 1 is never FITS (CLI,
  single and sharded, with a prefix), ``fit``'s headline never passes ``max_context``, and the API's verdict
  says the same as the CLI's;
* ``checkpoint`` (silently wrong / ignored weights): zero-size and scalar tensors, dtypes the earlier passes
  did not use, files mlx-lm does not load (``consolidated``, ``adapter_model``, upper-case, hidden), an index
  that names fewer files than are there; each must match what ``mlx_lm.utils.load_model`` loads
  (``model*.safetensors``, every one);
* ``terminal``: control characters inside config.json *values* and tensor names (earlier passes put them
  in paths and options), shown by ``resolve``, ``estimate`` and error messages;
* ``outputs``: ``-o`` / ``--write`` at a name too long for the file system, under ``/proc``, with a trailing
  dot, ``/dev/stdout``, an existing directory;
* ``bounds`` (hangs): the heaviest inputs inside the limits: a 256-layer profile YAML charted and fitted,
  a 4,096-layer one refused, six models on one chart, 64 pipeline ranks of a 256-layer config;
* ``api`` (API defaults that surprise): the API's answers equal the CLI's for the same request on every
  backend, budgets up to 1 PiB answer and past it are typed errors.
"""
from __future__ import annotations

import json
import os
import re
import struct
import sys
from pathlib import Path

from tests.hostile.sweep_common import (CONFIGS, REPO, call_problems, in_groups, judge, model_dir, report, report_calls,
                                        run)

QWEN = json.loads((CONFIGS / "qwen3-8b.json").read_text())
MODEL = "qwen3-8b"
#: registry ids whose config in tests/configs is the registry's own variant (short name = id)
SAME_SKIP: set[str] = set()


def _st(path: Path, tensors: dict, data: int) -> None:
    raw = json.dumps(tensors).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * data)


def _T(dtype: str, shape: list, a: int, b: int) -> dict:
    return {"dtype": dtype, "shape": shape, "data_offsets": [a, b]}


def _json(out: str):
    try:
        return json.loads(out)
    except ValueError:
        return None


# ------------------------------------------------------------------------------------------------
# same: one model asked three ways
# ------------------------------------------------------------------------------------------------
def same_cases(root: Path):
    from omlx_profiles.registry.index import load_registry

    reg = load_registry()
    for cfg in sorted(CONFIGS.glob("*.json")):
        name = cfg.stem
        d = model_dir(root, name)
        (d / "config.json").write_text(cfg.read_text())
        want: dict = {}

        def first(code, out, err, want=want, name=name):
            j = _json(out)
            if code != 0 or j is None:
                return None if code in (1, 2) and err.strip() else f"exit {code} without a sentence"
            want["kv"], want["ctx"] = j["kv_bytes"], j.get("max_context")
            return None

        def again(how):
            def check(code, out, err, how=how):
                j = _json(out)
                if not want:
                    return None
                if j is None:
                    return f"{how}: exit {code}, the directory answered {want}"
                if j["kv_bytes"] != want["kv"]:
                    return f"{how}: kv {j['kv_bytes']:,} != directory's {want['kv']:,}"
                return None
            return check

        yield ["estimate", str(d), "--tokens", "1k", "--json"], first
        yield ["estimate", "--config", str(cfg), "--tokens", "1k", "--json"], again("--config")
        if name in reg.profiles:
            def by_id(code, out, err, name=name):
                j = _json(out)
                if not want or j is None:
                    return None
                notes = " ".join((j.get("resolution") or {}).get("notes") or [])
                if j["kv_bytes"] != want["kv"]:
                    return f"id {name}: kv {j['kv_bytes']:,} != its config's {want['kv']:,}"
                return None if "disagree" not in notes else None
            yield ["estimate", name, "--tokens", "1k", "--json"], by_id

        def text_agrees(code, out, err, name=name):
            if not want or code != 0:
                return None
            shown = f"{want['kv']:,}"
            return None if shown in out.replace("\u202f", ",") or _mib(want["kv"]) in out else \
                f"text output does not show kv {shown} B ({_mib(want['kv'])})"
        yield ["estimate", str(d), "--tokens", "1k"], text_agrees


def _mib(n: int) -> str:
    from omlx_profiles.units import format_bytes

    return format_bytes(n)


# ------------------------------------------------------------------------------------------------
# huge: a 400-digit integer in every expert / state / head field of MoE, MLA and hybrid configs is refused
# naming the field, or (a field mlx-lm does not read) changes nothing
# ------------------------------------------------------------------------------------------------
HUGE_CONFIGS = ("deepseek-v2-lite", "gpt-oss-20b", "nemotron-h-56b-base-8k", "qwen3-next-80b-a3b-thinking")
HUGE_FIELDS = re.compile(r"expert|state|conv|ssm|mamba|group|lora|head|window|chunk|rope|dense|moe|kv|layer", re.I)


def huge_cases(root: Path, configs=HUGE_CONFIGS):
    for name in configs:
        cfg = json.loads((CONFIGS / f"{name}.json").read_text())
        base = model_dir(root, f"{name}-real", cfg)
        argv = ["estimate", "--tokens", "1k", "--backend", "cpu", "--json"]
        want: dict = {}

        def real(code, out, err, want=want):
            j = _json(out)
            if code != 0 or j is None:
                return f"the real config: exit {code} {err[:160]!r}"
            want.update(kv=j["kv_bytes"], peak=j.get("peak_bytes"))
            return None

        yield [argv[0], str(base), *argv[1:]], real
        for k, v in cfg.items():
            if isinstance(v, bool) or not isinstance(v, int) or not HUGE_FIELDS.search(k):
                continue
            d = model_dir(root, f"{name}-{k}", {**cfg, k: 10**400})

            def same_or_named(code, out, err, k=k, want=want):
                if code == 2:
                    return None if k in err else f"refused without naming {k}: {err[:160]!r}"
                j = _json(out)
                if code != 0 or j is None:
                    return f"exit {code} {err[:160]!r}"
                got = {"kv": j["kv_bytes"], "peak": j.get("peak_bytes")}
                return None if got == want else f"{k} = 10**400 answered {got}, the real config {want}"

            yield [argv[0], str(d), *argv[1:]], same_or_named


# ------------------------------------------------------------------------------------------------
# context: never FITS past max_context
# ------------------------------------------------------------------------------------------------
def context_cases(root: Path):
    from omlx_profiles.registry.index import load_registry

    reg = load_registry()
    for i, (name, prof) in enumerate(sorted(reg.profiles.items())):
        mc = prof.max_context
        if not mc:
            continue
        over = str(mc + 1)

        def not_fits(code, out, err):
            if "FITS -" in out or code == 0:
                return f"exit {code}, past the context: {out[:160]!r}"
            return None

        def headline(code, out, err, mc=mc):
            j = _json(out)
            if j and isinstance(j.get("max_tokens"), int) and j["max_tokens"] > mc:
                return f"headline {j['max_tokens']} > max_context {mc}"
            return None

        b = ["--backend", ("cpu", "metal", "cuda")[i % 3]]
        yield ["estimate", name, "--tokens", over, "--budget", "1PiB", "--weights", "1GB", *b], not_fits
        yield ["estimate", name, "--tokens", "2", "--cached", str(mc - 1), "--budget", "1PiB", "--weights", "1GB",
               *b], not_fits
        if i % 4 == 0:
            yield ["fit", name, "--budget", "1PiB", "--weights", "1GB", "--json", *b], headline
            yield ["estimate", name, "--tokens", over, "--budget", "1PiB", "--weights", "1GB", "--ranks", "2",
                   "--parallel", "pipeline", *b], not_fits


# ------------------------------------------------------------------------------------------------
# checkpoint: what mlx-lm loads, and only that
# ------------------------------------------------------------------------------------------------
def checkpoint_cases(root: Path):
    A, B = ({"a": _T("F16", [2], 0, 4)}, 4), ({"b": _T("F16", [4], 0, 8)}, 8)
    cases = {  # name -> (files, index, the weight bytes mlx-lm would load, or None: refused)
        "zero-size": ({"model.safetensors": ({"z": _T("F16", [0, 8], 0, 0), "a": _T("F16", [2], 0, 4)}, 4)}, None, 4),
        "scalar": ({"model.safetensors": ({"s": _T("F32", [], 0, 4)}, 4)}, None, 4),
        "bool": ({"model.safetensors": ({"m": _T("BOOL", [4], 0, 4)}, 4)}, None, 4),
        "f8": ({"model.safetensors": ({"f": _T("F8_E4M3", [8], 0, 8)}, 8)}, None, 8),
        "consolidated": ({"model.safetensors": A, "consolidated.safetensors": B}, None, 4),
        "adapter": ({"model.safetensors": A, "adapter_model.safetensors": B}, None, 4),
        "hidden-copy": ({"model.safetensors": A, ".model.safetensors": B}, None, 4),
        "upper-case": ({"Model.safetensors": A}, None, "unknown"),
        "index-names-fewer": ({"model-00001-of-00002.safetensors": A, "model-00002-of-00002.safetensors": B},
                              {"weight_map": {"a": "model-00001-of-00002.safetensors"}}, 12),
        "index-empty-map": ({"model.safetensors": A}, {"weight_map": {}}, 4),
        "index-only": ({}, {"weight_map": {"a": "model-00001-of-00001.safetensors"}}, None),
        "two-layouts": ({"model.safetensors": A, "model-00001-of-00001.safetensors": B}, None, 12),
        "empty-header": ({"model.safetensors": ({}, 0)}, None, 0),
        "metadata-only": ({"model.safetensors": ({"__metadata__": {"format": "mlx"}}, 0)}, None, 0),
    }
    for name, (files, index, want) in cases.items():
        d = model_dir(root, name, QWEN)
        for f, (h, data) in files.items():
            _st(d / f, h, data)
        if index is not None:
            (d / "model.safetensors.index.json").write_text(json.dumps(index))

        def expect(code, out, err, want=want):
            j = _json(out)
            if want is None:
                return None if code == 2 else f"exit {code}: expected a refusal"
            if j is None:
                return f"exit {code}: expected weights {want}: {err[:200]!r}"
            w = j.get("weights") or {}
            if want == "unknown":
                return None if w.get("bytes") is None else f"weights {w.get('bytes')} from files mlx-lm does not load"
            if w.get("bytes") != want:
                return f"weights {w.get('bytes')} != {want} (what mlx-lm loads)"
            if want == 0 and "implausibly" not in (w.get("reason") or ""):
                return "0 B of exact weights without a note"
            return None

        yield ["estimate", str(d), "--tokens", "1k", "--json"], expect


# ------------------------------------------------------------------------------------------------
# terminal: control characters inside config values and tensor names
# ------------------------------------------------------------------------------------------------
ESCS = ["\x1b[2J", "\x1b]8;;http://x\x07link\x1b]8;;\x07", "\u202eevil", "\x9b1m", "a\rb", "\x08\x08"]


def terminal_cases(root: Path):
    for i, e in enumerate(ESCS):
        for field in ("model_type", "torch_dtype", "architectures", "hidden_act", "rope_scaling"):
            value = [e] if field == "architectures" else {"rope_type": e, "factor": 2.0} if field == "rope_scaling" \
                else e
            d = model_dir(root, f"v{i}-{field}", {**QWEN, field: value})
            yield ["resolve", str(d)], None
            yield ["estimate", str(d), "--tokens", "1k"], None
        d = model_dir(root, f"t{i}", QWEN)
        _st(d / "model.safetensors", {f"w{e}": _T("F16", [3], 0, 4)}, 4)  # a shape the span does not hold
        yield ["estimate", str(d), "--tokens", "1k"], None
        d = model_dir(root, f"q{i}", {**QWEN, "quantization": {"bits": 4, "group_size": 64, f"model.{e}": {"bits": 3.5}}})
        yield ["estimate", str(d), "--tokens", "1k"], None


# ------------------------------------------------------------------------------------------------
# outputs
# ------------------------------------------------------------------------------------------------
def output_cases(root: Path):
    cfg = str(CONFIGS / "qwen3-8b.json")
    (root / "adir.svg").mkdir()
    (root / "adir.yaml").mkdir()
    long = "x" * 300
    for target in (str(root / f"{long}.svg"), "/proc/self/comm.svg", str(root / "m.svg."), "/dev/stdout",
                   str(root / "adir.svg"), str(root / "sub" / ".." / "m2.svg"), str(root / "M.SVG"),
                   "/proc/self/fd/1", str(root / "nul\u2028line.svg")):
        yield ["chart", MODEL, "--max-tokens", "4k", "--points", "8", "-o", target], None
    for target in (str(root / f"{long}.yaml"), "/proc/self/comm.yaml", str(root / "adir.yaml"), "/dev/stdout",
                   str(root / "p.yaml."), str(root / "p.YML")):
        yield ["extract", cfg, "--write", target], None

    (root / "there.yaml").write_text("keep")  # written before: refused without --force, never replaced
    for argv in (["extract", cfg, "--write", str(root / "there.yaml")], ["chart", MODEL, "-o", str(root / "there.yaml")]):
        yield argv, lambda code, out, err: None if code == 2 and ("exists" in err or ".yaml" in err) and \
            (root / "there.yaml").read_text() == "keep" else f"exit {code}: {err[:160]!r}"


# ------------------------------------------------------------------------------------------------
# bounds: the heaviest inputs inside the limits
# ------------------------------------------------------------------------------------------------
def bounds_cases(root: Path):
    text = (REPO / "profiles" / "qwen3.yaml").read_text()
    for layers in (256, 4096):
        d = root / f"p{layers}"
        d.mkdir()
        (d / "q.yaml").write_text(text.replace("num_layers: 36", f"num_layers: {layers}", 1)
                                  .replace("- name: qwen3-8b\n", f"- name: deep{layers}\n", 1)
                                  .replace("ids: [Qwen/Qwen3-8B]", f"ids: [deep/deep{layers}]", 1)
                                  .replace("aliases: [qwen3:8b]", f"aliases: [deep:{layers}]", 1))
        p = ["--profiles", str(d)]
        refused = (lambda code, out, err: None if code in (1, 2) and "num_layers" in err else
                   f"exit {code}: a 4,096-layer profile must be refused naming num_layers") if layers > 256 else None
        yield ["validate", str(d)], refused
        yield ["chart", f"deep{layers}", *p, "--budget", "192GiB", "-o", str(root / f"d{layers}.svg")], refused
        yield ["fit", f"deep{layers}", *p, "--budget", "192GiB"], refused
        yield ["fit", f"deep{layers}", *p, "--budget", "192GiB", "--backend", "cuda"], refused
        yield ["estimate", f"deep{layers}", *p, "--tokens", "40960", "--ranks", "64", "--parallel", "pipeline"], refused
    six = ["qwen3-8b", "llama-3.1-8b-instruct", "gemma-3-27b-it", "gpt-oss-20b", "deepseek-v2-lite", "qwen3.5-9b"]
    yield ["chart", *six, "--budget", "64GiB", "-o", str(root / "six.svg")], None
    yield ["chart", *six, "--budget", "64GiB", "--backend", "cuda", "-o", str(root / "six-cuda.svg")], None
    yield ["fit", "qwen3-8b", "--budget", "1PiB", "--ranks", "64", "--parallel", "pipeline", "--backend", "cuda"], None


# ------------------------------------------------------------------------------------------------
# api: the API answers as the CLI does
# ------------------------------------------------------------------------------------------------
def api_calls():
    import omlx_profiles as op
    from omlx_profiles.peak.request import Request

    reg = op.default_registry()
    calls = []
    for name in ("qwen3-8b", "gemma-3-27b-it", "gpt-oss-20b", "deepseek-v2-lite", "qwen3.5-9b"):
        prof = reg.resolve(name).profile
        est = op.Estimator(prof)
        for backend in ("cpu", "metal", "cuda"):
            for tokens, cached in ((8192, 0), (8192, 4096)):
                def same(label, got, name=name, backend=backend, tokens=tokens, cached=cached):
                    pre = ["--cached", str(cached)]  # 0 is "no prefix", as in the API (session 12)
                    res = run(["estimate", name, "--tokens", str(tokens + cached), *pre, "--backend", backend,
                               "--json"], cpu=30)
                    j = _json(res[1])
                    if j is None:
                        return [f"CLI exit {res[0]}: {res[2][:160]!r}"]
                    cli = j.get("peak_bytes")
                    return [] if cli == got else [f"WRONG API {got:,} != CLI {cli:,}"]
                calls.append((f"{name} {backend} tokens={tokens} cached={cached}",
                              lambda est=est, backend=backend, tokens=tokens, cached=cached:
                              est.prefill_peak(Request(tokens + cached, cached=cached), backend).peak_bytes, same))
    est = op.Estimator(reg.resolve(MODEL).profile)
    for budget in (1 << 50, (1 << 50) + 1, 1 << 60, 2.5e15):
        calls.append((f"fits(budget={budget})", lambda b=budget: est.fits(Request(1000), b).fits, None))
        calls.append((f"max_tokens(budget={budget})", lambda b=budget: est.max_tokens(b), None))
    return calls


def report_api() -> int:
    from omlx_profiles.errors import OmlxProfilesError

    return report_calls("api", [(label, (fn, check)) for label, fn, check in api_calls()],
                        problems=lambda label, fc: call_problems(label, fc[0], OmlxProfilesError, fc[1], cpu=60))


GROUPS = ("same", "huge", "context", "checkpoint", "terminal", "outputs", "bounds", "api")
MAKERS = {"same": same_cases, "huge": huge_cases, "context": context_cases, "checkpoint": checkpoint_cases,
          "terminal": terminal_cases, "outputs": output_cases, "bounds": bounds_cases}


def main(argv: list[str]) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    def one(g: str, sub: Path) -> int:
        if g == "api":
            return report_api()
        return report(g, MAKERS[g](sub), cpu=20.0 if g == "bounds" else 6.0)

    return 1 if in_groups(argv or list(GROUPS), one) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
