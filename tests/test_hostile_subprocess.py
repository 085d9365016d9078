"""A handful of hostile cases through a real process: what reaches a terminal is one sentence and an
exit code, never a traceback (the in-process corpus in test_hostile.py covers the breadth)."""
from __future__ import annotations

import resource
import shutil
import subprocess
import sys

import pytest

from .hostile.harness import (CONFIG_DIR, EXIT_INVALID, EXIT_USAGE, REPO, YAML_DIR, assert_nothing_written,
                              run_subprocess)

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _judge(r, code, *fragments):
    text = r.out + r.err
    assert r.code == code, f"exit {r.code}: {r.err[:2000]}"
    assert "Traceback" not in text and "internal error" not in text, text[:2000]
    for f in fragments:
        assert f.lower() in r.err.lower(), r.err[:2000]


def test_python_tag_runs_nothing(tmp_path):
    d = tmp_path / "p"
    d.mkdir()
    marker = tmp_path / "MARKER_created"
    (d / "evil.yaml").write_bytes((YAML_DIR / "python_object_apply.yaml").read_bytes().replace(b"MARKER", str(marker).encode()))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    r = run_subprocess("validate", str(d / "evil.yaml"), cwd=cwd)
    _judge(r, EXIT_INVALID, "not allowed", f"{d / 'evil.yaml'}:18")
    r = run_subprocess("resolve", MODEL, "--profiles", str(d), cwd=cwd)
    _judge(r, EXIT_INVALID, "not allowed")
    assert not marker.exists()
    assert_nothing_written(cwd, set())


def test_alias_bomb_is_quick(tmp_path):
    d = tmp_path / "p"
    d.mkdir()
    shutil.copy(YAML_DIR / "alias_bomb.yaml", d / "bomb.yaml")
    r = run_subprocess("resolve", MODEL, "--profiles", str(d), seconds=20)
    _judge(r, EXIT_INVALID, "aliases")


@pytest.mark.parametrize("argv,fragment", [
    (["estimate", MODEL, "--tokens", "nan"], "--tokens"),
    (["estimate", MODEL, "--tokens", "1e9"], "--tokens"),
    (["estimate", MODEL, "--tokens", "1k", "--chunk", "0"], "--chunk"),
    (["fit", MODEL, "--budget", "64XB"], "--budget"),
    (["resolve", "../../../../etc/passwd"], "unknown model"),
    (["resolve", "x" * 10_000], "model id"),
], ids=lambda v: " ".join(v)[:40] if isinstance(v, list) else v)
def test_usage_errors(argv, fragment):
    r = run_subprocess(*argv)
    _judge(r, EXIT_USAGE, fragment)


def test_hostile_config(tmp_path):
    pytest.importorskip("omlx_profiles.extraction.from_config")
    r = run_subprocess("estimate", "--config", str(CONFIG_DIR / "layers_nan.json"), "--tokens", "1k")
    _judge(r, EXIT_USAGE, "num_hidden_layers", "layers_nan.json")


def _limit_memory():  # the child may use 3 GiB of address space: a runaway list dies, the machine does not
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def test_tiny_chunk_huge_prompt_finishes():
    code = ("import sys; from omlx_profiles.cli.main import main; "
            f"sys.exit(main(['estimate', {MODEL!r}, '--tokens', '1000000000', '--chunk', '1']))")
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=10,
                           cwd=REPO, preexec_fn=_limit_memory)
    except subprocess.TimeoutExpired:
        pytest.fail("did not finish in 10 s")
    assert p.returncode in (0, EXIT_USAGE), p.stderr[-2000:]
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr, p.stderr[-2000:]
