"""Hostile suite, second pass (#18): one section per class of misbehaviour, cases generated where they can be.

Every case goes through the CLI in-process under ``harness.deadline`` (5 s) and is judged by
``assert_clean_failure`` (expected exit code, a sentence naming what and where, no traceback, no
"internal error", no raw control character, in time) or, for inputs that must be *accepted*, by what the
output says. ``test_no_case_reaches_internal_error`` replays every generated case and asserts the
catch-all never fires: the catch-all is for real bugs only (README, "Error contract").
"""
from __future__ import annotations

import io
import json
import os
import struct
import threading
from pathlib import Path

import pytest

from omlx_profiles import Estimator, default_registry
from omlx_profiles.cli import main as cli_main
from omlx_profiles.peak.prefill import Request

from .hostile.harness import (CONTROL, EXIT_INVALID, EXIT_USAGE, REPO, assert_clean_failure,
                              assert_nothing_written, run_main, run_subprocess)

CONFIGS = REPO.parent.parent / "shared" / "configs"  # /work/shared/configs when present
QWEN = json.loads("""{"architectures": ["Qwen3ForCausalLM"], "head_dim": 128, "hidden_size": 4096,
  "intermediate_size": 12288, "max_position_embeddings": 40960, "model_type": "qwen3", "num_attention_heads": 32,
  "num_hidden_layers": 36, "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 151936}""")
MODEL = "qwen3-8b"


def _model_dir(root: Path, name: str = "m", config: dict | None = None) -> Path:
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(config or QWEN))
    return d


def _safetensors(path: Path, spans: list[tuple[str, int, int]] | None = None, n: int = 4, data: int | None = None):
    """A header of F16 [1] tensors at the given byte spans (default: n contiguous), data section sized."""
    spans = spans or [(f"model.layers.{i}.w", 2 * i, 2 * i + 2) for i in range(n)]
    h = {name: {"dtype": "F16", "shape": [(b - a) // 2], "data_offsets": [a, b]} for name, a, b in spans}
    raw = json.dumps(h).encode()
    end = max(b for _, _, b in spans) if data is None else data
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * end)


# --------------------------------------------------------------------------------------------------
# 1. "internal error" instead of a sentence
# --------------------------------------------------------------------------------------------------
def _int_paths(obj, pre=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _int_paths(v, pre + (k,))
    elif isinstance(obj, int) and not isinstance(obj, bool):
        yield pre


HUGE_CASES = [(f, v) for f in (p[0] for p in _int_paths(QWEN)) for v in (10**400, 2**31, 2**63 + 1)]


@pytest.mark.parametrize("field,value", HUGE_CASES, ids=[f"{f}={str(v)[:6]}" for f, v in HUGE_CASES])
def test_huge_config_integers_are_sentences(field, value, tmp_path, workdir):
    d = _model_dir(tmp_path, config={**QWEN, field: value})
    r = run_main("estimate", "--config", str(d), "--tokens", "1k")
    if r.code == 0:  # a field no estimate reads (rope_theta): accepted, and no traceback
        assert "internal error" not in r.err
        return
    assert_clean_failure(r, (EXIT_INVALID, EXIT_USAGE), field)


@pytest.mark.parametrize("name", ["mem.txt", "mem", "", " ", "dir/", "mem.PNG.exe"])
def test_chart_output_names_are_checked_first(name, workdir):
    r = run_main("chart", MODEL, "-o", name, "--points", "8")
    assert_clean_failure(r, EXIT_USAGE, "directory" if name.endswith("/") else "-o" if name.strip() else "empty")
    assert_nothing_written(workdir, set())


def test_missing_optional_package_is_a_sentence(tmp_path, workdir, monkeypatch):
    import sys

    for name in [m for m in sys.modules if m == "omlx_profiles.verify" or m.startswith("omlx_profiles.live")]:
        monkeypatch.delitem(sys.modules, name)  # imported by earlier tests: make them import mlx again
    monkeypatch.setitem(sys.modules, "mlx", None)  # an install without the mlx extra
    monkeypatch.setitem(sys.modules, "mlx.core", None)
    r = run_main("extract", str(_model_dir(tmp_path)), "--verify")
    assert_clean_failure(r, EXIT_INVALID, "optional package 'mlx'", "pip install")


@pytest.mark.parametrize("errno_name", ["EACCES", "EROFS", "ENOSPC"])
def test_environment_refusals_are_sentences(errno_name, monkeypatch, workdir):
    """A read-only site-packages (schema/coverage --write), a model path the user may not read: the OS
    error becomes ``error: <path>: <reason>`` (exit 2), whatever command hit it."""
    import errno as E

    from omlx_profiles import outputs

    def refuse(*a, **k):
        code = getattr(E, errno_name)
        raise OSError(code, os.strerror(code), "/site-packages/omlx_profiles/schema")

    monkeypatch.setattr(outputs.tempfile, "mkstemp", refuse)
    r = run_main("schema", "--write")
    assert_clean_failure(r, EXIT_USAGE, os.strerror(getattr(E, errno_name)))
    from omlx_profiles.cli import common

    monkeypatch.setattr(common, "_local_model", refuse)
    r = run_main("estimate", "./model", "--tokens", "1k")
    assert_clean_failure(r, EXIT_USAGE, "/site-packages", os.strerror(getattr(E, errno_name)))


def test_stdout_full_and_unencodable(tmp_path):
    with open("/dev/full", "w") as full:
        import subprocess
        import sys

        env = {**os.environ, "PYTHONPATH": str(REPO)}
        env.pop("OMLX_PROFILES_DEBUG", None)
        p = subprocess.run([sys.executable, "-m", "omlx_profiles.cli.main", "estimate", MODEL, "--tokens", "1k"],
                           stdout=full, stderr=subprocess.PIPE, text=True, env=env, timeout=30)
    assert p.returncode == EXIT_USAGE and "standard output" in p.stderr and "Traceback" not in p.stderr
    d = _model_dir(tmp_path, "café-é")
    r = run_subprocess("estimate", str(d), "--tokens", "1k", env={"PYTHONIOENCODING": "ascii", "LC_ALL": "C"})
    assert r.code == 0 and "caf\\xe9" in r.out and "Traceback" not in r.err, r.err


def test_calibrate_out_naming_a_file(tmp_path, workdir):
    pytest.importorskip("mlx.core")
    import omlx_profiles.live.build  # noqa: F401 - imported before the 5 s deadline: mlx-lm's import is not the case
    import omlx_profiles.live.measure  # noqa: F401
    f = tmp_path / "file"
    f.write_text("x")
    r = run_main("calibrate", MODEL, "--tokens", "1k", "--shrink", "--out", str(f))
    assert_clean_failure(r, EXIT_USAGE, "not a directory", where=str(f))


# --------------------------------------------------------------------------------------------------
# 2. hangs and unbounded work: every command finishes or refuses within the deadline
# --------------------------------------------------------------------------------------------------
def test_million_tensor_header_is_refused_fast(tmp_path, workdir):
    d = _model_dir(tmp_path)
    _safetensors(d / "model.safetensors", n=1_000_000)
    r = run_main("estimate", str(d), "--tokens", "1k")
    assert_clean_failure(r, EXIT_USAGE, "1,000,000 tensors", where="model.safetensors")


@pytest.mark.parametrize("layers", [257, 4096])
def test_deep_models_are_refused(layers, tmp_path, workdir):
    d = _model_dir(tmp_path, config={**QWEN, "num_hidden_layers": layers})
    r = run_main("fit", "--config", str(d), "--budget", "64GB", "--weights", "16GB")
    assert_clean_failure(r, EXIT_USAGE, "num_hidden_layers", "at most 256")


def test_config_on_an_open_pipe_does_not_wait(tmp_path, workdir):
    rfd, wfd = os.pipe()
    try:
        for argv in (["estimate", "--config", f"/dev/fd/{rfd}", "--tokens", "1k"],
                     ["extract", f"/dev/fd/{rfd}"]):
            r = run_main(*argv)
            assert_clean_failure(r, EXIT_USAGE, "not a regular file")
    finally:
        os.close(rfd)
        os.close(wfd)


@pytest.mark.parametrize("argv,fragment", [
    (["--tokens", "100m"], "at most 1,048,576"),
    (["--tokens", "64k"], "past the model's context"),
])
def test_calibrate_checks_it_can_finish(argv, fragment, workdir):
    pytest.importorskip("mlx.core")
    r = run_main("calibrate", MODEL, "--no-save", *argv)
    assert_clean_failure(r, (EXIT_INVALID, EXIT_USAGE), fragment)


def test_calibrate_full_size_without_shrink_checks_memory(workdir, monkeypatch):
    pytest.importorskip("mlx.core")
    from omlx_profiles.cli import cmd_calibrate

    monkeypatch.setattr(cmd_calibrate, "available_memory", lambda mx=None: 8 << 30)
    r = run_main("calibrate", "qwen3-32b", "--tokens", "1k", "--no-save")
    assert_clean_failure(r, EXIT_INVALID, "--shrink", "this machine offers")


# --------------------------------------------------------------------------------------------------
# 3. silently wrong
# --------------------------------------------------------------------------------------------------
def test_local_directory_wins_over_the_registry_name(tmp_path, workdir):
    d = _model_dir(workdir, "qwen3-0.6b")  # a Qwen3-8B config in a directory named like the 0.6B
    r = run_main("estimate", "qwen3-0.6b", "--tokens", "32k", "--json")
    est = json.loads(r.out)
    assert r.code == 0 and est["kv_bytes"] == 36 * 2 * 8 * 128 * 2 * 32768, est["kv_bytes"]
    notes = " ".join(est["resolution"]["notes"])
    assert "local directory" in notes and "disagrees" in notes
    assert est["weights_bytes"] is None  # the 0.6B's parameter count is not borrowed
    assert d.is_dir()


@pytest.mark.parametrize("have,total", [([1], 2), ([1, 2, 4, 5], 5), ([2, 3], 3)])
def test_missing_numbered_shards_are_not_exact(have, total, tmp_path, workdir):
    d = _model_dir(tmp_path)
    for i in have:
        _safetensors(d / f"model-{i:05d}-of-{total:05d}.safetensors")
    r = run_main("estimate", str(d), "--tokens", "1k")
    assert_clean_failure(r, EXIT_USAGE, "shards missing", "partial download")


@pytest.mark.parametrize("spans,fragment", [
    ([("a", 0, 2), ("b", 0, 2)], "overlaps"),
    ([("a", 0, 4), ("b", 2, 6)], "overlaps"),
    ([("a", 0, 2), ("b", 4, 6)], "belong to no tensor"),
    ([("a", 2, 4)], "belong to no tensor"),
])
def test_tensor_offsets_must_tile_the_data(spans, fragment, tmp_path, workdir):
    d = _model_dir(tmp_path)
    _safetensors(d / "model.safetensors", spans)
    r = run_main("estimate", str(d), "--tokens", "1k")
    assert_clean_failure(r, EXIT_USAGE, fragment, where="model.safetensors")


def test_trailing_bytes_after_the_tensors(tmp_path, workdir):
    d = _model_dir(tmp_path)
    _safetensors(d / "model.safetensors", n=3, data=10)
    assert_clean_failure(run_main("estimate", str(d), "--tokens", "1k"), EXIT_USAGE, "trailing bytes")


def test_implausibly_small_exact_weights_are_noted(tmp_path, workdir):
    d = _model_dir(tmp_path)
    _safetensors(d / "model.safetensors", n=1_000)
    r = run_main("estimate", str(d), "--tokens", "1k", "--json")
    w = json.loads(r.out)["weights"]
    assert r.code == 0 and w["exact"] and "implausibly small" in w["reason"]


# --------------------------------------------------------------------------------------------------
# 4. silently ignored
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["q.yml", "Q.YAML", "q.Yml"])
def test_profile_file_extensions(name, tmp_path, workdir):
    d = tmp_path / "p"
    d.mkdir()
    (d / name).write_text((REPO / "profiles" / "qwen3.yaml").read_text().replace("qwen3-8b", "qwen3-8b-mine"))
    r = run_main("validate", str(d))
    assert r.code == 0 and "0 variant" not in r.out, r.out + r.err
    r = run_main("resolve", "qwen3-8b-mine", "--profiles", str(d))
    assert r.code == 0, r.err


def test_validate_empty_directory_is_not_ok(tmp_path, workdir):
    (tmp_path / "e").mkdir()
    assert_clean_failure(run_main("validate", str(tmp_path / "e")), EXIT_INVALID, "no profile files")


def test_unreadable_profiles_directory(tmp_path, workdir, monkeypatch):
    from omlx_profiles import files

    d = tmp_path / "p"
    d.mkdir()
    real = os.scandir

    def scandir(path="."):
        if Path(path) == d:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(files.os, "scandir", scandir)
    r = run_main("resolve", MODEL, "--profiles", str(d))
    assert_clean_failure(r, EXIT_INVALID, "Permission denied", where=str(d))


@pytest.mark.parametrize("spec", [">=abc", "~", "*", "===0.32.4", "", " ", ">=0.33,<0.32", "==0.32,!=0.32"])
def test_kernel_table_version_ranges(spec, tmp_path, workdir):
    src = (REPO / "profiles" / "kernels" / "cpu.yaml").read_text()
    kd = tmp_path / "p" / "kernels"
    kd.mkdir(parents=True)
    (kd / "cpu.yaml").write_text(src.replace('mlx_versions: ">=0.30"', f"mlx_versions: {json.dumps(spec)}", 1))
    r = run_main("validate", str(kd / "cpu.yaml"))
    assert_clean_failure(r, EXIT_INVALID, "mlx_versions", where="cpu.yaml")


QUANT_BAD = [{"bits": 3.5}, {"bits": True}, {"bits": 1e30}, {"bits": 4, "group_size": 0},
             {"bits": 4, "group_size": -64}, {"bits": 4, "mode": "int4"}, {"group_size": 64},
             {"bits": 4, "model.layers.0.mlp": {"bits": 3.5}}, {"bits": 4, "model.layers.0.mlp": "8bit"}]


@pytest.mark.parametrize("q", QUANT_BAD, ids=[json.dumps(q)[:40] for q in QUANT_BAD])
def test_invalid_config_quantization_is_said(q, tmp_path, workdir):
    d = _model_dir(tmp_path, config={**QWEN, "quantization": q})
    r = run_main("estimate", str(d), "--tokens", "1k")
    assert_clean_failure(r, EXIT_USAGE, "quantization")


def test_mixed_quantization_is_said(tmp_path, workdir):
    q = {"bits": 4, "group_size": 64, "lm_head": {"bits": 8, "group_size": 64}}
    d = _model_dir(tmp_path, config={**QWEN, "quantization": q})
    r = run_main("resolve", str(d))
    assert r.code == 0 and "per-module override" in r.out, r.out


@pytest.mark.parametrize("kind", ["fifo", "dangling", "directory"])
@pytest.mark.parametrize("target", ["model.safetensors", "config.json"])
def test_special_files_in_a_model_directory(kind, target, tmp_path, workdir):
    d = tmp_path / "m"
    d.mkdir()
    if target != "config.json":
        (d / "config.json").write_text(json.dumps(QWEN))
    p = d / target
    {"fifo": lambda: os.mkfifo(p), "dangling": lambda: p.symlink_to(tmp_path / "nowhere"),
     "directory": lambda: p.mkdir()}[kind]()
    r = run_main("estimate", str(d), "--tokens", "1k")
    want = {"fifo": "FIFO", "dangling": "does not exist", "directory": "a directory"}[kind]
    assert_clean_failure(r, EXIT_USAGE, want, where=target)


# --------------------------------------------------------------------------------------------------
# 5. verdicts past the model's context
# --------------------------------------------------------------------------------------------------
def test_estimate_past_context_is_not_fits(workdir):
    r = run_main("estimate", MODEL, "--tokens", "64k", "--budget", "200GB")
    assert r.code == 1 and "PAST THE MODEL'S CONTEXT" in r.out and "FITS -" not in r.out


def test_fit_headline_stops_at_max_context(workdir):
    r = run_main("fit", MODEL, "--budget", "200GB", "--json")
    fit = json.loads(r.out)
    assert fit["max_tokens"] == fit["max_context"] == 40960 and fit["memory_max_tokens"] > 40960


def test_chart_says_the_context_limit(tmp_path, workdir):
    pytest.importorskip("matplotlib")
    r = run_main("chart", MODEL, "--budget", "200GB", "--max-tokens", "64k", "--points", "8", "-o", "c.png",
                 seconds=30)
    assert r.code == 0 and "fits up to the model's context" in r.out and "whole range" not in r.out


# --------------------------------------------------------------------------------------------------
# 6. output files
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["exists", "symlink", "device", "no-parent"])
def test_chart_output_refusals(case, tmp_path, workdir):
    target = {"exists": workdir / "m.png", "symlink": workdir / "l.png", "device": workdir / "fifo.png",
              "no-parent": workdir / "nope" / "m.png"}[case]
    if case == "device":
        os.mkfifo(target)  # a FIFO (or /dev/full): a "wrote" line for bytes nobody stored
    if case == "exists":
        target.write_bytes(b"keep")
    if case == "symlink":
        target.symlink_to(tmp_path / "elsewhere.png")
    r = run_main("chart", MODEL, "--points", "8", "-o", str(target))
    frag = {"exists": "already exists", "symlink": "symbolic link", "device": "not a regular file",
            "no-parent": "cannot write"}[case]
    assert_clean_failure(r, EXIT_USAGE, frag)
    assert not (tmp_path / "elsewhere.png").exists()
    if case == "exists":
        assert target.read_bytes() == b"keep"


def test_concurrent_exclusive_create(tmp_path):
    from omlx_profiles.errors import InputError
    from omlx_profiles.outputs import write_output

    dest = tmp_path / "p.yaml"
    results: list[str] = []
    barrier = threading.Barrier(8)

    def worker(i):
        barrier.wait()
        try:
            write_output(dest, f"writer {i}\n", suffixes=(".yaml",))
            results.append("wrote")
        except InputError as e:
            results.append(str(e))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count("wrote") == 1 and all("already exists" in r for r in results if r != "wrote"), results


# --------------------------------------------------------------------------------------------------
# 7. terminal safety: every control character from user data is escaped, wherever it is printed
# --------------------------------------------------------------------------------------------------
ESC_CASES = ["\x1b[31mred", "bell\x07", "cr\rover", "bidi\u202eevil", "c1\x9bx"]


@pytest.mark.parametrize("name", ESC_CASES, ids=[repr(c) for c in ESC_CASES])
def test_control_characters_are_escaped(name, tmp_path, workdir):
    r = run_main("estimate", "--config", str(tmp_path / name), "--tokens", "1k")
    assert_clean_failure(r, EXIT_USAGE)
    d = _model_dir(tmp_path, "ok")
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": f"model-{name}.safetensors"}}))
    r = run_main("estimate", str(d), "--tokens", "1k")
    assert_clean_failure(r, EXIT_USAGE)
    d2 = _model_dir(tmp_path, name)  # a path that is fine to read: its name is echoed on stdout
    r = run_main("resolve", "--config", str(d2))
    assert r.code == 0 and r.out and CONTROL.search(r.out) is None, repr(r.out + r.err)


# --------------------------------------------------------------------------------------------------
# 8. API defaults
# --------------------------------------------------------------------------------------------------
def test_api_defaults_match_the_cli():
    p = default_registry().resolve(MODEL).profile
    e = Estimator(p)
    req = Request(8192)
    assert e.prefill_peak(req).backend == "metal"
    r = run_main("estimate", MODEL, "--tokens", "8192", "--json")
    assert json.loads(r.out)["peak_bytes"] == e.prefill_peak(req).peak_bytes
    assert "not counted" in e.fits(req, 64 << 30).message


# --------------------------------------------------------------------------------------------------
# the contract: no hostile case reaches the catch-all
# --------------------------------------------------------------------------------------------------
def test_no_case_reaches_internal_error(tmp_path, workdir, monkeypatch):
    """Replays a mixed batch of the cases above; the catch-all must never fire (it is for real bugs)."""
    hit = []
    real = cli_main._internal

    def spy(e):
        hit.append(repr(e))
        return real(e)

    monkeypatch.setattr(cli_main, "_internal", spy)
    for f, v in HUGE_CASES:
        d = _model_dir(tmp_path, f"h-{f}-{len(str(v))}", {**QWEN, f: v})
        run_main("estimate", str(d), "--tokens", "1k")
    for q in QUANT_BAD:
        run_main("estimate", str(_model_dir(tmp_path, "q", {**QWEN, "quantization": q})), "--tokens", "1k")
    for name in ("mem.txt", "mem", ""):
        run_main("chart", MODEL, "-o", name)
    for spec in (">=abc", "*"):
        kd = tmp_path / "k" / "kernels"
        kd.mkdir(parents=True, exist_ok=True)
        (kd / "cpu.yaml").write_text((REPO / "profiles" / "kernels" / "cpu.yaml").read_text()
                                     .replace('mlx_versions: ">=0.30"', f"mlx_versions: {json.dumps(spec)}", 1))
        run_main("validate", str(kd / "cpu.yaml"))
    assert not hit, hit
