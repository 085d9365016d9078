"""The README says what the CLI does: every documented command parses, every example shows today's output.

Session 6 left two README examples stale by a factor (an estimate's total, a sharded fit's length) because
nothing re-ran them; ``tools/readme_examples.py`` re-runs them (``--write`` rewrites the outputs).
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import shlex
import sys
from pathlib import Path

import pytest

from omlx_profiles.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("readme_examples", ROOT / "tools" / "readme_examples.py")
readme_examples = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("readme_examples", readme_examples)  # its dataclass looks its module up
_spec.loader.exec_module(readme_examples)

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _documented_commands() -> list[tuple[str, list[str]]]:
    """(file:line, argv) of every ``omlx-profiles ...`` line inside a fenced block of the docs."""
    out = []
    for f in DOCS:
        for m in readme_examples.FENCE.finditer(f.read_text(encoding="utf-8")):
            text = m.group(1).replace("\\\n", " ")
            line0 = m.string.count("\n", 0, m.start(1)) + 1
            for i, line in enumerate(text.splitlines()):
                c = re.match(r"^(?:\$ )?omlx-profiles (.*)$", line.strip())
                if not c:
                    continue
                argv = shlex.split(c.group(1), comments=True)
                for stop in ("|", "&&", ";"):
                    if stop in argv:
                        argv = argv[:argv.index(stop)]
                out.append((f"{f.relative_to(ROOT)}:{line0 + i}", argv))
    return out


def test_the_docs_have_commands():
    cmds = _documented_commands()
    assert len(cmds) > 15 and {"estimate", "fit", "extract", "validate"} <= {a[0] for _, a in cmds}


@pytest.mark.parametrize("where,argv", _documented_commands(), ids=lambda v: v if isinstance(v, str) else None)
def test_documented_command_parses(where, argv):
    """Every flag a documented command uses exists, with a value it accepts (argparse alone: nothing runs)."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            build_parser().parse_args(argv)
    except SystemExit as e:
        assert not e.code, f"{where}: omlx-profiles {' '.join(argv)}: {err.getvalue().strip()}"


def _help_examples() -> list[tuple[str, list[str]]]:
    """(command, argv) of every example line in ``omlx-profiles --help`` and each command's ``--help``."""
    parser = build_parser()
    subs = parser._subparsers._group_actions[0].choices  # argparse keeps the commands here
    out = []
    for name, text in [("", parser.format_help())] + [(n, p.format_help()) for n, p in subs.items()]:
        for line in text.splitlines():
            m = re.match(r"^\s+(?:\$ )?omlx-profiles (.*)$", line)
            if m:
                argv = shlex.split(m.group(1), comments=True)
                for stop in ("|", "&&", ";"):
                    if stop in argv:
                        argv = argv[:argv.index(stop)]
                out.append((name or "main", argv))
    return out


def test_help_examples_parse():
    """The examples each command's ``--help`` prints use flags that exist (the epilogs are documentation too)."""
    examples = _help_examples()
    assert len(examples) > 10
    bad = []
    for where, argv in examples:
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                build_parser().parse_args(argv)
        except SystemExit as e:
            if e.code:
                bad.append(f"{where} --help: omlx-profiles {' '.join(argv)}: {err.getvalue().strip().splitlines()[-1]}")
    assert not bad, "\n".join(bad)


def test_readme_examples_show_todays_output():
    bad = readme_examples.drift(readme_examples.README.read_text(encoding="utf-8"))
    assert not bad, ("README examples drifted from the CLI (run `python tools/readme_examples.py` for the diff, "
                     "`--write` to rewrite them, then re-read the prose around them): "
                     + "; ".join(ex.command for ex, _ in bad))


def test_the_example_check_sees_a_wrong_output():
    """The checker is not blind: a wrong shown value is drift, the right one is not; the ``jq`` tail is read."""
    cmd = "omlx-profiles estimate meta-llama/Llama-3.1-8B-Instruct --tokens 1k --budget 64GiB --json | jq '{fits}'"
    good = f"```console\n$ {cmd}\n{{\n  \"fits\": true\n}}\n```\n"
    assert readme_examples.drift(good) == []
    bad = readme_examples.drift(good.replace("true", "false"))
    assert len(bad) == 1 and bad[0][1] == ["{", '  "fits": true', "}"]


_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
_REPO_PATH = re.compile(r"`((?:omlx_profiles|profiles|schema|tests|benchmarks|docs|tools)/[^`\s*<>{}]+)`")


def _missing_paths(doc: Path, text: str) -> list[str]:
    """Relative links and backticked repository paths of ``doc`` that name no file or folder (a path written
    from inside the package, ``schema/traits.py``, is looked up under omlx_profiles/ too)."""
    out = []
    for m in _LINK.finditer(text):
        if "://" not in m.group(1) and not m.group(1).startswith("mailto:") and not (doc.parent / m.group(1)).exists():
            out.append(f"{doc.name}: link {m.group(1)}")
    for m in _REPO_PATH.finditer(text):
        p = re.sub(r"::.*$", "", m.group(1)).rstrip(".,:;")
        if not (ROOT / p).exists() and not (ROOT / "omlx_profiles" / p).exists():
            out.append(f"{doc.name}: path {p}")
    return out


def test_doc_links_and_paths_exist():
    """Every relative link and every backticked repository path in README.md and docs/*.md exists (session 8
    checked them by hand and found a stale one); the checker sees a broken one."""
    bad = [b for doc in DOCS for b in _missing_paths(doc, doc.read_text(encoding="utf-8"))]
    assert not bad, bad
    assert _missing_paths(ROOT / "README.md", "[x](docs/no-such.md) `tests/no_such_test.py`") == [
        "README.md: link docs/no-such.md", "README.md: path tests/no_such_test.py"]
