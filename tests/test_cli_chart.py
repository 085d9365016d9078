"""``chart``: writes a PNG, marks the same crossing ``fit`` reports, imports matplotlib only itself."""
from __future__ import annotations

import json
import sys

import pytest

from .conftest import run_cli

pytest.importorskip("omlx_profiles.peak.prefill", reason="needs the prefill peak model (issue 5)")
pytest.importorskip("matplotlib")

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def test_chart_png_and_crossing_match_fit(tmp_path):
    png = tmp_path / "mem.png"
    code, out, err = run_cli("chart", MODEL, "mlx-community/Llama-3.2-1B-Instruct-4bit", "--max-tokens", "128k",
                             "--budget", "24GiB", "-o", str(png), "--points", "24")
    assert code == 0, err
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    _, fit_out, _ = run_cli("fit", MODEL, "--budget", "24GiB", "--json")
    mt = json.loads(fit_out)["max_tokens"]
    assert f"{MODEL}: fits up to {mt:,} tokens" in out


def test_chart_without_budget(tmp_path):
    png = tmp_path / "nobudget.png"
    code, out, err = run_cli("chart", MODEL, "--max-tokens", "16k", "-o", str(png), "--points", "8")
    assert code == 0, err and png.exists()


def test_chart_needs_matplotlib(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    code, _, err = run_cli("chart", MODEL, "--max-tokens", "16k", "-o", str(tmp_path / "x.png"), "--points", "8")
    assert code == 2 and "pip install" in err


@pytest.mark.parametrize("argv, words", [
    (["chart", "--max-tokens", "16k"], "MODEL"),
    (["chart", MODEL, "--max-tokens", "100"], "at least 256"),
    (["chart", MODEL, "--budget", "x"], "size"),
    (["chart", MODEL, "--max-tokens", "16k", "-o", "/nonexistent-dir/x.png", "--points", "8"], "cannot write"),
])
def test_chart_usage_errors(argv, words):
    code, _, err = run_cli(*argv)
    assert code == 2 and words in err and "Traceback" not in err
