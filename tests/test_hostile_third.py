"""Hostile suite, third pass (#18, session 6): classes re-audited with new generated inputs.

Each section holds cases a generated sweep found misbehaving (the sweep: every path-taking argument x
every kind of path, every numeric config.json field of the real configs x hostile values, safetensors
headers of every malformed shape, ids with every quant suffix of the Hub, options x hostile values). The
fix for each is one mechanism, named in the section; the cases here are the sweep's, batched so the file
costs a few seconds. Every case is judged by ``harness.assert_clean_failure`` (or, for inputs that must
be accepted, by what the output says) and ``test_no_third_case_reaches_internal_error`` replays them all
with a spy on the CLI's catch-all.
"""
from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from omlx_profiles.cli import main as cli_main
from omlx_profiles.errors import InputError, NotMLXCheckpointError
from omlx_profiles.estimate import safetensors as st
from omlx_profiles.files import shown_path, user_path
from omlx_profiles.kv import work
from omlx_profiles.registry.naming import parse_id

from .hostile.harness import CONTROL, EXIT_INVALID, EXIT_USAGE, REPO, assert_clean_failure, run_main

QWEN = json.loads((REPO / "tests" / "configs" / "qwen3-8b.json").read_text()) \
    if (REPO / "tests" / "configs" / "qwen3-8b.json").exists() else None
NEXT = json.loads((REPO / "tests" / "configs" / "qwen3-next-80b-a3b-thinking.json").read_text())
MODEL = "qwen3-8b"


def _config() -> dict:
    from .test_hostile_second import QWEN as Q

    return dict(QWEN or Q)


def _model_dir(root: Path, name: str | bytes = "m", config: dict | None = None) -> Path:
    d = os.path.join(os.fsencode(root), name if isinstance(name, bytes) else os.fsencode(name))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, b"config.json"), "w") as f:
        f.write(json.dumps(config or _config()))
    return Path(os.fsdecode(d))


def _safetensors(path: Path, header: object = None, raw: bytes | None = None, data: int = 0) -> None:
    raw = raw if raw is not None else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * data)


# --------------------------------------------------------------------------------------------------
# paths (mechanism: files.user_path for every path argument, files.shown_path for every path written
# into a file or a message)
# --------------------------------------------------------------------------------------------------
PATH_COMMANDS = [
    ["estimate", "--config", "{p}", "--tokens", "1k"], ["fit", "--config", "{p}", "--budget", "64GB"],
    ["resolve", "--config", "{p}"], ["extract", "{p}"], ["chart", MODEL, "-o", "{p}"], ["chart", MODEL, "-o", "{p}.png"],
    ["estimate", MODEL, "--tokens", "1k", "--profiles", "{p}"], ["extract", "{cfg}", "--write", "{p}.yaml"],
]


@pytest.mark.parametrize("path", ["~nosuchuser-omlx/x", "a\x00b"])
def test_unusable_paths_are_sentences(path, tmp_path, workdir):
    """``~nosuchuser`` made pathlib raise RuntimeError, a NUL ValueError: both were "internal error"."""
    cfg = _model_dir(tmp_path)
    for argv in PATH_COMMANDS:
        r = run_main(*[a.format(p=path, cfg=cfg) for a in argv])
        assert_clean_failure(r, (EXIT_INVALID, EXIT_USAGE))


@pytest.mark.parametrize("name", [b"bad-\xff-name", b"nl\nname", b"esc\x1b[2Jx", b"c1\xc2\x85x", b'q"uote: [x]'],
                         ids=["non-utf8", "newline", "esc", "c1", "yaml-syntax"])
def test_odd_directory_names_extract_to_valid_yaml(name, tmp_path, workdir):
    """A non-UTF-8 directory name broke extract's YAML (UnicodeEncodeError); a newline in it ended a
    comment and started a key. The skeleton now holds every path as escaped text and reads back."""
    d = _model_dir(tmp_path, name)
    r = run_main("extract", str(d))
    assert r.code == 0 and "internal error" not in r.err, r.err
    assert CONTROL.search(r.out) is None, repr(r.out[:300])
    out = workdir / "x.yaml"
    r = run_main("extract", str(d), "--write", str(out))
    assert r.code == 0, r.err
    assert run_main("validate", str(out)).code == 0
    r = run_main("resolve", str(d))
    assert r.code == 0 and CONTROL.search(r.out + r.err) is None


def test_path_helpers():
    assert user_path("~nosuchuser-omlx/x") == Path("~nosuchuser-omlx/x")  # as a shell leaves it
    assert user_path("~") == Path(os.path.expanduser("~"))
    with pytest.raises(InputError, match="NUL"):
        user_path("a\x00b")
    assert shown_path(os.fsdecode(b"a-\xff\n")) == "a-\\xff\\n"


@pytest.mark.parametrize("contents", [None, "config.json", "notes.txt"])
def test_profiles_directory_without_profile_files(contents, tmp_path, workdir):
    """``--profiles DIR`` that holds no *.yaml / *.yml added nothing, silently."""
    d = tmp_path / "p"
    d.mkdir()
    if contents:
        (d / contents).write_text("{}")
    r = run_main("estimate", MODEL, "--tokens", "1k", "--profiles", str(d))
    assert_clean_failure(r, EXIT_INVALID, "no profile files", where=str(d))


# --------------------------------------------------------------------------------------------------
# safetensors (mechanism: estimate/safetensors.py checks every field's type before using it, catches
# every JSON failure, and bounds tensors before parsing by counting "{")
# --------------------------------------------------------------------------------------------------
T = {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}
BAD_HEADERS = {
    "dtype-list": ({"a": {**T, "dtype": ["F16"]}}, None, "unknown dtype"),
    "dtype-dict": ({"a": {**T, "dtype": {"F16": 1}}}, None, "unknown dtype"),
    "dtype-int": ({"a": {**T, "dtype": 16}}, None, "unknown dtype"),
    "offset-5000-digits": (None, b'{"a":{"dtype":"F16","shape":[2],"data_offsets":[0,' + b"9" * 5000 + b"]}}", "JSON"),
    "shape-5000-digits": (None, b'{"a":{"dtype":"F16","shape":[' + b"9" * 5000 + b'],"data_offsets":[0,4]}}', "JSON"),
    "metadata-not-strings": ({"__metadata__": {"format": 5}, "a": T}, None, "__metadata__"),
    "metadata-nested": ({"__metadata__": {"format": {"x": [1]}}, "a": T}, None, "__metadata__"),
    "long-name-bad-dtype": ({"n" * 100_000: {**T, "dtype": "X" * 50_000}}, None, "unknown dtype"),
}


@pytest.mark.parametrize("case", sorted(BAD_HEADERS))
def test_malformed_safetensors_headers(case, tmp_path, workdir):
    header, raw, fragment = BAD_HEADERS[case]
    d = _model_dir(tmp_path)
    _safetensors(d / "model.safetensors", header, raw, data=4)
    r = run_main("estimate", str(d), "--tokens", "1k")
    assert_clean_failure(r, EXIT_USAGE, fragment, where="model.safetensors")


def test_index_with_a_huge_integer(tmp_path, workdir):
    d = _model_dir(tmp_path)
    _safetensors(d / "model.safetensors", {"a": T}, data=4)
    (d / "model.safetensors.index.json").write_bytes(b'{"weight_map":{"a":"model.safetensors"},"n":' + b"9" * 5000 + b"}")
    assert_clean_failure(run_main("estimate", str(d), "--tokens", "1k"), EXIT_USAGE, "not valid JSON")


def test_escaped_keys_do_not_dodge_the_tensor_count(tmp_path, monkeypatch):
    """``"data\\u005foffsets"`` parses as ``data_offsets`` but was not counted: a million such entries
    were parsed for seconds before the count after parsing refused them."""
    monkeypatch.setattr(st, "MAX_TENSORS", 50)
    n = 60
    raw = "{" + ",".join(f'"t{i}":{{"dtype":"F16","shape":[1],"data\\u005foffsets":[{2 * i},{2 * i + 2}]}}'
                         for i in range(n)) + "}"
    p = tmp_path / "model.safetensors"
    _safetensors(p, raw=raw.encode(), data=2 * n)
    parsed = []
    monkeypatch.setattr(st.json, "loads", lambda *a, **k: parsed.append(1))
    with pytest.raises(st.SafetensorsError, match="60 tensors"):
        st.read_header(p)
    assert not parsed  # refused from the raw bytes, before the parse


def test_checkpoint_tensor_budget_is_checked_before_each_parse(tmp_path, monkeypatch):
    monkeypatch.setattr(st, "MAX_CHECKPOINT_TENSORS", 100)
    d = _model_dir(tmp_path)
    for s in range(3):
        _safetensors(d / f"model-{s + 1:05d}-of-00003.safetensors",
                     {f"s{s}.t{i}": {"dtype": "F16", "shape": [1], "data_offsets": [2 * i, 2 * i + 2]} for i in range(40)},
                     data=80)
    with pytest.raises(st.SafetensorsError, match="left of the 100"):
        st.read_checkpoint(d)
    assert st.MAX_CHECKPOINT_TENSORS == 100 and 100_000 <= st.MAX_TENSORS


# --------------------------------------------------------------------------------------------------
# config.json integers read through recipe formulas (mechanism: mlxlm.config.check_dim, the one bound
# every reader of a config integer applies)
# --------------------------------------------------------------------------------------------------
LINEAR_KEYS = sorted(k for k in NEXT if k.startswith("linear_") and isinstance(NEXT[k], int))


@pytest.mark.parametrize("value", [10**400, 2**31, 2**63])
def test_formula_inputs_are_bounded(value, tmp_path, workdir):
    for key in LINEAR_KEYS:
        d = _model_dir(tmp_path, f"{key}-{len(str(value))}", {**NEXT, key: value})
        r = run_main("estimate", "--config", str(d), "--tokens", "1k")
        assert_clean_failure(r, EXIT_USAGE, key, "out of range")


# --------------------------------------------------------------------------------------------------
# ids (mechanism: quantization.kernel_problem checks what a repo name says, as it checks config.json)
# --------------------------------------------------------------------------------------------------
REFUSED_IDS = ["Qwen/Qwen3-8B-7bit", "mlx-community/Qwen3-8B-4bit-gs16", "mlx-community/Llama-3.2-1B-Instruct-7bit",
               "openai/gpt-oss-20b-7bit-DWQ"]
ACCEPTED_IDS = {"mlx-community/Qwen3-8B-4bit-DWQ-053125": 4, "mlx-community/Qwen3-8B-mxfp8": 8,
                "mlx-community/Qwen3-8B-nvfp4": 4, "mlx-community/Qwen3-8B-qat-4bit": 4, "Qwen/Qwen3-8B-MLX-Q4": 4,
                "mlx-community/Qwen3-8B-4bit-g32": 4, "mlx-community/Qwen3-8B-3bit-DWQ": 3, "Qwen/Qwen3-8B-mlx-q8": 8}


def test_ids_naming_a_quantization_mlx_cannot_run(workdir):
    for q in REFUSED_IDS:
        with pytest.raises(NotMLXCheckpointError, match="MLX"):
            parse_id(q)
        assert_clean_failure(run_main("estimate", q, "--tokens", "1k"), EXIT_USAGE, "no kernel")
    for q, bits in ACCEPTED_IDS.items():
        r = run_main("resolve", q, "--json")
        assert r.code == 0 and json.loads(r.out)["weights_bits"] == bits, (q, r.err)


# --------------------------------------------------------------------------------------------------
# unbounded work (mechanism: kv/work.py, a budget of replayed prefill calls per CLI command)
# --------------------------------------------------------------------------------------------------
def test_replay_work_is_bounded_per_command(workdir, monkeypatch):
    """``chart --chunk 1`` replayed 160 points of up to 128k calls: 107 s of CPU. Every replay now charges
    the command's budget (lowered here so the test is cheap; the real one is ``COMMAND_CALLS``)."""
    monkeypatch.setattr(work, "COMMAND_CALLS", 20_000)
    for argv in (["chart", MODEL, "-o", "c.svg", "--chunk", "16"], ["estimate", MODEL, "--tokens", "40k", "--chunk", "1"],
                 ["fit", MODEL, "--budget", "30GB", "--chunk", "1"]):
        assert_clean_failure(run_main(*argv), EXIT_USAGE, "prefill calls", "--chunk")
    assert not (workdir / "c.svg").exists()
    r = run_main("estimate", MODEL, "--tokens", "32k")  # an ordinary command stays far below the budget
    assert r.code == 0, r.err
    monkeypatch.undo()
    assert 100_000 <= work.COMMAND_CALLS <= 1_000_000


def test_the_api_has_no_command_budget():
    from omlx_profiles import Estimator, default_registry
    from omlx_profiles.peak.prefill import Request

    e = Estimator(default_registry().resolve(MODEL).profile)
    assert e.prefill_peak(Request(600, chunk=1)).peak_bytes > 0
    with work.work_limit(10), pytest.raises(InputError, match="prefill calls"):
        e.prefill_peak(Request(601, chunk=1))


# --------------------------------------------------------------------------------------------------
# option values (mechanism: cli.main._Parser keeps a type function's sentence; ASCII counts)
# --------------------------------------------------------------------------------------------------
OPTION_CASES = [
    (["calibrate", MODEL, "--tokens", "abc"], "cannot read 'abc'"),
    (["calibrate", MODEL, "--tokens", ",".join(["1k"] * 40)], "at most 32"),
    (["calibrate", MODEL, "--tokens", "1k", "--repeats", "1m"], "at most 20"),
    (["estimate", MODEL, "--tokens", "1k", "--ranks", "\u0662", "--parallel", "tensor"], "--ranks"),
    (["estimate", MODEL, "--tokens", "1k", "--ranks", "2", "--parallel", "pipeline", "--split", "\u0661,35"], "--split"),
    (["estimate", MODEL, "--tokens", "1k", "--ranks", "2", "--parallel", "pipeline", "--split", "1_8,18"], "--split"),
    (["estimate", MODEL, "--tokens", "1k", "--budget", "2PiB"], "out of range"),
]


@pytest.mark.parametrize("argv,fragment", OPTION_CASES, ids=[" ".join(a[2:])[:40] for a, _ in OPTION_CASES])
def test_option_values_keep_their_sentence(argv, fragment, workdir):
    r = run_main(*argv)
    assert_clean_failure(r, EXIT_USAGE, fragment)
    assert "invalid _" not in r.err  # argparse's "invalid _token_list value" hid the reason


def test_a_budget_of_one_pebibyte_can_be_written(workdir):
    r = run_main("estimate", MODEL, "--tokens", "1k", "--budget", "1PiB", "--json")
    assert r.code == 0 and json.loads(r.out)["budget_bytes"] == 1 << 50, r.err


def test_calibrate_refuses_a_dangling_out_before_measuring(tmp_path, workdir):
    pytest.importorskip("mlx.core")
    import omlx_profiles.live.build  # noqa: F401 - imported before the 5 s deadline: mlx-lm's import is not the case
    import omlx_profiles.live.measure  # noqa: F401
    link = tmp_path / "out"
    link.symlink_to(tmp_path / "nowhere")
    r = run_main("calibrate", MODEL, "--tokens", "1k", "--shrink", "--out", str(link))
    assert_clean_failure(r, EXIT_USAGE, "symbolic link", where=str(link))


# --------------------------------------------------------------------------------------------------
# verdicts past the model's context, sharded (mechanism: report.past_context, the single-machine rule,
# applied to the sharded estimate and fit in cli/sharded.py)
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("model,parallel,tokens,budget,context", [(MODEL, "tensor", "64k", "200GB", 40960),
                                                                    ("deepseek-v3", "pipeline", "200k", "1000TB", 163840)])
def test_sharded_verdicts_stop_at_the_context(model, parallel, tokens, budget, context, workdir):
    """``estimate --ranks 2`` said "fits on every rank" for 64k tokens of a 40k model; ``fit --ranks 2``
    headlined 1,427,200 tokens."""
    shard = ["--ranks", "2", "--parallel", parallel] + (["--weights", "700GB"] if model != MODEL else [])
    r = run_main("estimate", model, "--tokens", tokens, "--budget", budget, *shard)
    assert r.code == 1 and "PAST THE MODEL'S CONTEXT" in r.out and "fits on every rank" not in r.out, r.out + r.err
    est = json.loads(run_main("estimate", model, "--tokens", tokens, "--budget", budget, *shard, "--json").out)
    assert est["fits"] is False and est["past_context"]
    if model == MODEL:
        return  # one sharded fit is enough (a 200GB budget on qwen3-8b searches to 4M tokens: seconds)
    fit = json.loads(run_main("fit", model, "--budget", budget, *shard, "--json").out)
    assert fit["max_tokens"] == context < fit["memory_max_tokens"] and fit["at_max"]["tokens"] == context


# --------------------------------------------------------------------------------------------------
# closed or full standard streams (mechanism: cli.main wraps a closed stream in a sink; messages that
# stderr cannot take are dropped; the exit code always says how the command went)
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("stdout,stderr,argv,code", [
    ("closed", "pipe", ["estimate", MODEL, "--tokens", "1k"], EXIT_USAGE),      # was: internal error + a traceback
    ("null", "closed", ["estimate", "nosuch-omlx", "--tokens", "1k"], EXIT_USAGE),  # was exit 1 (the message failed)
    ("null", "full", ["estimate", "nosuch-omlx", "--tokens", "1k"], EXIT_USAGE),
    ("full", "full", ["estimate", MODEL, "--tokens", "1k"], EXIT_USAGE),
    ("null", "closed", ["estimate", MODEL, "--tokens", "1k", "--budget", "1GB"], EXIT_INVALID),
    ("full", "pipe", ["--version"], EXIT_USAGE),  # argparse swallowed the write error: exit 0
    ("full", "pipe", ["estimate", "--help"], EXIT_USAGE),
])
def test_closed_and_full_standard_streams(stdout, stderr, argv, code, tmp_path):
    import subprocess
    import sys

    def stream(kind):
        return {"closed": None, "pipe": subprocess.PIPE, "null": subprocess.DEVNULL}.get(kind) or open("/dev/full", "w")

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("OMLX_PROFILES_DEBUG", None)
    code_py = ("import os, sys; from omlx_profiles.cli.main import main\n"
               f"{'os.close(1); sys.stdout = None' if stdout == 'closed' else ''}\n"
               f"{'os.close(2); sys.stderr = None' if stderr == 'closed' else ''}\n"
               f"sys.exit(main({argv!r}))")
    p = subprocess.run([sys.executable, "-c", code_py], stdout=stream(stdout), stderr=stream(stderr), env=env,
                       timeout=60, text=True)
    assert p.returncode == code, (p.returncode, p.stderr)
    if stderr == "pipe":
        assert "Traceback" not in p.stderr and "internal error" not in p.stderr and "standard output" in p.stderr


# --------------------------------------------------------------------------------------------------
# the contract: none of the cases above reaches the catch-all
# --------------------------------------------------------------------------------------------------
def test_no_third_case_reaches_internal_error(tmp_path, workdir, monkeypatch):
    hit = []
    real = cli_main._internal
    monkeypatch.setattr(cli_main, "_internal", lambda e: hit.append(repr(e)) or real(e))
    cfg = _model_dir(tmp_path)
    for path in ("~nosuchuser-omlx/x", "a\x00b"):
        for argv in PATH_COMMANDS:
            run_main(*[a.format(p=path, cfg=cfg) for a in argv])
    for name in (b"bad-\xff-name", b"nl\nname"):
        run_main("extract", str(_model_dir(tmp_path, name)))
    for case, (header, raw, _) in BAD_HEADERS.items():
        d = _model_dir(tmp_path, case)
        _safetensors(d / "model.safetensors", header, raw, data=4)
        run_main("estimate", str(d), "--tokens", "1k")
    for key in LINEAR_KEYS:
        run_main("estimate", "--config", str(_model_dir(tmp_path, f"n-{key}", {**NEXT, key: 10**400})), "--tokens", "1k")
    for q in REFUSED_IDS:
        run_main("resolve", q)
    for argv, _ in OPTION_CASES:
        run_main(*argv)
    assert not hit, hit
