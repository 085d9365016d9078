"""The compiled registry (``omlx_profiles.compiled``): same answers as the full load, invalidated by any
change, and never the reason a load fails."""
from __future__ import annotations

import json
import shutil

import pytest

from omlx_profiles import compiled, load_registry
from omlx_profiles.profile import CacheEntry, LayerType, Profile, StateTensorSpec
from omlx_profiles.registry import build_registry, profile_files

from .conftest import PROFILES


def _roundtrip(reg):
    return compiled.load_registry_dict(json.loads(json.dumps(compiled.dump_registry(reg))))


def test_every_profile_and_id_survives():
    reg = load_registry(include_env=False)
    back = _roundtrip(reg)
    assert set(back.profiles) == set(reg.profiles)
    for name, p in reg.profiles.items():
        q = back.profiles[name]
        assert compiled.dump_profile(q) == compiled.dump_profile(p)
        assert q.layer_types == p.layer_types and q.groups == p.groups and q.variant is None
    for key in reg.ids() + list(reg.profiles):
        a, b = reg.resolve(key), back.resolve(key)
        assert (a.profile.name, a.matched_by, a.matched, a.weights_bits) == (b.profile.name, b.matched_by, b.matched,
                                                                              b.weights_bits)
    for q in ("mlx-community/Llama-3.1-8B-Instruct-4bit", "someone/Llama-3.1-8B-Instruct"):
        assert reg.resolve(q).as_dict() == back.resolve(q).as_dict()


def test_state_and_nested_fields_roundtrip():
    lt = LayerType("s", (CacheEntry("state", tensors=(StateTensorSpec("conv", 3 * 512, "model"),
                                                      StateTensorSpec("ssm", 8 * 64 * 128, "fp32"))),
                         CacheEntry("sliding", n_kv=2, k_width=64, v_width=64, window=512, keep=4, in_list=True)))
    p = Profile(name="x", family="f", mlx_model_type="m", num_layers=2, dtype="bf16", layer_names=("s", "s"),
                layer_types={"s": lt}, ids=("a/b",))
    q = compiled.load_profile(json.loads(json.dumps(compiled.dump_profile(p))))
    assert q == p


def test_frozen_is_read_only():
    f = compiled.Frozen({"a": 1, "b": {"c": [1, 2]}})
    assert f.a == 1 and f.b.c == (1, 2)
    with pytest.raises(AttributeError):
        f.a = 2
    with pytest.raises(AttributeError):
        _ = f.missing


def test_cache_hit_miss_and_invalidation(tmp_path, monkeypatch, profiles_copy):
    monkeypatch.setenv(compiled.ENV, str(tmp_path / "cache"))
    sources = [profile_files(profiles_copy)]
    calls = []

    def build():
        calls.append(1)
        return build_registry(sources)

    r1 = compiled.cached_registry(sources, build)
    r2 = compiled.cached_registry(sources, build)
    assert len(calls) == 1 and set(r1.profiles) == set(r2.profiles)
    assert r2.profiles[next(iter(r2.profiles))].variant is None  # came from the compiled file
    # editing a profile changes the key (the key hashes contents, not mtimes)
    f = sources[0][0]
    f.write_text(f.read_text() + "\n# edited\n")
    compiled.cached_registry(sources, build)
    assert len(calls) == 2
    # a damaged cache file is rebuilt, not trusted
    for c in (tmp_path / "cache").glob("registry-*.json"):
        c.write_text("{not json")
    compiled.cached_registry(sources, build)
    assert len(calls) == 3


def test_cache_off_and_unwritable(tmp_path, monkeypatch, profiles_copy):
    sources = [profile_files(profiles_copy)]
    calls = []

    def build():
        calls.append(1)
        return build_registry(sources)

    monkeypatch.setenv(compiled.ENV, "off")
    compiled.cached_registry(sources, build)
    compiled.cached_registry(sources, build)
    assert len(calls) == 2
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv(compiled.ENV, str(blocker / "sub"))  # cannot mkdir under a file
    reg = compiled.cached_registry(sources, build)
    assert len(calls) == 3 and reg.profiles


def test_user_dirs_are_part_of_the_key(tmp_path, profiles_copy):
    user = tmp_path / "user"
    user.mkdir()
    shutil.copy(PROFILES / "llama.yaml", user / "mine.yaml")
    a = compiled.key([profile_files(profiles_copy)])
    b = compiled.key([profile_files(profiles_copy), profile_files(user)])
    assert a != b


def test_opt_in_only(monkeypatch, tmp_path):
    monkeypatch.setenv(compiled.ENV, str(tmp_path))
    monkeypatch.setattr(compiled, "_ENABLED", [False])
    assert not compiled.enabled()
    compiled.enable()
    assert compiled.enabled()
    monkeypatch.setenv(compiled.ENV, "off")
    assert not compiled.enabled()


def test_cached_model_roundtrip(tmp_path, monkeypatch):
    from omlx_profiles.schema_models import Weights

    monkeypatch.setenv(compiled.ENV, str(tmp_path / "c"))
    src = tmp_path / "w.yaml"
    src.write_text("params: 8")
    calls = []

    def build():
        calls.append(1)
        return Weights(params=8, bits=4)

    a = compiled.cached_model("w", [src], build)
    b = compiled.cached_model("w", [src], build)
    assert len(calls) == 1 and a.params == b.params == 8 and b.bits == 4 and isinstance(b, compiled.Frozen)
    assert b.get("bits") == 4 and "params" in b and dict(b.items())["params"] == 8
