"""``validate --format text|github|json|sarif`` end to end through the CLI, over a fixed set of bad files
(``tests/validate_cases/``: a family file with bad types and an unknown key, a YAML duplicate key, an id
claimed by two files, a ``base:`` that does not exist, a bad kernel table, a bad calibration file, a
missing path).

Each format is compared with its golden file in ``tests/validate_cases/expected/``. The goldens are the
CLI's own output, so each format is ALSO checked against what its consumer requires, independently of
the goldens: GitHub's workflow-command grammar, the JSON fields, SARIF 2.1.0 as GitHub code scanning
reads it, and every reported line/column pointing at the named field in the file.

Regenerate the goldens after an intended change of messages (and say why in the commit):
    OMLX_PROFILES_REGEN_GOLDEN=1 .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_validate_formats.py
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from omlx_profiles import __version__

CASES = Path(__file__).resolve().parent / "validate_cases"
EXPECTED = CASES / "expected"
ARGS = ("profiles", "missing.yaml")
GOLDEN = {"text": "validate.txt", "github": "validate.github.txt", "json": "validate.json", "sarif": "validate.sarif"}


@pytest.fixture
def run_format(cli, monkeypatch):
    monkeypatch.chdir(CASES)  # relative paths in, relative paths out: the goldens do not name this machine

    def run(fmt: str):
        code, out, err = cli("validate", "--format", fmt, *ARGS)
        assert code == 1, (out, err)
        assert "Traceback" not in out + err
        return out, err
    return run


@pytest.mark.parametrize("fmt", list(GOLDEN))
def test_format_matches_golden(run_format, fmt):
    out, err = run_format(fmt)
    got = err if fmt == "text" else out
    if fmt == "sarif":
        got = got.replace(f'"version": "{__version__}"', '"version": "<version>"')
    path = EXPECTED / GOLDEN[fmt]
    if os.environ.get("OMLX_PROFILES_REGEN_GOLDEN"):
        path.write_text(got, encoding="utf-8")
    assert got == path.read_text(encoding="utf-8"), f"{fmt} output changed; see this file's docstring"
    if fmt != "text":
        assert err.strip() == "14 problem(s) found"  # machine output alone on stdout


def test_every_case_is_caught(run_format):
    """The fixed bad files each produce the problem they were written for (so the goldens cannot go empty)."""
    out, _ = run_format("json")
    recs = json.loads(out)
    got = {(r["file"], r["field"]) for r in recs}
    for want in [("missing.yaml", ""),
                 ("profiles/bad_types.yaml", "variants.0.num_layers"),
                 ("profiles/bad_types.yaml", "variants.0.num_heads"),
                 ("profiles/bad_types.yaml", "variants.0.flavour"),
                 ("profiles/broken_yaml.yaml", ""),
                 ("profiles/dup_b.yaml", "variants.0.ids.0"),      # duplicate id across two files
                 ("profiles/dup_b.yaml", "variants.1.base"),       # inheritance from nothing
                 ("profiles/kernels/cpu.yaml", "backend"),
                 ("profiles/calibration/cpu/bad_points.yaml", "points.0"),
                 ("profiles/calibration/cpu/bad_points.yaml", "points.1.comment")]:
        assert want in got, want
    # dup_b's first variant inherits from dup_a: no "unknown base" for it
    assert ("profiles/dup_b.yaml", "variants.0.base") not in got


def test_json_fields_and_positions(run_format):
    out, _ = run_format("json")
    recs = json.loads(out)
    assert len(recs) == 14
    with_col = 0
    for r in recs:
        assert list(r) == ["file", "line", "column", "field", "message", "severity"]
        assert r["severity"] == "error" and r["message"]
        assert r["line"] is None or r["line"] >= 1
        if r["column"] is not None:
            # the column points at the field's key (or the dash of a list item) on that line
            text = (CASES / r["file"]).read_text().splitlines()[r["line"] - 1]
            last = r["field"].rsplit(".", 1)[-1]
            at = text[r["column"] - 1:]
            assert at.startswith("-" if last.isdigit() else last), (r, text)
            with_col += 1
    assert with_col >= 6


GH_LINE = re.compile(r"::error file=(?P<file>[^,:]+)(?:,line=(?P<line>\d+)(?:,col=(?P<col>\d+))?)?,title=[^:,]+::(?P<msg>.+)")


def test_github_annotations_follow_the_workflow_command_grammar(run_format):
    out, _ = run_format("github")
    json_recs = json.loads(run_format("json")[0])
    lines = out.splitlines()
    assert len(lines) == len(json_recs)
    for line, r in zip(lines, json_recs):
        m = GH_LINE.fullmatch(line)
        assert m, line
        assert m["file"] == r["file"]
        assert (int(m["line"]) if m["line"] else None) == r["line"]
        assert (int(m["col"]) if m["col"] else None) == (r["column"] if r["line"] else None)
        assert "\n" not in m["msg"] and "%0A" not in m["msg"]


def test_github_escapes_data_and_properties():
    from omlx_profiles.cli.issue_formats import github

    out = github([{"file": "a,b:c.yaml", "line": 2, "column": None, "field": "x", "message": "50% done\nnext",
                   "severity": "error"}])
    assert out == "::error file=a%2Cb%3Ac.yaml,line=2,title=omlx-profiles validate::x: 50%25 done%0Anext\n"


def test_sarif_is_what_code_scanning_reads(run_format):
    """SARIF 2.1.0 as GitHub code scanning requires it: version, tool.driver.name, rules referenced by
    id and index, a level, a message, a relative artifact URI and a region with startLine >= 1."""
    log = json.loads(run_format("sarif")[0])
    json_recs = json.loads(run_format("json")[0])
    assert log["version"] == "2.1.0" and log["$schema"].endswith("sarif-2.1.0.json")
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "omlx-profiles" and driver["version"] == __version__
    ids = [r["id"] for r in driver["rules"]]
    assert len(ids) == len(set(ids)) == 3  # family, kernels, calibration files
    assert len(run["results"]) == len(json_recs)
    for res, r in zip(run["results"], json_recs):
        assert ids[res["ruleIndex"]] == res["ruleId"]
        assert res["level"] == "error" and res["message"]["text"].endswith(r["message"])
        (loc,) = res["locations"]
        phys = loc["physicalLocation"]
        assert phys["artifactLocation"]["uri"] == r["file"]
        assert phys["region"]["startLine"] == (r["line"] or 1)
        assert phys["region"].get("startColumn", 1) >= 1
        assert phys["region"].get("startColumn") == (r["column"] if r["line"] else None)


def test_clean_files_in_every_format(cli, monkeypatch):
    """A clean run: empty annotations, an empty JSON list, a SARIF log with no results; exit 0."""
    repo_profiles = Path(__file__).resolve().parents[1] / "profiles"
    for fmt, empty in [("github", ""), ("json", "[]\n")]:
        code, out, err = cli("validate", "--format", fmt, str(repo_profiles / "llama.yaml"))
        assert (code, out) == (0, empty), err
        assert err.startswith("ok:")
    code, out, _ = cli("validate", "--format", "sarif", str(repo_profiles / "llama.yaml"))
    assert code == 0 and json.loads(out)["runs"][0]["results"] == []
