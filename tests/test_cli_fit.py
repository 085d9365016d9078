"""``fit`` agrees with ``estimate``: the total at ``max_tokens`` fits the usable memory, one KV step more
does not; the reserve default is what the README says; nothing fits -> exit 1."""
from __future__ import annotations

import json

import pytest

from omlx_profiles.estimate.budget import default_reserve

from .conftest import run_cli

pytest.importorskip("omlx_profiles.peak.prefill", reason="needs the prefill peak model (issue 5)")

GIB = 1024**3
CASES = [
    ("meta-llama/Llama-3.1-8B-Instruct", "24GiB", []),
    ("mlx-community/Llama-3.1-8B-Instruct-4bit", "16GiB", ["--reserve", "1GiB", "--chunk", "512"]),
    ("meta-llama/Llama-3.2-1B-Instruct", "6GiB", ["--cached", "1k"]),
]


def _estimate_total(model: str, tokens: int, extra: list[str]) -> int:
    code, out, err = run_cli("estimate", model, "--tokens", str(tokens), "--json", *extra)
    assert code == 0, err
    return json.loads(out)["total_bytes"]


@pytest.mark.parametrize("model, budget, extra", CASES)
def test_fit_is_the_inverse_of_estimate(model, budget, extra):
    code, out, err = run_cli("fit", model, "--budget", budget, "--json", *extra)
    assert code == 0, err
    fit = json.loads(out)
    mt, step = fit["max_tokens"], fit["step"]
    assert mt and mt % step == 0
    usable = fit["usable_bytes"]
    assert usable == fit["budget_bytes"] - fit["reserve_bytes"]
    req = [a for a in extra if a not in ("--reserve", "1GiB")]
    at = _estimate_total(model, mt, req)
    nxt = _estimate_total(model, mt + step, req)
    assert at == fit["at_max"]["total_bytes"] and nxt == fit["next"]["total_bytes"]
    assert at <= usable < nxt
    code, table, _ = run_cli("fit", model, "--budget", budget, *extra)
    assert f"{mt:,}" in table and "one step more" in table


def test_default_reserve_is_used_and_shown():
    code, out, _ = run_cli("fit", "meta-llama/Llama-3.1-8B-Instruct", "--budget", "64GiB", "--json")
    fit = json.loads(out)
    assert fit["reserve_bytes"] == default_reserve(64 * GIB)
    code, out, _ = run_cli("fit", "meta-llama/Llama-3.1-8B-Instruct", "--budget", "64GiB", "--reserve", "0", "--json")
    assert json.loads(out)["reserve_bytes"] == 0


def test_nothing_fits_exits_1():
    code, out, err = run_cli("fit", "meta-llama/Llama-3.1-8B-Instruct", "--budget", "8GiB")
    assert code == 1 and "does not fit" in out
    code, out, _ = run_cli("fit", "meta-llama/Llama-3.1-8B-Instruct", "--budget", "8GiB", "--json")
    assert code == 1 and json.loads(out)["max_tokens"] is None


@pytest.mark.parametrize("argv, words", [
    (["fit", "meta-llama/Llama-3.1-8B-Instruct"], "--budget"),
    (["fit", "meta-llama/Llama-3.1-8B-Instruct", "--budget", "lots"], "size"),
    (["fit", "meta-llama/Llama-3.1-8B-Instruct", "--budget", "1GiB", "--reserve", "2GiB"], "larger than the budget"),
])
def test_fit_usage_errors(argv, words):
    code, _, err = run_cli(*argv)
    assert code == 2 and words in err and "Traceback" not in err
