"""The generator behind tests/test_hostile_fifth.py (#18, session 8): new inputs for every class of the issue.

``python -m tests.hostile.sweep_fifth [GROUP ...]`` (``OMLX_SWEEP_DUMP=f.jsonl`` to keep every case) drives
the in-process CLI as ``sweep_fourth`` does (catch-all spy, CPU limit, no traceback / internal error /
raw control character / silent failure), plus the Python API and the oMLX facade, whose judge is "a
typed error (``OmlxProfilesError``; ``ValueError`` / ``TypeError`` for the facade, as oMLX raises) or
an answer with no negative byte count". Groups, each a different angle than sessions 5-7:

* ``files``: odd files where earlier passes did not put them: profile YAML (FIFO, symlink loop,
  unreadable, a directory named ``x.yaml``, non-UTF-8, NUL, BOM, CRLF), ``/proc`` files (size 0 but
  content), a sparse 2 GiB config.json, a symlink loop as config.json, an unreadable index file;
* ``interplay``: options that change each other's meaning (cached vs tokens vs chunk vs kv-start,
  schedule direct, --weights with --weights-bits, --hub with --config, sharded lists with spaces,
  signs, units and lengths that do not match the ranks);
* ``context``: prompts at, one past and far past ``max_context``, with a prefix, sharded, charted;
* ``outputs``: ``-o`` / ``--write`` spelled in every odd way (upper-case suffix, hidden name, double
  suffix, trailing slash or space, a directory, ``-``, ``/proc/self/fd/1``, a FIFO, a read-only dir);
* ``terminal``: ESC / bidi / newline in every value a command echoes (``--mlx-version``,
  ``--revision``, ``--name``, ``-o``, ``--profiles``, YAML fields, validate's github format);
* ``ids``: new suffix spellings and look-alikes;
* ``env``: environment variables (``OMLX_PROFILES_PATH`` as a FIFO, a file, a loop, unreadable;
  ``COLUMNS``; ``MPLBACKEND``; ``HOME`` unset), in a subprocess where the variable is read at import;
* ``api``: every public ``Estimator`` / ``kv_report`` / ``resolve`` argument x hostile values;
* ``facade``: the oMLX ``MemoryMonitor`` with hostile values, call orders and objects.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.hostile.sweep_common import CONFIGS, DUMP, REPO, in_groups, judge, model_dir, report, report_calls

QWEN = json.loads((CONFIGS / "qwen3-8b.json").read_text())
MODEL = "qwen3-8b"


def _profile_text() -> str:
    from omlx_profiles.registry.index import builtin_profiles_dir

    return (builtin_profiles_dir() / "qwen3.yaml").read_text()


# ------------------------------------------------------------------------------------------------
def file_cases(root: Path):
    cases = []
    text = _profile_text()
    kinds = {
        "fifo": lambda p: os.mkfifo(p),
        "loop": lambda p: os.symlink(p.name, p),
        "dangling": lambda p: os.symlink("nowhere.yaml", p),
        "dir": lambda p: p.mkdir(),
        "unreadable": lambda p: (p.write_text(text), p.chmod(0)),
        "latin1": lambda p: p.write_bytes(text.encode() + b"\n# caf\xe9\n"),
        "nul": lambda p: p.write_bytes(text.encode() + b"\x00\n"),
        "bom": lambda p: p.write_bytes(b"\xef\xbb\xbf" + text.encode()),
        "crlf": lambda p: p.write_bytes(text.replace("\n", "\r\n").encode()),
        "utf16": lambda p: p.write_bytes(text.encode("utf-16")),
        "empty": lambda p: p.write_text(""),
        "only-comment": lambda p: p.write_text("# nothing\n"),
        "list": lambda p: p.write_text("- 1\n- 2\n"),
        "scalar": lambda p: p.write_text("42\n"),
    }
    for kind, make in kinds.items():
        for suffix in (".yaml", ".YML"):
            d = model_dir(root, f"prof-{kind}{suffix}")
            make(d / f"x{suffix}")
            cases.append((["validate", str(d)], None))
            cases.append((["estimate", MODEL, "--tokens", "1k", "--profiles", str(d)], None))
            cases.append((["validate", str(d / f"x{suffix}")], None))
    # /proc files: regular, st_size 0, content on read
    for p in ("/proc/self/status", "/proc/self/environ", "/proc/self/cmdline", "/proc/cpuinfo", "/proc/self/fd/0",
              "/proc/self/mem", "/sys/kernel/mm/transparent_hugepage/enabled"):
        cases.append((["estimate", "--config", p, "--tokens", "1k"], None))
        cases.append((["extract", p], None))
        cases.append((["validate", p], None))
    # a sparse 2 GiB config.json, a symlink loop as config.json, an unreadable one, ".json" directories
    d = model_dir(root, "sparse")
    with open(d / "config.json", "wb") as f:
        f.truncate(2 << 30)
    cases.append((["estimate", "--config", str(d), "--tokens", "1k"], None))
    d = model_dir(root, "cfgloop")
    os.symlink("config.json", d / "config.json")
    cases.append((["estimate", str(d), "--tokens", "1k"], None))
    d = model_dir(root, "cfgdirjson")
    (d / "x.json").mkdir()
    cases.append((["estimate", "--config", str(d / "x.json"), "--tokens", "1k"], None))
    cases.append((["extract", str(d / "x.json")], None))
    # weight files: unreadable index, index that is a FIFO, safetensors that is unreadable, a loop
    for kind in ("index-unreadable", "index-fifo", "st-unreadable", "st-loop", "st-empty", "st-8bytes"):
        d = model_dir(root, kind, QWEN)
        if kind == "index-unreadable":
            (d / "model.safetensors.index.json").write_text('{"weight_map": {}}')
            (d / "model.safetensors.index.json").chmod(0)
        elif kind == "index-fifo":
            os.mkfifo(d / "model.safetensors.index.json")
        elif kind == "st-unreadable":
            (d / "model.safetensors").write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00{}")
            (d / "model.safetensors").chmod(0)
        elif kind == "st-loop":
            os.symlink("model.safetensors", d / "model.safetensors")
        elif kind == "st-empty":
            (d / "model.safetensors").write_bytes(b"")
        else:
            (d / "model.safetensors").write_bytes(b"\xff" * 8)
        for cmd in (["estimate", str(d), "--tokens", "1k"], ["fit", str(d), "--budget", "64GiB"],
                    ["resolve", str(d)], ["extract", str(d)]):
            cases.append((cmd, None))
    # --config that is the model directory's parent, a file with no suffix, a directory without config.json
    d = model_dir(root, "noconfig")
    (d / "model.safetensors").write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00{}")
    cases += [(["estimate", str(d), "--tokens", "1k"], None), (["extract", str(d)], None),
              (["estimate", "--config", str(d), "--tokens", "1k"], None)]
    return cases


# ------------------------------------------------------------------------------------------------
def interplay_cases(root: Path):
    cases = []
    est = ["estimate", MODEL]
    for tokens, cached, chunk in [("1", "0", "1"), ("2", "1", "1"), ("1k", "1k", None), ("1k", "1023", None),
                                  ("1k", "2k", None), ("1k", None, "4k"), ("1k", None, "1k"), ("40960", "40959", "1"),
                                  ("40960", "0", "40960"), ("40960", "0", "1048576"), ("1", None, "1073741824")]:
        a = [*est, "--tokens", tokens] + (["--cached", cached] if cached else []) + (["--chunk", chunk] if chunk else [])
        cases.append((a, None))
        cases.append((a + ["--schedule", "direct"], None))
        cases.append((a + ["--kv-bits", "4", "--kv-start", "0"], None))
    for extra in (["--weights", "4GB", "--weights-bits", "4"], ["--kv-start", "5"], ["--kv-group-size", "32"],
                  ["--kv-bits", "4", "--kv-start", "1073741824"], ["--kv-bits", "4", "--kv-start", "-1"],
                  ["--schedule", "direct", "--chunk", "1"], ["--schedule", "direct", "--cached", "100"],
                  ["--dtype", "fp32", "--kv-bits", "8"], ["--backend", "cpu", "--mlx-version", "0.1.0"],
                  ["--backend", "cuda", "--mlx-version", "0.32.0"], ["--mlx-version", "0.32.0rc1"],
                  ["--mlx-version", "0.32.0.post1"], ["--mlx-version", "v0.32.0"], ["--mlx-version", "0.32"],
                  ["--mlx-version", "=0.32.0"], ["--hub", "--config", str(CONFIGS / "qwen3-8b.json")],
                  ["--revision", "main", "--config", str(CONFIGS / "qwen3-8b.json")],
                  ["--hub-refresh"], ["--json", "--json"], ["--tokens", "2k"], ["--budget", "1GiB", "--budget", "2GiB"]):
        cases.append(([*est, "--tokens", "1k", *extra], None))
    # sharded lists
    for cmd, tail in (("estimate", ["--tokens", "8k"]), ("fit", []), ("chart", ["--max-tokens", "8k"])):
        for ranks, par, split, budget in [
                ("2", "tensor", None, "64GiB, 32GiB"), ("2", "tensor", None, " 64GiB"), ("2", "tensor", None, "+64GiB,64GiB"),
                ("2", "tensor", None, "64GiB;64GiB"), ("2", "tensor", None, "64GiB 64GiB"), ("3", "tensor", None, "1GiB,2GiB"),
                ("4", "tensor", None, "64GiB," * 3 + "64GiB"), ("4", "tensor", None, ",".join(["1PiB"] * 4)),
                ("64", "tensor", None, ",".join(["64GiB"] * 64)), ("64", "tensor", None, ",".join(["64GiB"] * 65)),
                ("2", "pipeline", "+18,18", "64GiB"), ("2", "pipeline", "18,+18", "64GiB"), ("2", "pipeline", " 18,18", "64GiB"),
                ("2", "pipeline", "0x12,18", "64GiB"), ("2", "pipeline", "18.0,18", "64GiB"), ("2", "pipeline", "١٨,18", "64GiB"),
                ("2", "tensor", None, "0GiB,64GiB"), ("2", "tensor", None, "1B,1B"), ("08", "tensor", None, "64GiB"),
                ("+2", "tensor", None, "64GiB"), (" 2", "tensor", None, "64GiB"), ("2 ", "tensor", None, "64GiB")]:
            a = [cmd, MODEL, *tail, "--ranks", ranks, "--parallel", par, "--budget", budget]
            if split:
                a += ["--split", split]
            if cmd == "chart":
                a += ["-o", str(root / f"i{len(cases)}.svg")]
            cases.append((a, None))
        a = [cmd, MODEL, *tail, "--ranks", "2", "--parallel", "tensor", "--budget", "64GiB", "--cached", "40000"]
        cases.append((a + (["-o", str(root / f"j{len(cases)}.svg")] if cmd == "chart" else []), None))
    return cases


# ------------------------------------------------------------------------------------------------
def _expect_past(code, out, err):
    if code == 0 and "PAST" not in out and "past" not in out.lower():
        return "a prompt past max_context answered 0 without saying so"
    if "FITS" in out and "DOES NOT" not in out and "PAST" not in out:
        return "FITS past the context"
    return None


def context_cases(root: Path):
    cases = []
    for tokens, cached in [("40960", None), ("40961", None), ("40961", "40000"), ("41k", "1"), ("1024m", None),
                           ("1073741824", "1073741823"), ("40962", "40960")]:
        for tail in ([], ["--budget", "1PiB"], ["--json"], ["--ranks", "2", "--parallel", "tensor"],
                     ["--ranks", "2", "--parallel", "tensor", "--budget", "1PiB"]):
            a = ["estimate", MODEL, "--tokens", tokens] + (["--cached", cached] if cached else []) + tail
            from omlx_profiles.units import parse_tokens

            exp = _expect_past if parse_tokens(tokens) > 40960 else None
            cases.append((a, exp))
    for cached in ("40959", "40960", "40704", "40448"):
        cases.append((["fit", MODEL, "--budget", "1PiB", "--cached", cached], None))
        cases.append((["fit", MODEL, "--budget", "1PiB", "--cached", cached, "--ranks", "2", "--parallel", "tensor"], None))
        cases.append((["chart", MODEL, "--budget", "1PiB", "--cached", cached, "--max-tokens", "64k", "-o",
                       str(root / f"ctx{len(cases)}.svg")], None))
    # a config with no max_position_embeddings: context unknown
    cfg = {k: v for k, v in QWEN.items() if k != "max_position_embeddings"}
    d = model_dir(root, "nomax", cfg)
    cases += [(["estimate", str(d), "--tokens", "10m"], None), (["fit", str(d), "--budget", "1PiB", "--weights", "16GB"], None),
              (["estimate", str(d), "--tokens", "1k", "--budget", "1PiB", "--weights", "16GB"], None)]
    return cases


# ------------------------------------------------------------------------------------------------
def output_cases(root: Path):
    cases = []
    ro = root / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    fifo = root / "out.fifo"
    os.mkfifo(fifo)
    (root / "adir.png").mkdir()
    names = ["X.PNG", "x.Svg", ".png", "x.svg.png", "x.png.txt", "x.png/", "x.png ", " x.png", "-", "/proc/self/fd/1",
             "/dev/stdout", str(fifo), str(root / "adir.png"), str(ro / "x.png"), str(root / "no" / "such" / "x.png"),
             "x.jpeg", "x.eps", "x.ps", "x.pgf", "x.raw", "x.tiff", "x.PDF", "x" * 300 + ".png", "x\ny.png",
             "x\x1b[2J.png", "\u202ex.png", "~nosuchuser/x.png", "x.png\x00", "con.png"]
    for n in names:
        p = n if n.startswith("/") or n.startswith("~") or n == "-" else n
        cases.append((["chart", MODEL, "--max-tokens", "4k", "-o", p], None))
    for n in ["X.YAML", "x.yml", ".yaml", "x.yaml/", "x.json", "x", "-", "/dev/stdout", str(fifo), str(ro / "x.yaml"),
              str(root / "adir.png"), "x\x1b[2J.yaml", "x\u202e.yaml", "x" * 300 + ".yaml"]:
        cases.append((["extract", str(CONFIGS / "qwen3-8b.json"), "--write", n], None))
    for n in [str(fifo), str(ro), "/dev/stdout", "-", str(root / "afile")]:
        (root / "afile").write_text("x")
        cases.append((["schema", "--write", n], None))
        cases.append((["calibrate", MODEL, "--out", n], None))
    return cases


# ------------------------------------------------------------------------------------------------
ESCS = ["\x1b[2J", "\x1b]0;pwned\x07", "\u202e", "\x9b31m", "a\nb", "a\rb", "\x07", "\u2066x\u2069", "\x00"]


def terminal_cases(root: Path):
    cases = []
    for e in ESCS:
        cases += [
            (["estimate", MODEL, "--tokens", "1k", "--mlx-version", f"0.32{e}"], None),
            (["estimate", MODEL, "--tokens", "1k", "--revision", f"main{e}"], None),
            (["estimate", f"Qwen/Qwen3-8B{e}", "--tokens", "1k"], None),
            (["extract", str(CONFIGS / "qwen3-8b.json"), "--name", f"n{e}"], None),
            (["extract", str(CONFIGS / "qwen3-8b.json"), "--name", f"n{e}", "--json"], None),
            (["estimate", MODEL, "--tokens", "1k", "--profiles", str(root / f"p{e}")], None),
            (["chart", MODEL, "--max-tokens", "4k", "-o", str(root / f"c{e}.png")], None),
            (["validate", "--format", "github", str(root / f"v{e}.yaml")], None),
            (["resolve", f"qwen3-8b{e}", "--explain"], None),
        ]
    # YAML values with control characters, printed by resolve / validate in every format
    text = _profile_text()
    for k, e in enumerate(ESCS[:-1]):
        d = model_dir(root, f"yamlesc{k}")
        bad = text.replace("family: qwen3", f"family: \"qwen3{e.encode('unicode_escape').decode()}\"", 1)
        (d / f"f{k}.yaml").write_text(bad + f"\n# {e!r}\n")
        d2 = model_dir(root, f"yamlesc-name{k}")
        (d2 / f"g{k}.yaml").write_text(f"family: \"x{e.encode('unicode_escape').decode()}\"\nmodel_type: qwen3\n")
        for fmt in ("text", "github", "json", "sarif"):
            cases.append((["validate", "--format", fmt, str(d)], None))
            cases.append((["validate", "--format", fmt, str(d2)], None))
        cases.append((["resolve", MODEL, "--explain", "--profiles", str(d)], None))
    # a config.json whose string values hold escapes: model_type, _name_or_path, torch_dtype, architectures
    for k, e in enumerate(ESCS):
        for field in ("model_type", "_name_or_path", "torch_dtype", "architectures", "rope_scaling"):
            cfg = dict(QWEN)
            cfg[field] = [f"Qwen3{e}"] if field == "architectures" else ({"rope_type": f"yarn{e}", "factor": 2}
                                                                          if field == "rope_scaling" else f"qwen3{e}")
            d = model_dir(root, f"cfgesc{k}-{field}", cfg)
            cases.append((["estimate", str(d), "--tokens", "1k"], None))
            cases.append((["extract", str(d)], None))
    return cases


# ------------------------------------------------------------------------------------------------
def id_cases():
    bases = ["Qwen/Qwen3-8B", "meta-llama/Llama-3.1-8B-Instruct", "mlx-community/gemma-3-27b-it", "openai/gpt-oss-120b"]
    suffixes = ["-MLX-4bit-DWQ", "-4bit-DWQ-v3", "-8bit-DWQ", "-qat-q4_0", "-qat-int4", "-QAT-4bit", "-4bit-qat",
                "-bnb-4bit", "-unsloth-bnb-4bit", "-GPTQ-Int4", "-GPTQ-Int8", "-AWQ-INT4", "-FP8-Dynamic", "-fp8",
                "-FP8-dynamic-mlx", "-NVFP4", "-MXFP4", "-mxfp4-mlx", "-nvfp4-mlx", "-Q8", "-q8", "-4bit-q8",
                "-exl2", "-EXL2-4.0bpw", "-4.0bpw", "-GGUF-Q4_K_M", "-Q4_K_M.gguf", "-i1-GGUF", "-onnx", "-ov",
                "-openvino", "-int4-ov", "-4bit-mlx-lm", "-mlx-lm-4bit", "_4bit", "-4_bit", "-4-bit", "-4bits",
                "-4BIT", "-4bit-gs64", "-4bit-gs256", "-4bit-g128", "-mixed-4-6bit", "-mixed_3_6", "-3bit-DWQ",
                "-5bit", "-8bit-ls", "-2507-MLX-8bit", "-Instruct-2507-MLX-4bit", "@4bit", "#4bit", "-4bit?x=1"]
    cases = []
    for b in bases:
        for s in suffixes:
            cases.append((["resolve", b + s], None))
    for w in ["Qwen/Qwen3–8B", "Qwen/Qwen3 8B", "Qwen／Qwen3-8B", "Qwen/Qwen3-8B/", "/Qwen/Qwen3-8B", "Qwen//Qwen3-8B",
              "Qwen/Qwen3-8B/tree/main", "Qwen/Qwen3-8B/blob/main/config.json", "https://hf.co/Qwen/Qwen3-8B?x=1",
              "https://huggingface.co/Qwen/Qwen3-8B#readme", "git@hf.co:Qwen/Qwen3-8B", "ssh://hf.co/Qwen/Qwen3-8B",
              "file:///etc/passwd", "s3://bucket/model", "Qwen/Qwen3-8B\t", "\tQwen/Qwen3-8B", "QWEN/QWEN3-8B",
              "qwen/qwen3-8b-instruct", "Qwen/Qwen3-8B.", "Qwen/.Qwen3-8B", "Qwen/Qwen3-8B.json", "Qwen/Qwen3-8B.yaml",
              "x" * 96 + "/" + "y" * 96, "Qwen/" + "Qwen3-8B-" * 40]:
        for cmd in (["resolve", w], ["estimate", w, "--tokens", "1k"], ["fit", w, "--budget", "64GiB"]):
            cases.append((cmd, None))
    return cases


# ------------------------------------------------------------------------------------------------
def run_env(env: dict, argv: list[str], cwd: Path, unset=()) -> tuple:
    full = dict(os.environ)
    full.pop("OMLX_PROFILES_DEBUG", None)
    for k in unset:
        full.pop(k, None)
    full["PYTHONPATH"] = str(REPO)
    full.update(env)
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-m", "omlx_profiles.cli.main", *argv], capture_output=True, text=True,
                           timeout=60, cwd=cwd, env=full, errors="backslashreplace")
    except subprocess.TimeoutExpired:
        return None, "", "", 60.0, [], True
    return p.returncode, p.stdout, p.stderr, time.perf_counter() - t0, [], False


def env_cases(root: Path):
    fifo = root / "envfifo"
    os.mkfifo(fifo)
    (root / "envfile").write_text("x")
    os.symlink("envloop", root / "envloop")
    un = root / "unreadable"
    un.mkdir()
    (un / "q.yaml").write_text(_profile_text())
    un.chmod(0)
    est = ["estimate", MODEL, "--tokens", "1k"]
    cases = []
    for v in (str(fifo), str(root / "envfile"), str(root / "envloop"), str(un), f"{root}:{root}", "\x1b[2J",
              ":" * 1000, "/" * 5000, str(root / "nosuch"), "~nosuchuser/x", "relative/dir", "/proc/self/fd/0"):
        cases.append(({"OMLX_PROFILES_PATH": v}, est, ()))
    for v in ("0", "1", "-5", "abc", "99999999999", "\x1b"):
        cases.append(({"COLUMNS": v}, ["estimate", "--help"], ()))
        cases.append(({"COLUMNS": v}, ["fit", MODEL], ()))
    for v in ("bogus", "Agg", "", "module://nosuch"):
        cases.append(({"MPLBACKEND": v}, ["chart", MODEL, "--max-tokens", "4k", "-o", str(root / f"m{len(cases)}.png")], ()))
    cases.append(({"MPLCONFIGDIR": str(root / "envfile")},
                  ["chart", MODEL, "--max-tokens", "4k", "-o", str(root / "mc.png")], ()))
    cases.append(({}, ["chart", MODEL, "--max-tokens", "4k", "-o", "~/x.png"], ("HOME",)))
    cases.append(({"HOME": "/nonexistent"}, ["extract", str(CONFIGS / "qwen3-8b.json"), "--write", "~/x.yaml"], ()))
    for v in ("bogus", "", "CUDA", "\x1b[2J"):
        cases.append(({"OMLX_PROFILES_BACKEND": v}, est, ()))
    for v in ("1", "0", "", "yes"):
        cases.append(({"OMLX_PROFILES_DEBUG": v}, ["estimate", "nosuch-model", "--tokens", "1k"], ()))
    cases.append(({"HF_HOME": str(root / "envfile"), "HF_HUB_OFFLINE": "1"}, ["estimate", "someorg/somemodel", "--tokens", "1k"], ()))
    cases.append(({"HF_HUB_CACHE": str(fifo), "HF_HUB_OFFLINE": "1"}, ["estimate", "someorg/somemodel", "--tokens", "1k"], ()))
    cases.append(({"TMPDIR": str(root / "nosuch")}, ["chart", MODEL, "--max-tokens", "4k", "-o", str(root / "t.png")], ()))
    return cases


def report_env(root: Path) -> int:
    from tests.hostile.harness import CONTROL

    n = found = 0
    for env, argv, unset in env_cases(root):
        n += 1
        res = run_env(env, argv, root, unset)
        bad = judge(argv, res)
        bad = [b for b in bad if not b.startswith("SLOW")]
        if res[3] > 10:
            bad.append(f"SLOW {res[3]:.1f}s wall")
        if "internal error" in res[2]:
            bad.append("INTERNAL")
        if DUMP is not None:
            DUMP.write(json.dumps({"group": "env", "env": env, "argv": argv, "code": res[0], "out": res[1][:800],
                                   "err": res[2][:600], "bad": bad}) + "\n")
        if bad:
            found += 1
            print(f"[env] {env!r} {argv!r}: {'; '.join(bad)} | exit={res[0]} err={res[2][-400:]!r}", flush=True)
    print(f"== env: {n} cases, {found} misbehaving", flush=True)
    return found


# ------------------------------------------------------------------------------------------------
VALS = {"bool": True, "false": False, "neg": -1, "zero": 0, "nan": float("nan"), "inf": float("inf"), "float": 2.5,
        "str": "8", "none": None, "list": [8], "bytes": b"8", "huge": 10**40, "big": 2**62, "tokens+1": (1 << 30) + 1,
        "complex": 1j, "obj": object()}


def api_calls():
    """(label, thunk) per public API argument x hostile value."""
    import omlx_profiles as op
    from omlx_profiles.peak.request import Request

    reg = op.default_registry()
    prof = reg.resolve(MODEL).profile
    est = op.Estimator(prof)
    req = Request(1024)
    calls = []

    def add(label, fn):
        calls.append((label, fn))

    for k, v in VALS.items():
        add(f"Request(tokens={k})", lambda v=v: Request(v))
        add(f"Request(chunk={k})", lambda v=v: Request(1024, chunk=v))
        add(f"Request(cached={k})", lambda v=v: Request(1024, cached=v))
        add(f"Request(schedule={k})", lambda v=v: Request(1024, schedule=v))
        add(f"fits(budget={k})", lambda v=v: est.fits(req, v).fits)
        add(f"fits(weights={k})", lambda v=v: est.fits(req, 64 << 30, weights_bytes=v).fits)
        add(f"fits(reserve={k})", lambda v=v: est.fits(req, 64 << 30, reserve=v).message)
        add(f"fits(backend={k})", lambda v=v: est.fits(req, 64 << 30, backend=v).fits)
        add(f"fits(mlx_version={k})", lambda v=v: est.fits(req, 64 << 30, mlx_version=v).fits)
        add(f"prefill_peak(backend={k})", lambda v=v: est.prefill_peak(req, v).peak_bytes)
        add(f"prefill_peak(dtype={k})", lambda v=v: est.prefill_peak(req, dtype=v).peak_bytes)
        add(f"total_bytes(weights={k})", lambda v=v: est.total_bytes(req, v))
        add(f"max_tokens(budget={k})", lambda v=v: est.max_tokens(v))
        add(f"max_tokens(limit={k})", lambda v=v: est.max_tokens(64 << 30, limit=v))
        add(f"max_tokens(chunk={k})", lambda v=v: est.max_tokens(64 << 30, chunk=v))
        add(f"max_tokens(schedule={k})", lambda v=v: est.max_tokens(64 << 30, schedule=v))
        add(f"kv_report(tokens={k})", lambda v=v: est.kv_report(v).total)
        add(f"kv_report(chunk={k})", lambda v=v: est.kv_report(1024, chunk=v).total)
        add(f"kv_bytes(tokens={k})", lambda v=v: est.kv_bytes(v))
        add(f"op.kv_bytes(prof, {k})", lambda v=v: op.kv_bytes(prof, v))
        add(f"prepare(chunk={k})", lambda v=v: est.prepare(v))
        add(f"Estimator({k})", lambda v=v: op.Estimator(v).fits(req, 1 << 30).fits)
        add(f"resolve({k})", lambda v=v: op.resolve(v, hub=False))
        add(f"resolve(qwen, local_dir={k})", lambda v=v: op.resolve(MODEL, local_dir=v))
        add(f"reg.resolve({k})", lambda v=v: reg.resolve(v))
        add(f"load_registry(extra={k})", lambda v=v: op.load_registry(v))
    return calls


def facade_calls():
    from omlx_profiles.compat import MemoryMonitor

    calls = []

    def mm(**kw):
        m = MemoryMonitor(64 << 30, backend="metal", **kw)
        return m

    def add(label, fn):
        calls.append((label, fn))

    for k, v in VALS.items():
        add(f"MemoryMonitor(max_kv={k})", lambda v=v: MemoryMonitor(v, backend="metal").estimate_blocks_to_free(1 << 20, 16))
        add(f"MemoryMonitor(check_interval={k})", lambda v=v: MemoryMonitor(1 << 30, v, backend="metal"))
        add(f"MemoryMonitor(max_memory={k})", lambda v=v: mm(max_memory=v))
        add(f"MemoryMonitor(mlx_version={k})", lambda v=v: mm(mlx_version=v))
        add(f"set_profile({k})", lambda v=v: mm().set_profile(v))
        add(f"set_model_info(rotating={k})", lambda v=v: mm().set_model_info(36, 8, 128, rotating_layer_specs=v))
        add(f"set_model_info(rotating=[({k},1)])", lambda v=v: mm().set_model_info(36, 8, 128, rotating_layer_specs=[(v, 1)]))
        add(f"set_model_info(prefill_profile={k})", lambda v=v: mm().set_model_info(36, 8, 128, prefill_memory_profile=v))
        add(f"set_model_info(ane={k})", lambda v=v: mm().set_model_info(36, 8, 128, ane_prefill_transient_bytes=v))
        add(f"set_model_info(hidden={k})", lambda v=v: mm().set_model_info(36, 8, 128, hidden_size=v))
        add(f"set_model_info(kv_cache_layers={k})", lambda v=v: mm().set_model_info(36, 8, 128, num_kv_cache_layers=v))

        def after(v=v, meth="estimate_prefill_peak_bytes"):
            m = mm()
            m.set_model_info(36, 8, 128)
            return getattr(m, meth)(v, 2048)
        add(f"prefill_peak_bytes({k}) after info", after)
        add(f"resident_kv({k}) no info", lambda v=v: mm().estimate_resident_kv_bytes(v))
        add(f"prompt_kv({k}) no info", lambda v=v: mm().estimate_prompt_kv_bytes(v))
    return calls


GROUPS = ("files", "interplay", "context", "outputs", "terminal", "ids", "env", "api", "facade")


def main(argv: list[str]) -> int:
    from omlx_profiles.errors import OmlxProfilesError

    makers = {"files": file_cases, "interplay": interplay_cases, "context": context_cases,
              "outputs": output_cases, "terminal": terminal_cases, "ids": lambda root: id_cases()}

    def one(g: str, sub: Path) -> int:
        if g == "env":
            return report_env(sub)
        if g == "api":
            return report_calls(g, api_calls(), OmlxProfilesError)
        if g == "facade":
            return report_calls(g, facade_calls(), (OmlxProfilesError, ValueError, TypeError))
        return report(g, makers[g](sub))

    return 1 if in_groups(argv or list(GROUPS), one) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
