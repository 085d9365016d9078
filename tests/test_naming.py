"""Model-id naming (#15, #18 "Ids"): converted-repo suffixes -> base checkpoint + storage, one table.

The expected storage of each spelling is what the converter that writes it does (mlx_lm.convert,
mlx_lm.dwq, mlx_lm's AWQ/GPTQ loader; see profiles/naming/ids.yaml), not what the parser returns.
"""
from __future__ import annotations

import pytest

from omlx_profiles import load_registry
from omlx_profiles.errors import NotMLXCheckpointError, UnknownModelError
from omlx_profiles.registry.naming import parse_id
from omlx_profiles.estimate.weights import estimate_weights


@pytest.fixture(scope="module")
def reg():
    return load_registry(include_env=False)


# query -> (variant, bits, mode, group) ; bits None = mixed
CASES = [
    ("mlx-community/Qwen3-8B-4bit", "qwen3-8b", 4, "affine", 64),
    ("mlx-community/Qwen3-8B-8bit", "qwen3-8b", 8, "affine", 64),
    ("mlx-community/Qwen3-8B-6bit", "qwen3-8b", 6, "affine", 64),
    ("mlx-community/Qwen3-8B-3bit", "qwen3-8b", 3, "affine", 64),
    ("mlx-community/Qwen3-8B-4bit-g32", "qwen3-8b", 4, "affine", 32),
    ("mlx-community/Qwen3-8B-4bit-DWQ", "qwen3-8b", 4, "affine", 64),
    ("mlx-community/Qwen3-8B-4bit-DWQ-053125", "qwen3-8b", 4, "affine", 64),
    ("mlx-community/Qwen3-8B-DWQ", "qwen3-8b", 4, "affine", 64),  # mlx_lm.dwq defaults
    ("mlx-community/Qwen3-8B-mxfp4", "qwen3-8b", 4, "mxfp4", 32),
    ("mlx-community/Qwen3-8B-nvfp4", "qwen3-8b", 4, "nvfp4", 16),
    ("mlx-community/Qwen3-8B-mxfp8", "qwen3-8b", 8, "mxfp8", 32),
    ("mlx-community/Qwen3-8B-bf16", "qwen3-8b", 16, None, None),
    ("MLX-Community/qwen3-8b-BF16", "qwen3-8b", 16, None, None),
    ("mlx-community/Qwen3-8B-MLX-4bit", "qwen3-8b", 4, "affine", 64),
    ("mlx-community/Llama-3.1-8B-Instruct-hf-4bit-mlx", "llama-3.1-8b-instruct", 4, "affine", 64),
    ("mlx-community/gemma-3-27b-it-qat-4bit", "gemma-3-27b-it", 4, "affine", 64),
    ("Qwen/Qwen3-8B-AWQ", "qwen3-8b", 4, "affine", 128),  # mlx-lm repacks AutoAWQ as affine 4-bit
    ("mlx-community/gpt-oss-20b-MXFP4-Q8", "gpt-oss-20b", None, None, None),  # mixed
    ("some-user/Qwen3-8B-4bit", "qwen3-8b", 4, "affine", 64),
    ("/models/mlx-community/Qwen3-8B-4bit", "qwen3-8b", 4, "affine", 64),  # a path named like a repo
    ("mlx-community/NVIDIA-Nemotron-H-56B-Base-8K-4bit", "nemotron-h-56b-base-8k", 4, "affine", 64),  # vendor prefix
    ("lmstudio-community/Qwen3-8B-MLX-8bit", "qwen3-8b", 8, "affine", 64),
    ("mlx-community/Qwen3-8B-4bit-dwq-v2", "qwen3-8b", 4, "affine", 64),
    ("mlx-community/Qwen3-30B-A3B-4bit-DWQ-05082025", "qwen3-30b-a3b", 4, "affine", 64),
    ("mlx-community/gpt-oss-20b-MXFP4-Q4", "gpt-oss-20b", None, None, None),  # mxfp4 experts + affine 4-bit
]


@pytest.mark.parametrize("q,variant,bits,mode,group", CASES)
def test_suffixes_resolve_to_base_and_storage(reg, q, variant, bits, mode, group):
    r = reg.resolve(q)
    assert r.profile.name == variant
    assert r.weights_bits == bits
    if mode:
        assert (r.quant.mode, r.quant.group_size) == (mode, group)


def test_instruct_2507_resolves_to_base_architecture_and_says_so(reg):
    r = reg.resolve("mlx-community/Qwen3-30B-A3B-Instruct-2507-4bit")
    assert r.profile.name == "qwen3-30b-a3b" and r.matched_by == "base-architecture"
    assert r.weights_bits == 4
    assert any("Instruct-2507" in n and "max context" in n for n in r.notes)


def test_mixed_is_not_labelled_8bit(reg):
    r = reg.resolve("mlx-community/gpt-oss-20b-MXFP4-Q8")
    assert r.quant.mixed and "mxfp4" in r.quant.label() and r.weights_bits is None
    assert "8-bit" not in estimate_weights(r).source  # no params in that profile: unknown, never "8-bit"
    r = reg.resolve("mlx-community/Qwen3-8B-mixed_3_6")
    w = estimate_weights(r)
    six = estimate_weights(reg.resolve("mlx-community/Qwen3-8B-6bit"))
    assert w.bytes == six.bytes and not w.exact  # every parameter at the costlier part: an upper bound
    assert "upper bound" in w.reason and "mixed" in w.reason


def test_awq_is_not_bf16(reg):
    bf16 = estimate_weights(reg.resolve("Qwen/Qwen3-8B")).bytes
    r = reg.resolve("Qwen/Qwen3-8B-AWQ")
    w = estimate_weights(r)
    assert w.bits == 4 and w.group_size == 128
    # body at 4 bits + the fp16 embedding and untied LM head AWQ leaves unquantized (2 x 151936 x 4096)
    params = r.profile.weights.params
    emb = 2 * 151936 * 4096
    assert w.bytes > emb * 2 + (params - emb) // 2
    assert w.bytes < 0.45 * bf16


@pytest.mark.parametrize("q,what", [
    ("qwen3:8b-q4_K_M", "Ollama tag"),
    ("qwen3:8b", None),  # a registry alias: an exact hit wins
    ("llama3.1:70b-instruct-q8_0", "Ollama tag"),
    ("unsloth/Qwen3-8B-GGUF", "GGUF"),
    ("bartowski/Qwen3-8B-Q4_K_M", "llama.cpp"),
    ("someone/Qwen3-8B-IQ3_XS", "llama.cpp"),
    ("someone/Qwen3-8B-exl2", "ExLlama"),
])
def test_not_mlx_checkpoints_are_refused_with_the_reason(reg, q, what):
    if what is None:
        assert reg.resolve(q).profile.name == "qwen3-8b"
        return
    with pytest.raises(NotMLXCheckpointError) as e:
        reg.resolve(q)
    assert what in str(e.value) and "not an MLX checkpoint" in str(e.value)
    assert isinstance(e.value, UnknownModelError)  # a caller's local-path fallback still runs


def test_refusal_at_the_cli(capsys):
    from omlx_profiles.cli.main import main

    assert main(["estimate", "qwen3:8b-q4_K_M", "--tokens", "1k"]) == 2
    err = capsys.readouterr().err
    assert "Ollama tag" in err and "internal error" not in err and "Traceback" not in err


def test_unknown_stays_unknown(reg):
    with pytest.raises(UnknownModelError):
        reg.resolve("mlx-community/NoSuchModel-7B-4bit")


def test_parse_is_pure_and_bounded():
    p = parse_id("org/" + "-4bit" * 60 + "x")  # no suffix loop runs away
    assert p.stem.startswith("org/")
    p = parse_id("mlx-community/Qwen3-30B-A3B-Instruct-2507-4bit-DWQ-053125")
    assert p.stem == "mlx-community/Qwen3-30B-A3B-Instruct-2507"
    assert p.bases[-1] == "mlx-community/Qwen3-30B-A3B"
    assert p.quant.markers == ("DWQ",)


def test_table_is_schema_checked(tmp_path, monkeypatch):
    import omlx_profiles.registry.naming as naming
    from omlx_profiles.errors import ProfileError

    d = tmp_path / "naming"
    d.mkdir()
    (d / "ids.yaml").write_text("version: 1\nsuffixes:\n  - token: '(unclosed'\n")
    monkeypatch.setattr(naming, "naming_file", lambda: d / "ids.yaml")
    naming._table.cache_clear()
    try:
        with pytest.raises(ProfileError, match="regular expression"):
            naming.parse_id("a/b-4bit")
    finally:
        naming._table.cache_clear()


def test_api_resolve_local_dir_files_win(tmp_path):
    """``resolve(model_id, local_dir=...)``: the directory's config.json, whatever the id says."""
    import shutil

    import omlx_profiles
    from .conftest import CONFIGS

    d = tmp_path / "Qwen3-0.6B-4bit"  # named like a smaller model than it holds
    d.mkdir()
    shutil.copy(CONFIGS / "qwen3-8b.json", d / "config.json")
    r = omlx_profiles.resolve("mlx-community/Qwen3-0.6B-4bit", local_dir=d)
    assert r.matched_by == "directory" and r.profile.num_layers == 36
    assert r.explain()["num_layers"].startswith(str(d))
