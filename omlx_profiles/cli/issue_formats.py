"""``validate --format``: the same issues for a terminal, a GitHub workflow, a script or code scanning.

* ``text``: ``file:line: field: sentence`` on stderr (terminal escaping in ``Issue.__str__``).
* ``github``: workflow commands, ``::error file=F,line=L,col=C,title=...::field: sentence``, one per
  line on stdout; GitHub shows them as annotations on the pull request's diff.
* ``json``: a list of ``{file, line, column, field, message, severity}`` on stdout.
* ``sarif``: a SARIF 2.1.0 log on stdout, for ``github/codeql-action/upload-sarif``.

Every issue is an error today (registry *notes*, such as a user variant taking over a built-in id, are
not issues and are not reported). The column is that of the field's key on the issue's line, found in
the file's text; it is left out when the line does not show the key (a missing field, a flow list
item, a file-level problem) rather than guessed.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import quote

from ..errors import Issue, _printable
from ..registry.paths import data_file_kind

FORMATS = ("text", "github", "json", "sarif")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
TOOL = "omlx-profiles"

# SARIF rules: one per kind of data file, so code scanning groups the alerts by what was checked
RULES = {
    "family": ("OMLX-FAMILY", "Invalid model family profile",
               "A family file breaks the profile schema, inheritance, completeness or id uniqueness."),
    "kernels": ("OMLX-KERNELS", "Invalid kernel-route table",
                "A kernels/<backend>.yaml file breaks the kernel-route schema."),
    "calibration": ("OMLX-CALIBRATION", "Invalid calibration file",
                    "A calibration/<backend>/*.yaml file breaks the measured-peak schema."),
    "module": ("OMLX-MODULE", "Invalid mlx-lm module recipe", "A mlx_lm/*.yaml file is not valid YAML data."),
    "sharding": ("OMLX-SHARDING", "Invalid sharding plan", "mlx_lm/sharding.yaml breaks the sharding-plan schema."),
    "naming": ("OMLX-NAMING", "Invalid naming table", "A naming/*.yaml file breaks the naming-table schema."),
    "derived": ("OMLX-DERIVED", "Invalid derived table", "A calibration/*.yaml table is not valid YAML data."),
}


def records(issues: list[Issue]) -> list[dict]:
    """Issues as plain dicts (the ``json`` format), with the column where the file shows it."""
    texts: dict[str, list[str] | None] = {}
    out = []
    for i in issues:
        out.append({"file": i.file, "line": i.line, "column": _column(i, texts), "field": i.path,
                    "message": i.message, "severity": "error"})
    return out


def _column(issue: Issue, texts: dict) -> int | None:
    if not issue.line or not issue.path:
        return None
    if issue.file not in texts:
        try:
            from ..registry.yaml_safe import read_text  # size-limited, regular files only

            texts[issue.file] = read_text(Path(issue.file)).splitlines()
        except Exception:  # noqa: BLE001 - a column is a nicety: never let it hide the issue
            texts[issue.file] = None
    lines = texts[issue.file]
    if lines is None or issue.line > len(lines):
        return None
    text = lines[issue.line - 1]
    last = issue.path.rsplit(".", 1)[-1]
    if last.isdigit():  # a block-list item: the column of its dash
        m = re.match(r"\s*-(\s|$)", text)
        return m.end() - len(m.group(1)) if m else None
    m = re.search(rf"(?<![\w.-])([\"']?){re.escape(last)}\1\s*:", text)
    return m.start() + 1 if m else None


def _gh_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(s: str) -> str:
    return _gh_data(s).replace(":", "%3A").replace(",", "%2C")


def github(recs: list[dict]) -> str:
    """GitHub workflow commands (``::error ...::message``), one line per issue."""
    lines = []
    for r in recs:
        props = [f"file={_gh_prop(_printable(r['file']))}"]
        if r["line"]:
            props.append(f"line={r['line']}")
            if r["column"]:
                props.append(f"col={r['column']}")
        props.append(f"title={_gh_prop(TOOL + ' validate')}")
        msg = f"{r['field']}: {r['message']}" if r["field"] else r["message"]
        lines.append(f"::error {','.join(props)}::{_gh_data(_printable(msg))}")
    return "".join(line + "\n" for line in lines)


def as_json(recs: list[dict]) -> str:
    return json.dumps(recs, indent=2, ensure_ascii=False) + "\n"


def _uri(file: str) -> str:
    p = Path(file)
    if p.is_absolute():
        return p.as_uri()
    return quote(p.as_posix(), safe="/-._~")


def sarif(recs: list[dict], version: str) -> str:
    """A SARIF 2.1.0 log with one run. GitHub needs a line for every result: a problem of a whole file
    (or of a path that does not exist) points at line 1."""
    kinds = [k for k in RULES if any(data_file_kind(Path(r["file"])) == k for r in recs)]
    index = {k: i for i, k in enumerate(kinds)}
    results = []
    for r in recs:
        kind = data_file_kind(Path(r["file"]))
        region = {"startLine": r["line"] or 1}
        if r["line"] and r["column"]:
            region["startColumn"] = r["column"]
        msg = f"{r['field']}: {r['message']}" if r["field"] else r["message"]
        results.append({
            "ruleId": RULES[kind][0], "ruleIndex": index[kind], "level": "error", "message": {"text": msg},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(r["file"])}, "region": region}}],
        })
    rules = [{"id": RULES[k][0], "name": RULES[k][1].title().replace(" ", "").replace("-", ""),
              "shortDescription": {"text": RULES[k][1]}, "fullDescription": {"text": RULES[k][2]},
              "defaultConfiguration": {"level": "error"}} for k in kinds]
    log = {"$schema": SARIF_SCHEMA, "version": "2.1.0",
           "runs": [{"tool": {"driver": {"name": TOOL, "version": version, "rules": rules}}, "results": results}]}
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"
