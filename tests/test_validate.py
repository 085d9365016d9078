"""`validate` names file, line and field for every problem, exits 1, never shows a traceback."""
from __future__ import annotations

import re

import pytest

LLAMA_OK = """\
# yaml-language-server: $schema=../schema/v1/profile.schema.json
family: t
model_types: [llama]
defaults:
  mlx_model_type: llama
  dtype: bf16
  layers:
    kinds:
      full: {kind: full}
    pattern: [full]
variants:
  - name: t-ok
    ids: [test/ok]
    num_layers: 4
    num_heads: 4
    num_kv_heads: 2
    head_dim: 64
"""


def _write(d, name, text):
    p = d / name
    p.write_text(text)
    return p


def test_builtin_profiles_validate(cli):
    code, out, err = cli("validate")
    assert code == 0, err
    assert out.startswith("ok:")


def test_good_file(cli, tmp_path):
    code, _, err = cli("validate", str(_write(tmp_path, "t.yaml", LLAMA_OK)))
    assert code == 0, err


@pytest.mark.parametrize("mutate,field,words,line", [
    (lambda s: s.replace("    head_dim: 64\n", "    head_dim: 64\n    bogus_key: 1\n"), "variants.0.bogus_key", "unknown key", 18),
    (lambda s: s.replace("num_layers: 4", "num_layers: -4"), "variants.0.num_layers", "greater than 0", 14),
    (lambda s: s.replace("full: {kind: full}", "full: {kind: sliding}"), "defaults.layers.kinds.full.window", "missing", 9),
    (lambda s: s.replace("num_layers: 4", "num_layers: true"), "variants.0.num_layers", "integer", 14),
    (lambda s: s.replace("pattern: [full]", "pattern: [full, full, full]"), "variants.0", "does not tile", 12),
])
def test_bad_file_names_file_line_field(cli, tmp_path, mutate, field, words, line):
    p = _write(tmp_path, "t.yaml", mutate(LLAMA_OK))
    code, out, err = cli("validate", str(p))
    assert code == 1
    assert "Traceback" not in err
    assert re.search(rf"{re.escape(str(p))}:{line}: {re.escape(field)}", err), err
    assert words in err


def test_duplicate_id_across_files(cli, tmp_path):
    _write(tmp_path, "a.yaml", LLAMA_OK)
    _write(tmp_path, "b.yaml", LLAMA_OK.replace("family: t", "family: u").replace("name: t-ok", "name: u-ok"))
    code, _, err = cli("validate", str(tmp_path))
    assert code == 1
    assert "test/ok" in err and "already claimed" in err and "a.yaml:13" in err and "b.yaml:13" in err


def test_duplicate_yaml_key(cli, tmp_path):
    p = _write(tmp_path, "t.yaml", LLAMA_OK.replace("    num_layers: 4\n", "    num_layers: 4\n    num_layers: 5\n"))
    code, _, err = cli("validate", str(p))
    assert code == 1 and f"{p}:15" in err and "duplicate key 'num_layers' (first on line 14)" in err


def test_python_tag_is_refused_and_not_run(cli, tmp_path):
    marker = tmp_path / "pwned"
    p = _write(tmp_path, "t.yaml", LLAMA_OK + f"notes: !!python/object/apply:os.system ['touch {marker}']\n")
    code, _, err = cli("validate", str(p))
    assert code == 1 and not marker.exists() and "YAML error" in err


def test_missing_path(cli, tmp_path):
    code, _, err = cli("validate", str(tmp_path / "nope.yaml"))
    assert code == 1 and "no such file" in err


def test_every_kind_of_data_file_is_checked(tmp_path):
    """A directory laid out like profiles/: the sharding plan, the naming table, kernel tables and
    calibration files are validated against their own models (a typo'd key in each is reported)."""
    import shutil

    from omlx_profiles.registry.check import validate_paths

    from .conftest import PROFILES

    d = tmp_path / "profiles"
    for rel in ["llama.yaml", "mlx_lm/sharding.yaml", "naming/ids.yaml", "kernels/cpu.yaml",
                "calibration/cpu/qwen3-8b-shrunk.yaml"]:
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(PROFILES / rel, d / rel)
    from omlx_profiles.registry.yaml_safe import load_yaml_file

    n_variants = len(load_yaml_file(d / "llama.yaml")["variants"])  # the count is the variants validated
    assert validate_paths([d]) == ([], n_variants)
    for rel, key in [("mlx_lm/sharding.yaml", "mlx_lm:"), ("naming/ids.yaml", "version:"),
                     ("kernels/cpu.yaml", "backend:"), ("calibration/cpu/qwen3-8b-shrunk.yaml", "device:")]:
        p = d / rel
        p.write_text(p.read_text().replace(key, "typo_" + key, 1))
    issues, _ = validate_paths([d])
    for rel, key in [("mlx_lm/sharding.yaml", "typo_mlx_lm"), ("naming/ids.yaml", "typo_version"),
                     ("kernels/cpu.yaml", "typo_backend"), ("calibration/cpu/qwen3-8b-shrunk.yaml", "typo_device")]:
        assert any(i.file == str(d / rel) and i.path == key and "unknown key" in i.message for i in issues), (rel, issues)


def test_validate_parses_each_file_once(monkeypatch):
    """``validate`` parses every family file one time: the Pydantic models, the JSON Schema pass and the
    registry build all read that one parse (it used to parse each file three times)."""
    from collections import Counter

    from omlx_profiles.registry import check, files, yaml_safe
    from omlx_profiles.registry.paths import builtin_profiles_dir

    parses: Counter = Counter()
    real = yaml_safe.load_yaml_text

    def counting(text, source="<string>", *a, **kw):
        parses[str(source)] += 1
        return real(text, source, *a, **kw)

    for mod in (check, files):
        monkeypatch.setattr(mod, "load_yaml_text", counting)
    issues, count = check.validate_paths([builtin_profiles_dir()])
    assert not issues and count > 0
    family = [s for s in parses if "/mlx_lm/" not in s and "/kernels/" not in s and "/calibration/" not in s
              and "/naming/" not in s]
    assert len(family) >= 10, sorted(parses)
    assert {s: n for s, n in parses.items() if n != 1} == {}


def test_a_missing_path_is_quoted_on_one_line(cli, tmp_path):
    """``validate $'x\\nerror: y.yaml'`` printed the path's newline raw: a second "error:" line the user did not
    write (the rule every other command keeps: ``files.shown_path``); a very long path is cut in the middle."""
    forged = tmp_path / "x\nerror: forged.yaml"
    long = tmp_path / ("d" * 300 + ".yaml")  # too long a name for the file system: "cannot read"
    code, out, err = cli("validate", str(forged), str(long))
    assert code == 1
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 2, err
    assert "x\\nerror: forged.yaml: no such file or directory" in lines[0]
    assert "..." in lines[1] and ".yaml: cannot read" in lines[1] and len(lines[1]) < 260, lines[1]
