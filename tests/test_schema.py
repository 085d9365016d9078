"""The committed JSON Schema must match the Pydantic models; every profile points editors at it."""
from __future__ import annotations

import re

from omlx_profiles import schema_models
from omlx_profiles.paths import schema_dir
from omlx_profiles.schema_export import drifted, schemas

from .conftest import PROFILES


def test_committed_schema_matches_models():
    assert drifted(schema_dir()) == [], "run `omlx-profiles schema --write` and commit schema/"


def test_drift_is_detected(monkeypatch, tmp_path):
    from omlx_profiles.schema_export import write_schemas

    write_schemas(tmp_path)
    assert drifted(tmp_path) == []
    # a model field changes without regenerating -> the check fails
    orig = schemas

    def changed():
        s = orig()
        s["profile.schema.json"]["$defs"]["VariantEntry"]["properties"]["num_layers"] = {"type": "string"}
        return s

    monkeypatch.setattr("omlx_profiles.schema_export.schemas", changed)
    assert "v1/profile.schema.json" in drifted(tmp_path)


def test_every_shipped_yaml_points_at_its_versioned_schema():
    """Family, kernel and calibration files start with the hint of their kind; the hint's path resolves
    to a committed file whose ``$id`` ends in that same ``schema/v<N>/<name>`` path."""
    import json

    from omlx_profiles.schema_export import SCHEMA_VERSION

    files = sorted(PROFILES.rglob("*.yaml"))
    kinds = {"family": 0, "kernels": 0, "calibration": 0}
    for p in files:
        if p.parent.name == "mlx_lm":
            continue
        first = p.read_text().splitlines()[0]
        m = re.fullmatch(r"# yaml-language-server: \$schema=((?:\.\./)+)schema/v(\d+)/(\w+)\.schema\.json", first)
        assert m, f"{p}: first line {first!r}; run `python tools/schema_hints.py`"
        up, version, name = m.groups()
        assert int(version) == SCHEMA_VERSION, p
        target = (p.parent / first.split("=", 1)[1]).resolve()
        assert target.is_file(), (p, target)
        assert json.loads(target.read_text())["$id"].endswith(f"/schema/v{version}/{name}.schema.json")
        kind = {"profile": "family", "kernels": "kernels", "calibration": "calibration"}[name]
        expected = {"family": PROFILES, "kernels": PROFILES / "kernels"}.get(kind, p.parent)
        assert p.parent == expected or kind == "calibration" and p.parent.parent.name == "calibration", (p, name)
        kinds[kind] += 1
    assert all(kinds.values()), kinds


def test_schema_ids_are_stable_and_versioned():
    """The ``$id`` names the schema version; a bump must be deliberate (this number and the files move)."""
    from omlx_profiles.schema_export import ID_BASE, SCHEMA_VERSION

    assert SCHEMA_VERSION == 1
    for name, s in schemas().items():
        assert s["$id"] == f"{ID_BASE}/v1/{name}"
        assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert sorted(schemas()) == ["calibration.schema.json", "kernels.schema.json", "profile.schema.json"]


def test_schema_rejects_bool_for_int():
    import jsonschema

    s = schemas()["profile.schema.json"]
    doc = {"family": "x", "model_types": ["llama"], "variants": [{"name": "a", "num_layers": True}]}
    errs = list(jsonschema.Draft202012Validator(s).iter_errors(doc))
    assert errs, "a bool must not pass as a layer count"
    assert schema_models.ProfileFile  # models importable
