"""The committed JSON Schema must match the Pydantic models; every profile points editors at it."""
from __future__ import annotations

import re

from omlx_profiles.schema import family as schema_models
from omlx_profiles.registry.paths import schema_dir
from omlx_profiles.schema.export import drifted, schemas

from .conftest import PROFILES


def test_committed_schema_matches_models():
    assert drifted(schema_dir()) == [], "run `omlx-profiles schema --write` and commit schema/"


def test_drift_is_detected(monkeypatch, tmp_path):
    from omlx_profiles.schema.export import write_schemas

    write_schemas(tmp_path)
    assert drifted(tmp_path) == []
    # a model field changes without regenerating -> the check fails
    orig = schemas

    def changed():
        s = orig()
        s["profile.schema.json"]["$defs"]["VariantEntry"]["properties"]["num_layers"] = {"type": "string"}
        return s

    monkeypatch.setattr("omlx_profiles.schema.export.schemas", changed)
    assert "v1/profile.schema.json" in drifted(tmp_path)


def test_every_shipped_yaml_points_at_its_versioned_schema():
    """Family, kernel and calibration files start with the hint of their kind; the hint's path resolves
    to a committed file whose ``$id`` ends in that same ``schema/v<N>/<name>`` path."""
    import json

    from omlx_profiles.schema.export import SCHEMA_VERSION

    files = sorted(PROFILES.rglob("*.yaml"))
    kinds = {"family": 0, "kernels": 0, "calibration": 0, "sharding": 0, "naming": 0}
    for p in files:
        if p.parent.name == "mlx_lm" and p.stem != "sharding" or p.parent == PROFILES / "calibration":
            continue  # module recipes and derived tables (calibration/measured_traits.yaml): no schema
        first = p.read_text().splitlines()[0]
        m = re.fullmatch(r"# yaml-language-server: \$schema=((?:\.\./)+)schema/v(\d+)/(\w+)\.schema\.json", first)
        assert m, f"{p}: first line {first!r}; run `python tools/schema_hints.py`"
        up, version, name = m.groups()
        assert int(version) == SCHEMA_VERSION, p
        target = (p.parent / first.split("=", 1)[1]).resolve()
        assert target.is_file(), (p, target)
        assert json.loads(target.read_text())["$id"].endswith(f"/schema/v{version}/{name}.schema.json")
        kind = {"profile": "family"}.get(name, name)
        expected = {"family": PROFILES, "kernels": PROFILES / "kernels", "sharding": PROFILES / "mlx_lm",
                    "naming": PROFILES / "naming"}.get(kind, p.parent)
        assert p.parent == expected or kind == "calibration" and p.parent.parent.name == "calibration", (p, name)
        kinds[kind] += 1
    assert all(kinds.values()), kinds


def test_schema_ids_are_stable_and_versioned():
    """The ``$id`` names the schema version; a bump must be deliberate (this number and the files move)."""
    from omlx_profiles.schema.export import ID_BASE, SCHEMA_VERSION

    assert SCHEMA_VERSION == 1
    for name, s in schemas().items():
        assert s["$id"] == f"{ID_BASE}/v1/{name}"
        assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert sorted(schemas()) == ["calibration.schema.json", "kernels.schema.json", "module-index.schema.json",
                                 "module.schema.json", "naming.schema.json", "profile.schema.json",
                                 "sharding.schema.json"]


def test_schema_rejects_bool_for_int():
    import jsonschema

    s = schemas()["profile.schema.json"]
    doc = {"family": "x", "model_types": ["llama"], "variants": [{"name": "a", "num_layers": True}]}
    errs = list(jsonschema.Draft202012Validator(s).iter_errors(doc))
    assert errs, "a bool must not pass as a layer count"
    assert schema_models.ProfileFile  # models importable


def test_schema_check_on_a_vendored_copy(cli, tmp_path):
    """A downstream repository vendors the schemas once and checks them in CI: clean, drifted, missing."""
    vend = tmp_path / "schema"
    code, out, _ = cli("schema", "--write", str(vend))
    assert code == 0 and len(out.splitlines()) == 7
    assert sorted(p.name for p in (vend / "v1").iterdir()) == sorted(schemas())
    code, out, err = cli("schema", "--check", str(vend))
    assert (code, err) == (0, ""), err
    p = vend / "v1" / "kernels.schema.json"
    p.write_text(p.read_text().replace('"cuda"', '"tpu"'))
    code, _, err = cli("schema", "--check", str(vend))
    assert code == 1 and "v1/kernels.schema.json" in err and "profile.schema.json" not in err
    code, _, err = cli("schema", "--check", str(tmp_path / "nothing"))
    assert code == 1 and err.count("is missing or differs") == 7
    code, _, _ = cli("schema", "--check")  # the package's own committed copy
    assert code == 0


def test_writers_emit_the_hint_and_valid_files(tmp_path):
    """``extract --write``'s skeleton and ``calibrate``'s file start with their versioned hint, and the
    calibration writer's output passes ``validate`` (its model declares every key the writer emits)."""
    from omlx_profiles.cli.cmd_calibrate import _write
    from omlx_profiles.extraction.skeleton import SCHEMA_LINE
    from omlx_profiles.schema.export import hint_line
    from omlx_profiles.registry.check import validate_paths

    assert SCHEMA_LINE == "# yaml-language-server: $schema=../schema/v1/profile.schema.json"
    out = tmp_path / "calibration" / "cpu" / "t.yaml"
    out.parent.mkdir(parents=True)
    point = {"model": "t", "config_inline": {"model_type": "llama"}, "model_type": "llama", "prefill_step_size": 256,
             "tokens": 512, "cached_tokens": 0, "dtype": "bf16", "kv_bytes": 1, "weights_bytes": 2,
             "peak_over_baseline": [5, 7], "peak_over_baseline_max": 7, "estimate_at_calibration": 8,
             "chunks": [{"q_len": 256, "kv_len": 256, "before": 0, "peak": 7}]}
    _write(out, "cpu", {"default_device": "Device(cpu, 0)", "mlx_version": "0.32.4", "mlx_lm_version": "0.32.2"},
           "bf16", [point])
    assert out.read_text().splitlines()[0] == hint_line("calibration.schema.json", 3)
    assert validate_paths([out]) == ([], 0)


def test_builtin_calibration_files_validate_and_bad_ones_do_not(tmp_path):
    from omlx_profiles.registry.check import validate_paths

    files = sorted((PROFILES / "calibration").glob("*/*.yaml"))
    assert len(files) >= 10
    assert validate_paths(files)[0] == []
    bad = tmp_path / "calibration" / "cpu" / "x.yaml"
    bad.parent.mkdir(parents=True)
    text = files[0].read_text()
    bad.write_text(text.replace("tokens:", "tokenz:", 1))
    issues = validate_paths([bad])[0]
    assert any(i.path.endswith("tokenz") and "unknown key" in i.message for i in issues), issues
    assert any(i.path.endswith(".tokens") and "missing" in i.message for i in issues), issues
