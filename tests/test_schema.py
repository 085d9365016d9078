"""The committed JSON Schema must match the Pydantic models; every profile points editors at it."""
from __future__ import annotations

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
    assert "profile.schema.json" in drifted(tmp_path)


def test_every_profile_has_editor_schema_comment():
    for p in PROFILES.glob("*.yaml"):
        first = p.read_text().splitlines()[0]
        assert first == "# yaml-language-server: $schema=../schema/profile.schema.json", p
    for p in (PROFILES / "kernels").glob("*.yaml"):
        assert p.read_text().splitlines()[0] == "# yaml-language-server: $schema=../../schema/kernels.schema.json", p


def test_schema_rejects_bool_for_int():
    import jsonschema

    s = schemas()["profile.schema.json"]
    doc = {"family": "x", "model_types": ["llama"], "variants": [{"name": "a", "num_layers": True}]}
    errs = list(jsonschema.Draft202012Validator(s).iter_errors(doc))
    assert errs, "a bool must not pass as a layer count"
    assert schema_models.ProfileFile  # models importable
