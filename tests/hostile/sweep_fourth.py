"""The generator behind tests/test_hostile_fourth.py (#18, session 7): run it, read the misbehaviours.

``python -m tests.hostile.sweep_fourth [GROUP ...]`` drives the in-process CLI over generated cases
with a spy on the catch-all (``cli.main._internal``), a CPU-time limit per case, and the checks of
``harness``: no traceback, no "internal error", no raw control character in stdout or stderr, no exit
code outside 0/1/2, and no silence (a non-zero exit with nothing on stderr). It prints one line per
misbehaving case and the count per group. Groups: configs (structural config.json mutations: wrappers,
rope_scaling, quantization blocks, wrong-typed nested values), ids, options (every command's options,
sharding lists), safetensors. It is not a test (minutes of CPU); the cases it found live in the suite.
"""
from __future__ import annotations

import json
import os
import struct
import sys
import tempfile
from pathlib import Path

from tests.hostile.sweep_common import CASE_CPU, CONFIGS, DUMP, REPO, Timeout, judge, report, run  # noqa: F401


# ------------------------------------------------------------------------------------------------
# configs: structural mutations
# ------------------------------------------------------------------------------------------------
def _cfg(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


HOSTILE = {"huge": 10**400, "neg": -1, "zero": 0, "bool": True, "false": False, "nan": float("nan"),
           "inf": float("inf"), "float": 2.5, "strnum": "8", "empty": "", "null": None, "list": [4], "dict": {},
           "esc": "\x1b[2J", "unicode": "８", "big": 2**40}


def _rope_cases():
    base = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    out = [None, {}, [], "yarn", 4, {"type": "yarn"}, {"rope_type": "nosuch", "factor": 2.0},
           {"rope_type": "\x1b[31mred", "factor": 2.0}, {"rope_type": "dynamic", "factor": 2.0},
           {"rope_type": "linear", "factor": 0}, {"rope_type": "longrope", "short_factor": [1.0], "long_factor": "x"},
           {"rope_type": "llama3"}, {"rope_type": "mrope", "mrope_section": [16, 24, 24]},
           {"type": "yarn", "rope_type": "linear", "factor": 2}]
    for k in ("factor", "original_max_position_embeddings", "rope_type"):
        for v in HOSTILE.values():
            out.append({**base, k: v})
    return out


def _quant_cases():
    base = {"bits": 4, "group_size": 64}
    out = [{"bits": 3.5, "group_size": 64}, {"bits": True, "group_size": 64}, {"bits": 1e30, "group_size": 64},
           {"bits": 4, "group_size": 0}, {"bits": 4, "group_size": -64}, {"bits": 4, "group_size": 64, "mode": "nosuch"},
           {"bits": 4, "group_size": 64, "mode": 4}, {"bits": "4", "group_size": "64"}, {"group_size": 64}, {"bits": 4},
           {}, [], "4bit", 4, True, None,
           {**base, "model.layers.0.mlp.down_proj": {"bits": 3.5, "group_size": 64}},
           {**base, "model.layers.0.mlp.down_proj": {"bits": 8, "group_size": 0}},
           {**base, "model.layers.0.mlp.down_proj": True}, {**base, "model.layers.0.mlp.down_proj": False},
           {**base, "model.layers.0.mlp.down_proj": 8}, {**base, "model.layers.0.mlp.down_proj": "x"},
           {**base, "model.layers.0.mlp.down_proj": {"bits": 8}},
           {**base, "model.layers.0.mlp.down_proj": {"bits": 8, "group_size": 64, "mode": "mxfp4"}},
           {**base, "lm_head": {"bits": 6, "group_size": 64}}, {**base, "lm_head": None},
           {**base, "model.layers.99999.mlp.down_proj": {"bits": 8, "group_size": 64}},
           {**base, "\x1b[2J": {"bits": 8, "group_size": 64}},
           {"bits": 4, "group_size": 32, "mode": "mxfp4"}, {"bits": 4, "group_size": 16, "mode": "nvfp4"},
           {"bits": 8, "group_size": 32, "mode": "mxfp8"}, {"bits": 8, "group_size": 64, "mode": "mxfp8"}]
    hf = [{"quant_method": "awq", "bits": 4}, {"quant_method": "gptq", "bits": 3.5}, {"quant_method": "fp8"},
          {"quant_method": "mxfp4"}, {"quant_method": "bitsandbytes", "load_in_4bit": True}, {"quant_method": None},
          {"quant_method": "\x1b[2J"}, {"quant_method": ["x"]}, "x", [], None, {"quant_method": "compressed-tensors"}]
    return out, hf


def config_cases(root: Path):
    cases = []

    def add(name: str, cfg, argv_tail=("--tokens", "32k"), cmd="estimate", expect=None, raw: bytes | None = None):
        d = root / f"c{len(cases)}"
        d.mkdir()
        (d / "config.json").write_bytes(raw if raw is not None else json.dumps(cfg).encode())
        cases.append(([cmd, "--config", str(d), *argv_tail], expect))

    q = _cfg("qwen3-8b")
    for rope in _rope_cases():
        add("rope", {**q, "rope_scaling": rope})
        add("rope-p", {**q, "rope_parameters": rope})
    mlx_q, hf_q = _quant_cases()
    for qb in mlx_q:
        add("q", {**q, "quantization": qb})
        add("q2", {**q, "quantization_config": qb})
    for qb in hf_q:
        add("hfq", {**q, "quantization_config": qb})
    # text_config wrappers
    g = _cfg("gemma-3-4b-it")
    for v in HOSTILE.values():
        add("tc", {**g, "text_config": v})
        tc = dict(g["text_config"])
        add("tc-layers", {**g, "text_config": {**tc, "num_hidden_layers": v}})
        add("tc-slide", {**g, "text_config": {**tc, "sliding_window": v}})
        add("tc-pattern", {**g, "text_config": {**tc, "sliding_window_pattern": v}})
        add("tc-layer-types", {**g, "text_config": {**tc, "layer_types": v}})
    add("tc-twice", {**g, "text_config": {"text_config": g["text_config"]}})
    add("tc-mt", {**g, "text_config": {**g["text_config"], "model_type": "qwen3"}})
    add("tc-top-too", {**g, **{k: v for k, v in g["text_config"].items()}, "num_hidden_layers": 3})
    # wrong-typed top-level strings / flags
    for key in ("model_type", "architectures", "torch_dtype", "dtype", "tie_word_embeddings", "layer_types",
                "hidden_act", "sliding_window", "max_window_layers", "use_sliding_window", "head_dim",
                "attention_bias", "_name_or_path"):
        for v in HOSTILE.values():
            add(key, {**q, key: v})
    for v in ("float8_e4m3fn", "int8", "float64", "bfloat16\x1b", "BFLOAT16", "auto", "fp16", "half"):
        add("dtype", {**q, "torch_dtype": v})
        add("dtype2", {**q, "dtype": v})
    add("tie-str", {**q, "tie_word_embeddings": "false"})
    add("layers-float", {**q, "num_hidden_layers": 36.0})
    add("layers-float2", {**q, "num_hidden_layers": 36.5})
    add("layers-bool", {**q, "num_hidden_layers": True})
    add("kv>heads", {**q, "num_key_value_heads": 64})
    add("kv-nondiv", {**q, "num_key_value_heads": 7})
    add("hidden-nondiv", {**q, "hidden_size": 4095, "head_dim": None})
    add("maxpos-0", {**q, "max_position_embeddings": 0})
    add("maxpos-neg", {**q, "max_position_embeddings": -1})
    add("maxpos-1", {**q, "max_position_embeddings": 1})
    # duplicate keys: json takes the last (as transformers does); the value read must be the last one
    dup = json.dumps(q)[:-1] + ', "num_hidden_layers": 2}'
    add("dup", None, raw=dup.encode(), cmd="resolve", argv_tail=("--json",),
        expect=lambda c, o, e: None if c != 0 or '"num_layers": 2' in o or "num_layers" not in o else "dup key")
    # deep nesting, BOM, UTF-16, trailing garbage, NaN literal
    add("deep", None, raw=(b'{"model_type":"qwen3","x":' + b"[" * 50000 + b"]" * 50000 + b"}"))
    add("deep-obj", None, raw=(b'{"a":' * 20000 + b"1" + b"}" * 20000))
    add("bom", None, raw=b"\xef\xbb\xbf" + json.dumps(q).encode())
    add("utf16", None, raw=json.dumps(q).encode("utf-16"))
    add("trailing", None, raw=json.dumps(q).encode() + b"garbage")
    add("nan-literal", None, raw=json.dumps({**q, "rope_theta": float("nan")}).encode())
    add("latin1", None, raw=json.dumps({**q, "_name_or_path": "caf\xe9"}, ensure_ascii=False).encode("latin-1"))
    add("empty", None, raw=b"")
    add("list", None, raw=b"[]")
    add("null", None, raw=b"null")
    add("str", None, raw=b'"config"')
    # each real config through every command that reads one, with sliding and moe values hostile
    for name in ("gpt-oss-20b", "deepseek-v3", "qwen3-30b-a3b", "mixtral-8x7b-v0.1", "nemotron-h-56b-base-8k",
                 "lfm2.5-vl-1.6b", "qwen3.5-27b", "gemma-2-9b-it", "phi-3-mini-4k-instruct"):
        c = _cfg(name)
        for cmd, tail in (("estimate", ("--tokens", "32k")), ("fit", ("--budget", "64GB")), ("resolve", ("--explain",)),
                          ("chart", ("-o", str(root / f"o{len(cases)}.svg"), "--max-tokens", "8k"))):
            add(name, c, argv_tail=tail, cmd=cmd)
        for key in [k for k, v in c.items() if isinstance(v, (list, dict)) and k not in ("architectures",)]:
            for v in ("huge", "neg", "esc", "dict", "list", "null"):
                add(f"{name}-{key}", {**c, key: HOSTILE[v]})
    return cases


# ------------------------------------------------------------------------------------------------
# ids
# ------------------------------------------------------------------------------------------------
def id_cases():
    bases = ["Qwen/Qwen3-8B", "mlx-community/Qwen3-8B", "meta-llama/Llama-3.1-8B-Instruct", "google/gemma-3-27b-it",
             "openai/gpt-oss-20b", "Qwen/Qwen3-30B-A3B", "deepseek-ai/DeepSeek-V3", "qwen3-8b", "Qwen3-4B"]
    suffixes = ["-qat-4bit", "-4bit-DWQ-053125", "-hf-4bit-mlx", "-Instruct-2507", "-AWQ", "-mxfp8", "-MXFP4-Q8",
                "-4bit-mlx", "-MLX-4bit", "-mlx-8Bit", "-q4", "-Q4_K_M", "-GGUF", ":8b-q4_K_M", ":latest", "-bf16",
                "-fp16", "-8bit-gs32", "-3bit-gs128", "-6bit", "-2bit", "-nvfp4", "-mxfp4", "-4bit-AWQ", "-DQ3",
                "-Instruct-2507-4bit", "-Thinking-2507-FP8", "-4bit-dwq-v2", "-abliterated-4bit", "-1M-4bit",
                "-0bit", "-99bit", "-16bit", "-4Bit-MLX", "-4.5bit", "-int4", "-int8", "-w4a16", "-q8_0", ".gguf",
                "-4bit-4bit", "-mlx", "-MLX", "-e4m3", "-FP4", "-fp8-dynamic", "-4bit/", "/", "-４bit", "-4bit\x1b[2J"]
    cases = []
    for b in bases:
        for s in suffixes:
            cases.append((["resolve", b + s], None))
    weird = ["", " ", "/", "//", "a/b/c/d", "../../etc/passwd", "/etc/passwd", "./", ".", "..", "~", "-", "--",
             "ｑｗｅｎ3-8b", "qwen3‐8b", "qwеn3-8b", "QWEN3-8B", "qwen3-8b\u200b", "qwen3-8b\u202e", "\x1b[2Jqwen3-8b",
             "q" * 5000, "a/" * 2000 + "b", "qwen3-8b" + "-4bit" * 500, "hf.co/Qwen/Qwen3-8B",
             "https://huggingface.co/Qwen/Qwen3-8B", "huggingface.co/Qwen/Qwen3-8B", "hf://Qwen/Qwen3-8B",
             "Qwen/Qwen3-8B@main", "Qwen/Qwen3-8B:main", "ollama://qwen3:8b", "qwen3:8b", "qwen3", "8b",
             "Qwen/Qwen3-8B\n", "Qwen/\nQwen3-8B", "Qwen/Qwen3-8B\x00", "\udcff", "null", "None", "0", "-1"]
    for w in weird:
        for cmd in (["resolve", w], ["estimate", w, "--tokens", "1k"], ["resolve", w, "--json"]):
            cases.append((cmd, None))
    return cases


# ------------------------------------------------------------------------------------------------
# options
# ------------------------------------------------------------------------------------------------
OPTV = ["0", "-1", "1", "nan", "inf", "-inf", "1e400", "1e3", "1.5", "0x10", "1_000", "٢", "８", "", " ", "1k", "1K",
        "1kb", "1m", "1g", "1t", "2^31", "99999999999999999999999", "true", "none", "\x1b[2J", "1,2", ",", "1,,2",
        "-0", "+5", " 5 ", "5 ", "1e3k", "32kk", "32 k", "1.5k", "0.1", "1/2", "1GiB", "1PiB", "2PiB", "1EiB", "1EB"]
SIZEV = OPTV + ["64GiB", "64gib", "64 GiB", "64G", "64GB,32GB", "64GiB,", ",64GiB", "64GiB,64GiB,64GiB", "1B",
                "0B", "-64GiB", "64GiBs", "64 gigabytes", "1.1TB", "1.5TiB", "0.5B", "1e-3GB", "NaNGB", "infGB"]


def option_cases(root: Path):
    m = "qwen3-8b"
    cases = []
    per = {
        "estimate": [(f, OPTV) for f in ("--tokens", "--chunk", "--kv-start", "--cached", "--weights-bits")]
        + [(f, SIZEV) for f in ("--weights", "--reserve", "--budget")] + [("--mlx-version", ["0", "abc", "99.0", "", "0.30.0",
                                                                                             "\x1b[2J", "1" * 500])],
        "fit": [(f, OPTV) for f in ("--chunk", "--cached", "--weights-bits")]
        + [(f, SIZEV) for f in ("--weights", "--reserve", "--budget")],
        "chart": [(f, OPTV) for f in ("--max-tokens", "--chunk", "--cached")] + [("--budget", SIZEV)],
    }
    base = {"estimate": ["--tokens", "8k"], "fit": ["--budget", "64GB"], "chart": ["--max-tokens", "8k"]}
    for cmd, flags in per.items():
        for flag, values in flags:
            for v in values:
                argv = [cmd, m, *[a for a in base[cmd] if not (flag == a)], flag, v]
                if flag in base[cmd]:
                    argv = [cmd, m, flag, v]
                if cmd == "chart":
                    argv += ["-o", str(root / f"c{len(cases)}.svg")]
                cases.append((argv, None))
    # sharding flags
    for cmd, tail in (("estimate", ["--tokens", "8k"]), ("fit", ["--budget", "64GB"]),
                      ("chart", ["--max-tokens", "8k"])):
        for ranks in ("0", "1", "2", "3", "7", "37", "1024", "1025", "-2", "2.0", "1e3", "", "x"):
            for par in ("tensor", "pipeline", None):
                argv = [cmd, m, *tail, "--ranks", ranks] + (["--parallel", par] if par else [])
                if cmd == "chart":
                    argv += ["-o", str(root / f"s{len(cases)}.svg")]
                cases.append((argv, None))
        for split in ("36", "18,18", "35,1", "36,0", "0,36", "1,35", "-1,37", "18,18,0", "", ",", "18,,18", "1e1,26",
                      "18, 18", "999999999999999999999,1", "x,y", "12,12,12", "37,-1"):
            ranks = str(max(1, split.count(",") + 1))
            argv = [cmd, m, *tail, "--ranks", ranks, "--parallel", "pipeline", "--split", split]
            if cmd == "chart":
                argv += ["-o", str(root / f"p{len(cases)}.svg")]
            cases.append((argv, None))
        cases.append(([cmd, m, *tail, "--split", "18,18"], None))
        cases.append(([cmd, m, *tail, "--parallel", "tensor"], None))
        cases.append(([cmd, m, *tail, "--ranks", "2", "--parallel", "tensor", "--split", "18,18"], None))
        for b in ("64GB,32GB", "64GB,32GB,16GB", "64GB,", "1PiB,1PiB", "0,64GB", "-1,64GB", "nan,64GB"):
            argv = [cmd, m, *tail, "--ranks", "2", "--parallel", "pipeline", "--budget", b]
            if cmd == "fit":
                argv = [cmd, m, "--ranks", "2", "--parallel", "pipeline", "--budget", b]
            if cmd == "chart":
                argv += ["-o", str(root / f"b{len(cases)}.svg")]
            cases.append((argv, None))
        cases.append(([cmd, m, *tail, "--budget", "64GB,32GB"], None))
    # other commands
    for v in ("profile", "nosuch", "", "\x1b[2J"):
        cases.append((["schema", "--name", v], None))
    for argv in (["schema", "--check", str(root / "nope")], ["schema", "--check", "/dev/null"],
                 ["schema", "--write", "/dev/null"], ["schema", "--write", "/proc/x"], ["coverage", "--json", "--check"],
                 ["validate", "/dev/null"], ["validate", "/nonexistent"], ["validate", str(root)],
                 ["validate", "--format", "sarif", "/nonexistent"], ["validate", "--format", "json", "/dev/null"],
                 ["validate", "--with-siblings", "/dev/null"],
                 ["extract", "qwen3-8b"], ["extract", "--name", "\x1b[2J", str(CONFIGS / "qwen3-8b.json")],
                 ["extract", "--name", "", str(CONFIGS / "qwen3-8b.json")],
                 ["extract", "--name", "a" * 10000, str(CONFIGS / "qwen3-8b.json")],
                 ["extract", "--name", "x\ny: 1", str(CONFIGS / "qwen3-8b.json")],
                 ["extract", "--name", "../../x", "--write", str(root / "n.yaml"), str(CONFIGS / "qwen3-8b.json")],
                 ["resolve", "qwen3-8b", "--against", str(CONFIGS / "qwen3-8b.json")],
                 ["resolve", "qwen3-8b", "--strict"], ["estimate", "qwen3-8b", "--tokens", "1k", "--revision", ""],
                 ["estimate", "qwen3-8b", "--tokens", "1k", "--revision", "\x1b[2J"],
                 ["estimate", "qwen3-8b", "--tokens", "1k", "--hub-refresh"],
                 ["calibrate", "qwen3-8b", "--tokens", "1k", "--no-save", "--layers", "0"],
                 ["calibrate", "qwen3-8b", "--tokens", "1k", "--no-save", "--layers", "period"],
                 ["calibrate", "qwen3-8b", "--tokens", "1k", "--no-save", "--layers", "x"],
                 ["calibrate", "qwen3-8b", "--tokens", "1k", "--no-save", "--layers", "99999"],
                 ["calibrate", "qwen3-8b", "--tokens", "", "--no-save"],
                 ["calibrate", "qwen3-8b", "--tokens", "1k", "--cached", "2k", "--no-save"],
                 ["calibrate", "qwen3-8b", "--tokens", "1k", "--repeats", "0", "--no-save"],
                 ["calibrate", "qwen3-8b", "--tokens", "1k", "--out", "/dev/null"],
                 ["calibrate", "qwen3-8b", "--tokens", "1k", "--out", str(root), "--no-save"],
                 ["estimate", "qwen3-8b", "--tokens", "1k", "--cached", "2k"],
                 ["estimate", "qwen3-8b", "--tokens", "40960"], ["estimate", "qwen3-8b", "--tokens", "40961"],
                 ["estimate", "qwen3-8b", "--tokens", "1k", "--cached", "40960"],
                 ["estimate", "qwen3-8b", "--tokens", "100", "--cached", "40900", "--budget", "1PiB"],
                 ["chart", "qwen3-8b", "--max-tokens", "1M", "-o", str(root / "big.svg")],
                 ["chart", "qwen3-8b", "--cached", "1M", "-o", str(root / "cached.svg")],
                 ["fit", "qwen3-8b", "--budget", "1PiB"], ["fit", "qwen3-8b", "--budget", "1PiB", "--cached", "1M"],
                 ["fit", "qwen3-8b", "--budget", "1B"], ["fit", "qwen3-8b", "--budget", "64GB", "--reserve", "64GB"],
                 ["estimate", "qwen3-8b", "--tokens", "1k", "--kv-bits", "4", "--kv-start", "0"],
                 ["estimate", "qwen3-8b", "--tokens", "1k", "--schedule", "direct", "--chunk", "1"],
                 ["estimate", "qwen3-8b", "--tokens", "1G", "--schedule", "direct"],
                 ["estimate", "qwen3-8b", "--tokens", "1G", "--chunk", "1"]):
        cases.append((argv, None))
    return cases


# ------------------------------------------------------------------------------------------------
# safetensors
# ------------------------------------------------------------------------------------------------
def _st(path: Path, header, data: int, raw: bytes | None = None, prefix: int | None = None) -> None:
    raw = raw if raw is not None else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw) if prefix is None else prefix) + raw + b"\0" * data)


def safetensors_cases(root: Path):
    cfg = _cfg("qwen3-0.6b")
    cases = []

    def mdir(files: dict, index=None, expect=None, cmd=("estimate",), tail=("--tokens", "1k")):
        d = root / f"s{len(cases)}"
        d.mkdir()
        (d / "config.json").write_text(json.dumps(cfg))
        for name, spec in files.items():
            p = d / name
            p.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(spec, tuple):
                _st(p, *spec)
            elif callable(spec):
                spec(p)
        if index is not None:
            (d / "model.safetensors.index.json").write_text(index if isinstance(index, str) else json.dumps(index))
        cases.append(([*cmd, str(d), *tail], expect))

    t = lambda off, n=4, dt="F32", shape=None: {"dtype": dt, "shape": shape or [n // 4], "data_offsets": off}  # noqa: E731
    exact_fits = lambda c, o, e: None  # noqa: E731
    mdir({"model.safetensors": ({"a": t([0, 4]), "b": t([4, 8])}, 8)})  # ok
    mdir({"model.safetensors": ({"a": t([0, 8]), "b": t([4, 8])}, 8)})  # overlap
    mdir({"model.safetensors": ({"a": t([0, 4]), "b": t([8, 12])}, 12)})  # gap
    mdir({"model.safetensors": ({"a": t([0, 4]), "b": t([4, 8])}, 4)})  # past EOF
    mdir({"model.safetensors": ({"a": t([0, 4]), "b": t([4, 8])}, 100)})  # trailing
    mdir({"model.safetensors": ({"a": t([0, 4], dt="F4"), "b": t([4, 8])}, 8)})  # unknown dtype
    mdir({"model.safetensors": ({"a": t([0, 4], dt="f32")}, 4)})  # lowercase dtype
    mdir({"model.safetensors": ({"a": t([0, 4], dt="F8_E4M3")}, 4)})
    mdir({"model.safetensors": ({"a": {"dtype": "F32", "shape": [2**62, 2**62], "data_offsets": [0, 4]}}, 4)})
    mdir({"model.safetensors": ({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, 4)})
    mdir({"model.safetensors": ({"a": {"dtype": "F32", "shape": [1.0], "data_offsets": [0, 4]}}, 4)})
    mdir({"model.safetensors": ({"a": {"dtype": "F32", "shape": [True], "data_offsets": [0, 4]}}, 4)})
    mdir({"model.safetensors": ({"a": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}}, 4)})
    mdir({"model.safetensors": ({"a": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}}, 0)})
    mdir({"model.safetensors": ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}}, 4)})
    mdir({"model.safetensors": ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}}, 4)})
    mdir({"model.safetensors": ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [True, 4]}}, 4)})
    mdir({"model.safetensors": ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0.0, 4.0]}}, 4)})
    mdir({"model.safetensors": ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "x": 1}}, 4)})
    mdir({"model.safetensors": ({"a": {"dtype": "F32", "shape": [1]}}, 4)})
    mdir({"model.safetensors": ({}, 0)})
    mdir({"model.safetensors": ({"__metadata__": {"format": "pt"}}, 0)})
    mdir({"model.safetensors": ({"__metadata__": None, "a": t([0, 4])}, 4)})
    mdir({"model.safetensors": ({"__metadata__": [], "a": t([0, 4])}, 4)})
    mdir({"model.safetensors": (None, 4, b'{"a":' + json.dumps(t([0, 4])).encode() + b',"a":'
                                + json.dumps(t([0, 4])).encode() + b"}")})  # duplicate names
    mdir({"model.safetensors": (None, 4, b'{"\xff\xfe":' + json.dumps(t([0, 4])).encode() + b"}")})  # non-UTF-8
    mdir({"model.safetensors": (None, 4, b'{"\x1b[2J":' + json.dumps(t([0, 4])).encode() + b"}")})  # raw ESC in name
    mdir({"model.safetensors": (None, 4, b'{"\\u001b[2J":' + json.dumps(t([0, 4]), ).encode() + b"}")})
    mdir({"model.safetensors": (None, 4, b"[]")})
    mdir({"model.safetensors": (None, 4, b"")})
    mdir({"model.safetensors": (None, 4, b"{" * 100000)})
    mdir({"model.safetensors": (None, 4, json.dumps({"a": t([0, 4])}).encode() + b"   ")})  # padded (allowed)
    mdir({"model.safetensors": (None, 4, json.dumps({"a": t([0, 4])}).encode(), 2**63)})  # lying prefix
    mdir({"model.safetensors": (None, 4, json.dumps({"a": t([0, 4])}).encode(), 2**64 - 1)})
    mdir({"model.safetensors": (None, 4, json.dumps({"a": t([0, 4])}).encode(), 0)})
    mdir({"model.safetensors": lambda p: p.write_bytes(b"\0" * 7)})
    mdir({"model.safetensors": lambda p: p.write_bytes(b"")})
    mdir({"model.safetensors": lambda p: os.mkfifo(p)})
    mdir({"model.safetensors": lambda p: p.symlink_to("/nonexistent")})
    mdir({"model.safetensors": lambda p: p.mkdir()})
    mdir({"model.safetensors": lambda p: p.symlink_to("/dev/zero")})
    mdir({"model.safetensors": lambda p: p.symlink_to("/dev/null")})
    mdir({"model.safetensors": lambda p: p.symlink_to(p)})
    mdir({"MODEL.SAFETENSORS": ({"a": t([0, 4])}, 4)})
    mdir({"model.safetensors": ({"a": t([0, 4])}, 4), "extra.safetensors": ({"b": t([0, 4])}, 4)})
    mdir({"weights.safetensors": ({"a": t([0, 4])}, 4)})
    mdir({"model-00001-of-00002.safetensors": ({"a": t([0, 4])}, 4)})
    mdir({"model-00001-of-00002.safetensors": ({"a": t([0, 4])}, 4),
          "model-00002-of-00002.safetensors": ({"a": t([0, 4])}, 4)})  # duplicate tensor across shards
    mdir({"model-00001-of-00002.safetensors": ({"a": t([0, 4])}, 4),
          "model-00002-of-00003.safetensors": ({"b": t([0, 4])}, 4)})  # inconsistent totals
    mdir({"model-00001-of-00000.safetensors": ({"a": t([0, 4])}, 4)})
    mdir({"model-00000-of-00001.safetensors": ({"a": t([0, 4])}, 4)})
    mdir({"model-99999-of-99999.safetensors": ({"a": t([0, 4])}, 4)})
    ok = ({"a": t([0, 4]), "b": t([4, 8])}, 8)
    for wm in ({"a": "model.safetensors", "b": "../x.safetensors"}, {"a": "model.safetensors", "b": "/etc/passwd"},
               {"a": "model.safetensors", "b": "missing.safetensors"}, {"a": "model.safetensors", "b": ""},
               {"a": "model.safetensors", "b": "."}, {"a": "model.safetensors", "b": "sub"},
               {"a": "model.safetensors", "b": "\x1b[2J.safetensors"}, {"a": "model.safetensors", "b": None},
               {"a": "model.safetensors", "b": 5}, {"a": "model.safetensors", "b": ["model.safetensors"]},
               {"a": "model.safetensors"}, {}, {"a": "model.safetensors", "zzz": "model.safetensors"},
               {"a": "model.safetensors", "b": "model.safetensors\x00"}, {"a": "model.safetensors", "b": "a" * 5000},
               {"a": "model.safetensors", "b": "sub/../model.safetensors"},
               {"a": "model.safetensors", "b": "./model.safetensors"}):
        mdir({"model.safetensors": ok}, index={"weight_map": wm})
    for idx in ("", "[]", "null", '{"weight_map": []}', '{"weight_map": null}', '{"weight_map": "x"}', "{",
                '{"metadata": {"total_size": -1}, "weight_map": {"a": "model.safetensors", "b": "model.safetensors"}}',
                '{"metadata": {"total_size": 1e400}, "weight_map": {"a": "model.safetensors", "b": "model.safetensors"}}',
                '{"metadata": {"total_size": 999999}, "weight_map": {"a": "model.safetensors", "b": "model.safetensors"}}',
                '{"metadata": "x", "weight_map": {"a": "model.safetensors", "b": "model.safetensors"}}'):
        mdir({"model.safetensors": ok}, index=idx)
    # index naming a FIFO / dir / symlink-out / absolute
    for kind in ("fifo", "dir", "symlink-out", "symlink-in", "dangling", "dev"):
        def make(p, kind=kind):
            if kind == "fifo":
                os.mkfifo(p)
            elif kind == "dir":
                p.mkdir()
            elif kind == "symlink-out":
                outside = root / f"outside-{len(cases)}.safetensors"
                _st(outside, {"b": t([0, 4])}, 4)
                p.symlink_to(outside)
            elif kind == "symlink-in":
                _st(p.parent / "real.safetensors", {"b": t([0, 4])}, 4)
                p.symlink_to("real.safetensors")
            elif kind == "dangling":
                p.symlink_to("nope.safetensors")
            elif kind == "dev":
                p.symlink_to("/dev/zero")
        mdir({"model-00001-of-00002.safetensors": ({"a": t([0, 4])}, 4), "model-00002-of-00002.safetensors": make},
             index={"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})
    # non-UTF-8 / control names of the shard files themselves
    return cases


GROUPS = {"configs": config_cases, "ids": lambda root: id_cases(), "options": option_cases,
          "safetensors": safetensors_cases}


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_CACHE", tempfile.mkdtemp(prefix="omlx-sweep-hf-"))
    groups = argv or list(GROUPS)
    total = 0
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        for g in groups:
            root = Path(tmp) / g
            root.mkdir()
            total += report(g, GROUPS[g](root))
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
