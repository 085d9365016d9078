"""Registry loading and id resolution."""
from __future__ import annotations

import json

import pytest

from omlx_profiles import load_registry
from omlx_profiles.errors import InputError, UnknownModelError
from omlx_profiles.registry.index import strip_quant_suffixes


@pytest.fixture(scope="module")
def reg():
    return load_registry(include_env=False)


def test_hf_id_case_insensitive(reg):
    r = reg.resolve("META-LLAMA/llama-3.1-8b-instruct")
    assert r.profile.name == "llama-3.1-8b-instruct" and r.matched_by == "id"


def test_mlx_community_quantized_repo(reg):
    r = reg.resolve("mlx-community/Llama-3.1-8B-Instruct-4bit")
    assert r.profile.name == "llama-3.1-8b-instruct"
    assert r.matched_by == "quantized-repo" and r.weights_bits == 4


@pytest.mark.parametrize("q,bits,stem", [
    ("mlx-community/Qwen3-8B-4bit-DWQ", 4, "mlx-community/Qwen3-8B"),
    ("mlx-community/Llama-3.2-1B-Instruct-bf16", 16, "mlx-community/Llama-3.2-1B-Instruct"),
    ("mlx-community/gpt-oss-20b-MXFP4-Q8", None, "mlx-community/gpt-oss-20b"),  # mixed: not "8-bit" (#18)
    ("org/Model-8bit", 8, "org/Model"),
    ("meta-llama/Llama-3.1-8B", None, "meta-llama/Llama-3.1-8B"),
])
def test_strip_quant_suffixes(q, bits, stem):
    assert strip_quant_suffixes(q) == (bits, stem)


def test_alias(reg):
    assert reg.resolve("llama3.1:8b").matched_by == "alias"


def test_unknown_id_suggests_closest(reg):
    with pytest.raises(UnknownModelError) as e:
        reg.resolve("meta-llama/Llama-3.1-8B-Instruc")
    assert "meta-llama/Llama-3.1-8B-Instruct" in e.value.suggestions


@pytest.mark.parametrize("bad", ["", "   ", None, True, 3, "a\x00b", "x" * 400])
def test_bad_query_is_input_error(reg, bad):
    with pytest.raises(InputError):
        reg.resolve(bad)


def test_user_dir_overrides_builtin_and_says_so(tmp_path, profiles_copy):
    user = tmp_path / "user"
    user.mkdir()
    (user / "mine.yaml").write_text(
        "family: mine\nmodel_types: [llama]\nvariants:\n"
        "  - name: my-llama\n    base: llama-3.1-8b\n    ids: [meta-llama/Llama-3.1-8B-Instruct]\n    num_kv_heads: 4\n"
    )
    reg = load_registry([user], include_env=False)
    r = reg.resolve("meta-llama/Llama-3.1-8B-Instruct")
    assert r.profile.name == "my-llama" and r.profile.num_kv_heads == 4
    assert any("my-llama" in n and "instead of" in n for n in reg.notes)


def test_env_path(tmp_path, monkeypatch):
    user = tmp_path / "envdir"
    user.mkdir()
    (user / "x.yaml").write_text(
        "family: x\nmodel_types: [llama]\nvariants:\n  - name: env-llama\n    base: llama-3.2-1b-instruct\n    aliases: [envy]\n")
    monkeypatch.setenv("OMLX_PROFILES_PATH", str(user))
    assert load_registry().resolve("envy").profile.name == "env-llama"


def test_resolve_cli_json(cli):
    code, out, _ = cli("resolve", "mlx-community/Llama-3.1-8B-Instruct-4bit", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["variant"] == "llama-3.1-8b-instruct" and d["matched_by"] == "quantized-repo" and d["weights_bits"] == 4


def test_resolve_cli_unknown(cli):
    code, _, err = cli("resolve", "nope/not-a-model")
    assert code == 2 and "unknown model" in err and "Traceback" not in err
