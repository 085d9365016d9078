"""Load-time checks across files: a duplicate or ambiguous id is an error naming both places (inside one
source), or a note saying who now answers (a user directory overriding the built-in registry). Never a
silent pick, never a crash."""
from __future__ import annotations

import re

import pytest

from omlx_profiles import ProfileError, UnknownModelError, load_registry
from omlx_profiles.registry.index import build_registry, profile_files

from .hostile.harness import EXIT_INVALID, assert_clean_failure, run_main


def variant(name: str, *, ids=(), aliases=(), base="llama-3.2-1b-instruct", extra="") -> str:
    out = f"  - name: {name}\n    base: {base}\n"
    if ids:
        out += f"    ids: [{', '.join(ids)}]\n"
    if aliases:
        out += f"    aliases: [{', '.join(aliases)}]\n"
    return out + extra


def family(fam: str, *variants: str) -> str:
    return f"family: {fam}\nmodel_types: [{fam}]\nvariants:\n" + "".join(variants)


def write(d, name, text):
    d.mkdir(exist_ok=True)
    (d / name).write_text(text)
    return d / name


def _errors(d) -> str:
    with pytest.raises(ProfileError) as e:
        load_registry([d], include_env=False)
    return str(e.value)


def _both_places(msg: str, a, b) -> None:
    assert re.search(rf"{re.escape(str(a))}:\d+", msg), msg
    assert re.search(rf"{re.escape(str(b))}:\d+", msg), msg


def test_same_id_in_two_files(tmp_path):
    d = tmp_path / "u"
    a = write(d, "a.yaml", family("fa", variant("va", ids=["org/Model-X"])))
    b = write(d, "b.yaml", family("fb", variant("vb", ids=["ORG/model-x"])))  # differs only in case
    msg = _errors(d)
    assert "already claimed" in msg
    _both_places(msg, a, b)


def test_same_variant_name_in_two_files(tmp_path):
    d = tmp_path / "u"
    a = write(d, "a.yaml", family("fa", variant("same-name")))
    b = write(d, "b.yaml", family("fb", variant("same-name")))
    msg = _errors(d)
    assert "also declared" in msg
    _both_places(msg, a, b)


def test_alias_equal_to_another_variants_name(tmp_path):
    d = tmp_path / "u"
    a = write(d, "a.yaml", family("fa", variant("va")))
    b = write(d, "b.yaml", family("fb", variant("vb", aliases=["va"])))
    msg = _errors(d)
    assert "is also the alias 'va'" in msg
    _both_places(msg, a, b)


def test_ambiguous_repo_name_in_two_files(tmp_path):
    d = tmp_path / "u"
    a = write(d, "a.yaml", family("fa", variant("va", ids=["org-a/Shared-7B"])))
    b = write(d, "b.yaml", family("fb", variant("vb", ids=["org-b/Shared-7B"])))
    msg = _errors(d)
    assert "ambiguous repo name 'shared-7b'" in msg
    _both_places(msg, a, b)


def test_ambiguous_repo_is_an_error_at_resolve_when_not_strict(tmp_path):
    d = tmp_path / "u"
    write(d, "a.yaml", family("fa", variant("va", ids=["org-a/Shared-7B"])))
    write(d, "b.yaml", family("fb", variant("vb", ids=["org-b/Shared-7B"])))
    reg = load_registry([d], include_env=False, strict=False)
    assert any("ambiguous repo name" in n for n in reg.notes)
    assert reg.resolve("org-a/Shared-7B").profile.name == "va"  # the full id is still exact
    with pytest.raises(UnknownModelError, match="ambiguous.*'va'.*'vb'|ambiguous.*'vb'.*'va'"):
        reg.resolve("mlx-community/Shared-7B-4bit")


def test_same_variant_sharing_a_repo_name_is_fine(tmp_path):
    d = tmp_path / "u"
    write(d, "a.yaml", family("fa", variant("va", ids=["org-a/Shared-7B", "mirror/Shared-7B"])))
    reg = load_registry([d], include_env=False)
    assert reg.resolve("mlx-community/Shared-7B-4bit").profile.name == "va"


def test_validate_reports_cross_file_duplicates(tmp_path):
    d = tmp_path / "u"
    a = write(d, "a.yaml", "# yaml-language-server: $schema=x\n" + family("fa", variant("va", ids=["org/Dup"])).replace(
        "  - name: va\n    base: llama-3.2-1b-instruct\n",
        "  - name: va\n    mlx_model_type: llama\n    dtype: bf16\n    num_layers: 2\n    num_kv_heads: 2\n"
        "    head_dim: 64\n    layers: {kinds: {f: {kind: full}}, pattern: [f]}\n"))
    b = write(d, "b.yaml", a.read_text().replace("family: fa", "family: fb").replace("[fa]", "[fb]").replace("name: va", "name: vb"))
    r = run_main("validate", str(d))
    assert_clean_failure(r, EXIT_INVALID, "already claimed")
    _both_places(r.err, a, b)


# --------------------------------------------------------------------------------------------------
# Across sources (built-in, then user directories): the later one answers, and says so.
# --------------------------------------------------------------------------------------------------
def test_user_variant_replacing_a_builtin_name_without_its_ids(tmp_path):
    """The built-in ids of that name now reach the user's variant (no crash looking them up)."""
    d = tmp_path / "u"
    write(d, "mine.yaml", family("mine", variant("llama-3.1-8b", ids=["me/Mine"])))
    reg = load_registry([d], include_env=False)
    r = reg.resolve("meta-llama/Llama-3.1-8B")
    assert r.profile.name == "llama-3.1-8b" and r.profile.source.startswith(str(d))
    assert any("overrides" in n for n in reg.notes)


def test_user_alias_taking_a_builtin_name(tmp_path):
    d = tmp_path / "u"
    write(d, "mine.yaml", family("mine", variant("my-variant", aliases=["llama-3.2-1b-instruct"])))
    reg = load_registry([d], include_env=False)
    assert reg.resolve("llama-3.2-1b-instruct").profile.name == "my-variant"
    assert any("now resolves to user variant 'my-variant'" in n for n in reg.notes)


def test_user_name_taking_a_builtin_alias(tmp_path):
    builtin = load_registry(include_env=False)
    alias = next(a for p in builtin for a in p.aliases if re.fullmatch(r"[a-z0-9][a-z0-9._-]*", a))
    d = tmp_path / "u"
    write(d, "mine.yaml", family("mine", variant(alias)))
    reg = load_registry([d], include_env=False)
    r = reg.resolve(alias)
    assert r.profile.name == alias and r.matched_by == "name"
    assert any(f"'{alias}' now resolves to user variant" in n for n in reg.notes)


def test_user_repo_name_takes_over_builtin(tmp_path):
    d = tmp_path / "u"
    write(d, "mine.yaml", family("mine", variant("my-llama", ids=["myorg/Llama-3.1-8B-Instruct"])))
    reg = load_registry([d], include_env=False)
    assert reg.resolve("mlx-community/Llama-3.1-8B-Instruct-4bit").profile.name == "my-llama"
    assert reg.resolve("meta-llama/Llama-3.1-8B-Instruct").profile.name == "llama-3.1-8b-instruct"


def test_two_user_dirs_same_id(tmp_path):
    d1, d2 = tmp_path / "u1", tmp_path / "u2"
    write(d1, "a.yaml", family("fa", variant("va", ids=["org/Twice"])))
    write(d2, "b.yaml", family("fb", variant("vb", ids=["org/Twice"])))
    reg = load_registry([d1, d2], include_env=False)
    assert reg.resolve("org/Twice").profile.name == "vb"
    assert any("org/Twice" in n and "'vb'" in n and "'va'" in n for n in reg.notes)


def test_registry_load_is_independent_of_file_order(tmp_path):
    d = tmp_path / "u"
    for i in range(5):
        write(d, f"f{i}.yaml", family(f"f{i}", variant(f"v{i}", ids=[f"org{i}/M{i}"], aliases=[f"a{i}"])))
    from omlx_profiles.registry.paths import builtin_profiles_dir

    builtin = profile_files(builtin_profiles_dir())
    reg1 = build_registry([builtin, profile_files(d)])
    reg2 = build_registry([builtin, list(reversed(profile_files(d)))])
    assert {k: v[0] for k, v in reg1._index.items()} == {k: v[0] for k, v in reg2._index.items()}


def test_validate_user_dir_inheriting_from_builtin(tmp_path):
    """`validate DIR` checks a user directory the way the registry loads it: on top of the built-in one."""
    d = tmp_path / "u"
    write(d, "mine.yaml", family("mine", variant("my-llama", ids=["me/Mine"], base="llama-3.1-8b")))
    r = run_main("validate", str(d))
    assert r.code == 0, r.err
    assert "1 variant" in r.out
