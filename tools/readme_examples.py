"""Re-run the command-line examples README.md shows with their output, and compare or rewrite that output.

    python tools/readme_examples.py           # exit 1 and a diff when an example's output drifted
    python tools/readme_examples.py --write   # rewrite the outputs in README.md from today's CLI

Why: the README's examples are what a newcomer copies first; session 6 left two of them stale by a factor
(an estimate quoted 20.16 GiB where the CLI said 29.31, a sharded fit 17,152 tokens where it said 768)
because nothing re-ran them. ``tests/test_readme.py`` runs the check.

An example is a fenced block whose first line is ``$ omlx-profiles ...``: each ``$`` line (``\\``
continuations joined) is run, and the lines up to the next ``$`` line are its output. A ``| jq '{a, b}'``
tail keeps those keys of the JSON, indented by 2 as jq prints them. Blocks that need the network (``--hub``,
``--revision``), draw a PNG (``chart``) or show no output are skipped (``examples`` returns which and why). Prose numbers next to an example are not checked.
"""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", re.S | re.M)
JQ_KEYS = re.compile(r"\|\s*jq\s+'\{([^}]*)\}'\s*$")


@dataclass
class Example:
    command: str  # as written (continuations joined), without the "$ "
    shown: list[str]  # the output lines the README shows
    start: int  # character offsets of the shown output in README.md
    end: int


def _skip_reason(block: str) -> str | None:
    if "--hub" in block or "--revision" in block:
        return "reads the Hugging Face Hub"
    if re.search(r"^\$ omlx-profiles chart\b", block, re.M):
        return "draws a PNG"
    return None


def examples(text: str) -> tuple[list[Example], list[tuple[str, str]]]:
    """The README's runnable examples, and (first command line, why) of the example blocks skipped."""
    out: list[Example] = []
    skipped: list[tuple[str, str]] = []
    for m in FENCE.finditer(text):
        block = m.group(1)
        if not block.startswith("$ omlx-profiles "):
            continue
        why = _skip_reason(block)
        if why:
            skipped.append((block.splitlines()[0], why))
            continue
        lines = block.splitlines(keepends=True)
        pos = m.start(1)
        i = 0
        while i < len(lines):
            cmd = lines[i][2:].rstrip("\n")
            pos += len(lines[i])
            i += 1
            while cmd.endswith("\\") and i < len(lines):
                cmd = cmd[:-1].rstrip() + " " + lines[i].strip()
                pos += len(lines[i])
                i += 1
            start = pos
            shown = []
            while i < len(lines) and not lines[i].startswith("$ "):
                shown.append(lines[i].rstrip("\n"))
                pos += len(lines[i])
                i += 1
            while shown and not shown[-1].strip():  # the blank line before the next command
                shown.pop()
            if not shown:
                skipped.append((f"$ {cmd}", "shows no output"))
                continue
            out.append(Example(cmd, shown, start, start + sum(len(s) + 1 for s in shown)))
    return out, skipped


def run(command: str) -> list[str]:
    """The CLI's stdout for ``command`` (``omlx-profiles ...``, an optional ``| jq '{keys}'`` tail)."""
    jq = JQ_KEYS.search(command)
    argv = shlex.split(command[:jq.start()] if jq else command)
    if argv[0] != "omlx-profiles":
        raise ValueError(f"not an omlx-profiles command: {command}")
    r = subprocess.run([sys.executable, "-m", "omlx_profiles.cli.main", *argv[1:]], capture_output=True,
                       text=True, cwd=ROOT, timeout=300)
    if r.stderr.strip() and r.returncode not in (0, 1):
        raise RuntimeError(f"{command}: exit {r.returncode}: {r.stderr.strip()[-500:]}")
    stdout = r.stdout
    if jq:
        data = json.loads(stdout)
        keys = [k.strip() for k in jq.group(1).split(",")]
        stdout = json.dumps({k: data.get(k) for k in keys}, indent=2) + "\n"
    return stdout.rstrip("\n").splitlines()


def drift(text: str) -> list[tuple[Example, list[str]]]:
    """(example, today's output) for every example whose shown output differs."""
    found, _ = examples(text)
    return [(ex, now) for ex in found for now in [run(ex.command)] if now != ex.shown]


def main(argv: list[str]) -> int:
    import difflib

    text = README.read_text(encoding="utf-8")
    bad = drift(text)
    if "--write" in argv:
        for ex, now in sorted(bad, key=lambda b: -b[0].start):
            text = text[:ex.start] + "".join(line + "\n" for line in now) + text[ex.end:]
        README.write_text(text, encoding="utf-8")
        print(f"rewrote {len(bad)} example output(s) in {README}")
        return 0
    for ex, now in bad:
        print(f"$ {ex.command}")
        print("\n".join(difflib.unified_diff(ex.shown, now, "README.md", "now", lineterm="", n=1)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
