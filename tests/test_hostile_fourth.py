"""Hostile suite, fourth pass (#18, session 7): a new angle, new generated inputs.

The generator is ``tests/hostile/sweep_fourth.py`` (``python -m tests.hostile.sweep_fourth [GROUP]``):
structural config.json mutations (``rope_scaling`` / ``rope_parameters`` of every type and value,
``quantization`` blocks with per-module overrides, ``text_config`` wrappers, duplicate keys, deep
nesting), every command's options with 60 hostile values (empty, blank, non-ASCII digits, units,
overflow), the sharding lists, safetensors checkpoints (tensors shared by shards, shard numbers out of
range, index files naming escaping / missing / special files) and 570 model ids. It judges tracebacks,
"internal error", hangs (CPU timer), raw control characters and silent failures; its dump
(``OMLX_SWEEP_DUMP``) was read by hand for silent results. One section per mechanism found missing;
``test_no_fourth_case_reaches_internal_error`` replays every case with a spy on the catch-all.
"""
from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from omlx_profiles.cli import main as cli_main
from omlx_profiles.errors import InputError
from omlx_profiles.files import user_path

from .hostile.harness import EXIT_USAGE, REPO, assert_clean_failure, run_main

CONFIGS = REPO / "tests" / "configs"
QWEN = json.loads((CONFIGS / "qwen3-8b.json").read_text())
SMALL = json.loads((CONFIGS / "qwen3-0.6b.json").read_text())
MODEL = "qwen3-8b"


def _model_dir(root: Path, name: str = "m", config: dict | None = None) -> Path:
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(config if config is not None else QWEN))
    return d


def _safetensors(path: Path, header: dict, data: int) -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * data)


def _t(begin: int, end: int) -> dict:
    return {"dtype": "F32", "shape": [(end - begin) // 4], "data_offsets": [begin, end]}


# --------------------------------------------------------------------------------------------------
# empty values (mechanism: cli.main._Parser refuses an empty or blank value for every option and
# argument; files.user_path refuses an empty path). They used to mean "not given": the default
# file, the current directory, or the installed package's own folders.
# --------------------------------------------------------------------------------------------------
EMPTY_CASES = [
    ["estimate", MODEL, "--config", "", "--tokens", "1k"],  # --config ignored, MODEL used
    ["estimate", MODEL, "--tokens", "1k", "--profiles", ""],  # the working directory read as profiles
    ["estimate", MODEL, "--tokens", "1k", "--profiles", " "],
    ["resolve", MODEL, "--verify", "--against", ""],  # --against ignored
    ["chart", MODEL, "--config", "", "-o", "x.svg"],
    ["calibrate", MODEL, "--tokens", "1k", "--out", "", "--shrink", "--layers", "1"],  # wrote into the package
    ["schema", "--write", ""],  # wrote into the installed schema/ folder
    ["schema", "--check", ""],
    ["extract", ""],  # read the working directory
    ["validate", ""],  # validated the working directory
    ["estimate", MODEL, "--tokens", "1k", "--revision", ""],  # --revision ignored
    ["extract", str(CONFIGS / "qwen3-8b.json"), "--name", ""],  # --name ignored
    ["estimate", "", "--tokens", "1k"],
]


@pytest.mark.parametrize("argv", EMPTY_CASES, ids=lambda a: "-".join(x or "EMPTY" for x in a[:4]))
def test_empty_values_are_refused(argv, workdir):
    assert_clean_failure(run_main(*argv), EXIT_USAGE, "empty")


def test_empty_path_in_the_api():
    with pytest.raises(InputError, match="empty"):
        user_path("")


def test_schema_dir_expands_tilde(tmp_path, workdir, monkeypatch):
    """``schema --write ~/x`` made a directory literally named ``~`` in the working directory."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    r = run_main("schema", "--write", "~/vendor")
    assert r.code == 0, r.err
    assert (tmp_path / "home" / "vendor" / "v1").is_dir()
    assert not (workdir / "~").exists()


def test_extract_write_keeps_a_trailing_slash(workdir):
    """``extract --write x.yaml/`` wrote the file ``x.yaml`` (Path() dropped the '/'); chart refused it."""
    r = run_main("extract", str(CONFIGS / "qwen3-8b.json"), "--write", "x.yaml/")
    assert_clean_failure(r, EXIT_USAGE, "directory")
    assert not (workdir / "x.yaml").exists()


# --------------------------------------------------------------------------------------------------
# digits (mechanism: every type=int option reads ASCII digits, in _Parser._get_value)
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [
    ["estimate", MODEL, "--tokens", "1k", "--weights-bits", "８"],
    ["estimate", MODEL, "--tokens", "1k", "--weights-bits", "٨"],
    ["estimate", MODEL, "--tokens", "1k", "--kv-bits", "４"],
    ["estimate", MODEL, "--tokens", "1k", "--kv-bits", "4", "--kv-group-size", "６４"],
    ["calibrate", MODEL, "--tokens", "1k", "--cached", "-5", "--no-save", "--shrink"],
])
def test_non_ascii_or_negative_integers(argv, workdir):
    assert_clean_failure(run_main(*argv), EXIT_USAGE, argv[-1] if argv[-1] != "--shrink" else "-5")


# --------------------------------------------------------------------------------------------------
# options that need another one (mechanism: cli.main.REQUIRES, checked for every command)
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv,needed", [
    (["estimate", MODEL, "--tokens", "1k", "--reserve", "1PiB"], "--budget"),
    (["chart", MODEL, "--reserve", "1GB", "-o", "x.svg"], "--budget"),
    (["estimate", MODEL, "--tokens", "1k", "--kv-start", "10"], "--kv-bits"),
    (["estimate", MODEL, "--tokens", "1k", "--kv-group-size", "32"], "--kv-bits"),
])
def test_options_given_without_what_they_modify(argv, needed, workdir):
    assert_clean_failure(run_main(*argv), EXIT_USAGE, needed)


def test_dependent_options_with_their_partner_still_work(workdir):
    assert run_main("estimate", MODEL, "--tokens", "1k", "--reserve", "1GB", "--budget", "64GB").code == 0
    assert run_main("estimate", MODEL, "--tokens", "1k", "--kv-bits", "4", "--kv-start", "10").code == 0


# --------------------------------------------------------------------------------------------------
# safetensors checkpoints (mechanism: estimate/safetensors.read_checkpoint: one tensor in one file;
# numbered shards 1..N)
# --------------------------------------------------------------------------------------------------
def test_a_tensor_in_two_shards_is_not_summed_twice(tmp_path, workdir):
    d = _model_dir(tmp_path, config=SMALL)
    _safetensors(d / "model-00001-of-00002.safetensors", {"a": _t(0, 4)}, 4)
    _safetensors(d / "model-00002-of-00002.safetensors", {"a": _t(0, 4)}, 4)
    assert_clean_failure(run_main("estimate", str(d), "--tokens", "1k"), EXIT_USAGE, "also in", "'a'")


@pytest.mark.parametrize("name", ["model-00001-of-00000.safetensors", "model-00003-of-00002.safetensors"])
def test_shard_numbers_out_of_range(name, tmp_path, workdir):
    d = _model_dir(tmp_path, config=SMALL)
    _safetensors(d / name, {"a": _t(0, 4)}, 4)
    if "of-00002" in name:
        _safetensors(d / "model-00001-of-00002.safetensors", {"b": _t(0, 4)}, 4)
        _safetensors(d / "model-00002-of-00002.safetensors", {"c": _t(0, 4)}, 4)
    assert_clean_failure(run_main("estimate", str(d), "--tokens", "1k"), EXIT_USAGE, "shard number")


# --------------------------------------------------------------------------------------------------
# plausibility (mechanism: estimate/weights/from_profile.implausible for every weights source that is
# not the profile's own count: headers, mixed-width headers, --weights)
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", ["0", "1MB", "0.5B"])
def test_given_weights_get_the_plausibility_note(size, workdir):
    r = run_main("estimate", MODEL, "--tokens", "8k", "--weights", size, "--budget", "24GB")
    assert r.code == 0, r.err
    assert "implausibly small" in r.out


def test_plausible_given_weights_have_no_note(workdir):
    r = run_main("estimate", MODEL, "--tokens", "8k", "--weights", "16GB", "--budget", "48GB")
    assert r.code == 0 and "implausibly" not in r.out


# --------------------------------------------------------------------------------------------------
# rope_scaling (mechanism: mlxlm/to_layers._rope_context: YaRN gives the context; rope_scaling is
# checked the way mlx-lm's initialize_rope reads it)
# --------------------------------------------------------------------------------------------------
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}


@pytest.mark.parametrize("key", ["rope_scaling", "rope_parameters"])
def test_yarn_context_is_kept(key, tmp_path, workdir):
    """Qwen3's model card adds YaRN for 131,072 tokens and leaves max_position_embeddings at 40,960: a
    64k prompt was reported past the model's context."""
    d = _model_dir(tmp_path, config={**QWEN, key: YARN})
    from omlx_profiles import default_registry
    from omlx_profiles.extraction.from_config import resolve_path

    assert resolve_path(d, registry=default_registry()).profile.max_context == 131072
    r = run_main("estimate", str(d), "--tokens", "64k")
    assert r.code == 0 and "PAST" not in r.out, r.out[-500:]
    assert "YaRN" in r.out


def test_yarn_in_a_directory_named_like_a_smaller_model(tmp_path, workdir):
    """The files on disk win over the directory's name, and the disagreement is said."""
    d = _model_dir(tmp_path, "Qwen3-0.6B", {**QWEN, "rope_scaling": YARN})
    r = run_main("estimate", str(d), "--tokens", "100k")
    assert r.code == 0 and "PAST" not in r.out
    text = " ".join(r.out.split())  # notes are wrapped
    assert "is a local directory" in text and "131,072 from rope_scaling" in text


@pytest.mark.parametrize("rope", [
    [], "yarn", 4, {"type": "yarn"}, {"rope_type": "linear", "factor": 0}, {"rope_type": "llama3"},
    {**YARN, "factor": -1}, {**YARN, "factor": True}, {**YARN, "factor": float("nan")}, {**YARN, "factor": "8"},
    {**YARN, "factor": 10**400}, {**YARN, "original_max_position_embeddings": 10**400},
    {**YARN, "original_max_position_embeddings": 2.5}, {**YARN, "original_max_position_embeddings": 0},
], ids=repr)
def test_bad_rope_scaling_is_named(rope, tmp_path, workdir):
    d = _model_dir(tmp_path, config={**QWEN, "rope_scaling": rope})
    assert_clean_failure(run_main("estimate", str(d), "--tokens", "1k"), EXIT_USAGE, "rope_scaling")


@pytest.mark.parametrize("kind", ["nosuch", "\x1b[31mred", 5])
def test_unknown_rope_type_is_a_note(kind, tmp_path, workdir):
    d = _model_dir(tmp_path, config={**QWEN, "rope_scaling": {"rope_type": kind, "factor": 2.0}})
    r = run_main("estimate", str(d), "--tokens", "1k")
    assert r.code == 0 and "RoPE type" in r.out and "\x1b" not in r.out


def test_real_configs_keep_their_context():
    """The YaRN rule changes no real config: they state max_position_embeddings = factor x original."""
    from omlx_profiles import default_registry
    from omlx_profiles.extraction.from_config import resolve_path

    for name in ("deepseek-v3", "kimi-k2-instruct", "gpt-oss-20b", "devstral-small-2-24b-instruct"):
        cfg = json.loads((CONFIGS / f"{name}.json").read_text())
        res = resolve_path(CONFIGS / f"{name}.json", registry=default_registry())
        assert res.profile.max_context == cfg.get("max_position_embeddings", cfg.get("text_config", {}).get(
            "max_position_embeddings")), name


# --------------------------------------------------------------------------------------------------
# past the context (mechanism: estimate/fit.cached_within_context, single and sharded)
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("extra", [[], ["--ranks", "2", "--parallel", "tensor"]], ids=["single", "sharded"])
@pytest.mark.parametrize("cached", ["40960", "1m"])
def test_fit_with_a_prefix_past_the_context(cached, extra, workdir):
    r = run_main("fit", MODEL, "--budget", "64GB", "--cached", cached, *extra)
    assert_clean_failure(r, EXIT_USAGE, "max_context", "--cached")


# --------------------------------------------------------------------------------------------------
# ids (mechanism: registry.index._check_query reads a Hub address as ORG/NAME)
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("q", ["https://huggingface.co/Qwen/Qwen3-8B", "hf.co/Qwen/Qwen3-8B", "hf://Qwen/Qwen3-8B",
                               "huggingface.co/Qwen/Qwen3-8B"])
def test_hub_address_is_the_repo(q, workdir):
    r = run_main("resolve", q)
    assert r.code == 0, r.err
    assert "matched by id: Qwen/Qwen3-8B" in r.out and "another organisation" not in r.out


# --------------------------------------------------------------------------------------------------
# the catch-all: no case of this file (nor the generator's other groups, sampled) reaches it
# --------------------------------------------------------------------------------------------------
def test_no_fourth_case_reaches_internal_error(tmp_path, workdir, monkeypatch):
    hit = []
    real = cli_main._internal
    monkeypatch.setattr(cli_main, "_internal", lambda e: hit.append(repr(e)) or real(e))
    for argv in EMPTY_CASES:
        run_main(*argv)
    for rope in ([], "yarn", {**YARN, "factor": 10**400}, {"rope_type": 10**400}, {**YARN, "factor": float("inf")}):
        run_main("estimate", "--config", str(_model_dir(tmp_path, f"r{len(hit)}-{id(rope)}",
                                                        {**QWEN, "rope_scaling": rope})), "--tokens", "1k")
    for v in ("８", "-1", "1e400", "99999999999999999999", " "):
        for flag in ("--weights-bits", "--kv-bits", "--kv-start", "--cached", "--chunk"):
            run_main("estimate", MODEL, "--tokens", "1k", flag, v)
    for argv in (["fit", MODEL, "--budget", "64GB", "--cached", "1m"], ["estimate", MODEL, "--tokens", "1k", "--reserve", "1k"],
                 ["schema", "--check", str(tmp_path / "nope")], ["resolve", "https://huggingface.co/Qwen/Qwen3-8B/tree/main"]):
        run_main(*argv)
    assert not hit, hit


# --------------------------------------------------------------------------------------------------
# the oMLX facade (mechanism: compat.uniform.check_dims / _positive_number for every model number,
# units.check_count bounded at units.MAX_TOKENS for every token count). Generated by a sweep of
# every numeric argument of MemoryMonitor and the module functions x 20 values (bool, negative, NaN,
# inf, str, None, list, bytes, numpy scalars, Decimal, 2**31, 2**62, 2**80).
# --------------------------------------------------------------------------------------------------
def _monitor():
    from omlx_profiles import default_registry
    from omlx_profiles.compat import MemoryMonitor

    m = MemoryMonitor(16 << 30)
    m.set_profile(default_registry().resolve(MODEL).profile)
    return m


FACADE_BAD = [True, -1, float("nan"), float("inf"), "8", [8], b"8", 2**80]


@pytest.mark.parametrize("value", FACADE_BAD + [2**31, 2**40], ids=repr)
def test_set_model_info_layers_are_bounded(value):
    """2**31 layers built a list of 2**31 layers (13 s, then MemoryError); 2**80 an OverflowError."""
    m = _monitor()
    with pytest.raises(ValueError, match="num_layers"):
        m.set_model_info(value, 8, 128)


@pytest.mark.parametrize("value", FACADE_BAD, ids=repr)
def test_facade_numbers_are_checked(value):
    from omlx_profiles.compat import estimate_unfused_sdpa_call_bytes

    m = _monitor()
    calls = {
        "n": lambda: m.set_fixed_state_bytes(value),  # int() took "8", 1.5 and True; -1 became 0
        "num_layers": lambda: m.estimate_block_memory(16, num_layers=value),  # -1: a negative byte count
        "bytes_to_free": lambda: m.estimate_blocks_to_free(value, 16),  # "8": TypeError from the arithmetic
        "n_q_heads": lambda: estimate_unfused_sdpa_call_bytes(value, 128, 4096, 128),  # -1: negative bytes
        "query_tokens": lambda: estimate_unfused_sdpa_call_bytes(32, value, 4096, 128),
        "head_dim": lambda: estimate_unfused_sdpa_call_bytes(32, 128, 4096, value),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match=name):
            call()


def test_facade_dtype_override_is_checked():
    m = _monitor()
    for v in (-2, float("nan"), "2", 1e30):
        with pytest.raises(ValueError, match="dtype_size"):
            m.estimate_block_memory(16, dtype_size=v)


@pytest.mark.parametrize("call", ["peak-cached", "peak-new", "transient"])
def test_facade_token_counts_are_bounded(call):
    """A 2**31-token cached prefix replayed for 3.4 s of CPU and was answered 0 (the guard let it pass)."""
    m = _monitor()
    f = {"peak-cached": lambda: m.estimate_prefill_peak_bytes(100, 2048, cached_tokens=2**31),
         "peak-new": lambda: m.estimate_prefill_peak_bytes(2**31, 2048),
         "transient": lambda: m.estimate_chunk_transient_bytes(2**31, 4096)}[call]
    with pytest.raises(ValueError, match="must be <="):
        f()


def test_facade_still_answers_ordinary_numbers():
    from omlx_profiles.compat import estimate_unfused_sdpa_call_bytes

    m = _monitor()
    assert m.estimate_block_memory(16, num_layers=32, num_kv_heads=8, head_dim=128, dtype_size=2) == 16 * 8 * 128 * 2 * 2 * 32
    assert m.estimate_blocks_to_free(1 << 20, 16) >= 1
    assert estimate_unfused_sdpa_call_bytes(32, 128, 4096, 128, 2) == 32 * 128 * 4096 * 2 + 2 * 32 * 128 * 128 * 2
    m.set_fixed_state_bytes(10**8)
    assert m.fixed_state_bytes == 10**8


# --------------------------------------------------------------------------------------------------
# properties: any checkpoint directory (strategies.checkpoints) is summed exactly or refused
# --------------------------------------------------------------------------------------------------
from hypothesis import HealthCheck, given, settings  # noqa: E402

from .hostile.strategies import checkpoints  # noqa: E402


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ck=checkpoints())
def test_any_checkpoint_is_summed_once_or_refused(ck, tmp_path_factory):
    """Every tensor counted exactly once from the files mlx-lm loads, or a ``SafetensorsError`` naming the
    directory or file; never an exception of another type."""
    from omlx_profiles.estimate.safetensors import SafetensorsError, read_checkpoint

    d = tmp_path_factory.mktemp("ck")
    for name, header in ck["files"].items():
        _safetensors(d / name, header, 4 * len(header))
    if ck["index"] is not None:
        (d / "model.safetensors.index.json").write_text(json.dumps(ck["index"]))
    try:
        got = read_checkpoint(d)
    except SafetensorsError as e:
        assert str(d) in str(e)
        return
    names = [t.name for h in got.files for t in h.tensors]
    assert len(names) == len(set(names)), names  # no tensor twice
    assert got.nbytes == 4 * len(names)


# --------------------------------------------------------------------------------------------------
# resource bounds: the sharded chart (mechanism: cli/sharded.chart_series replays each distinct rank
# once and scales its points with the layers replayed, as estimate/fit.series_for does)
# --------------------------------------------------------------------------------------------------
def test_sharded_chart_replays_identical_ranks_once(workdir, monkeypatch):
    """64 tensor ranks of a 256-layer config replayed 64 x 160 points: minutes of CPU (killed at 57 s)."""
    import omlx_profiles.peak.prefill as prefill_mod
    from omlx_profiles.cli import sharded

    seen = []
    real = prefill_mod.prefill_peak
    monkeypatch.setattr(prefill_mod, "prefill_peak", lambda *a, **k: seen.append(a[1].tokens) or real(*a, **k))
    args = type("A", (), {})()
    monkeypatch.setattr(sharded, "_budgets", lambda a: ())
    cfg = _model_dir(workdir.parent, "big", {**QWEN, "num_hidden_layers": 256})
    r = run_main("resolve", str(cfg))
    assert r.code == 0, r.err
    from omlx_profiles import default_registry
    from omlx_profiles.extraction.from_config import resolve_path

    res = resolve_path(cfg, registry=default_registry())
    for k, v in dict(points=160, max_tokens=1 << 20, ranks=8, parallel="tensor", split=None, chunk=2048, cached=0,
                     backend="metal", mlx_version=None, weights_size=10 << 30, weights_bits=None, reserve=None,
                     budget=None, dtype=None, config=str(cfg), model=None).items():
        setattr(args, k, v)
    series = sharded.chart_series(res, args)
    assert len(series) == 8
    points = len(series[0].xs) if hasattr(series[0], "xs") else None
    assert len(seen) <= 30, f"{len(seen)} replays for 8 identical ranks (points {points})"


@pytest.mark.parametrize("extra", [[], ["--ranks", "2", "--parallel", "tensor"], ["--json"]],
                         ids=["single", "sharded", "json"])
def test_estimate_past_context_exits_1_without_a_budget(extra, workdir):
    """The verdict said PAST THE MODEL'S CONTEXT and the exit code said ok (0) when no --budget was given."""
    r = run_main("estimate", MODEL, "--tokens", "64k", *extra)
    assert r.code == 1 and ("PAST" in r.out or '"past_context"' in r.out), r.out[-300:]
    assert run_main("estimate", MODEL, "--tokens", "40960", *extra).code == 0


# --------------------------------------------------------------------------------------------------
# --mlx-version (mechanism: peak/kernels.parse_version reads the whole text as PEP 440, like the
# kernel tables' ranges; a prefix match read "1!0.32" as 1.0.0 and "0.32.*" as 0.32.0)
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("v", ["1!0.32", "0.32.*", "0.32-", "0.32.4 garbage", "0.32,0.33", ">=0.32", "٠.32"])
def test_mlx_version_is_a_version(v, workdir):
    assert_clean_failure(run_main("estimate", MODEL, "--tokens", "1k", "--mlx-version", v), EXIT_USAGE, "--mlx-version")


@pytest.mark.parametrize("v,want", [("0.32.4rc1", (0, 32, 4)), ("0.32.4+cuda", (0, 32, 4)), ("0.32", (0, 32, 0)),
                                    ("v0.31.1", (0, 31, 1)), ("0.32.4.5", (0, 32, 4))])
def test_mlx_version_forms_that_are_versions(v, want):
    from omlx_profiles.peak.kernels import parse_version

    assert parse_version(v) == want


@pytest.mark.parametrize("call", ["fits", "prefill_peak", "total_bytes"])
@pytest.mark.parametrize("bad", [5, "5", None, (5, 0, 2048)])
def test_a_request_that_is_not_a_request_is_an_input_error(call, bad):
    """s7-hostile's API sweep: ``Estimator(p).fits(5, ...)`` raised AttributeError ('int' object has no
    attribute 'tokens'); an engine must get the typed error naming the argument."""
    from omlx_profiles import Estimator, default_registry
    from omlx_profiles.errors import InputError

    est = Estimator(default_registry().resolve("meta-llama/Llama-3.1-8B-Instruct").profile)
    args = {"fits": (bad, 1 << 30), "prefill_peak": (bad,), "total_bytes": (bad, 0)}[call]
    with pytest.raises(InputError, match="request must be a Request"):
        getattr(est, call)(*args)
