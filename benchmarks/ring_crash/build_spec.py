"""Build test_shard_every_module's tiny checkpoints and its one-launch spec into a folder, once.

    python benchmarks/ring_crash/build_spec.py OUT_DIR      # writes OUT_DIR/spec.json and one folder per module
"""
from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests import test_shard_every_module as t  # noqa: E402  (the test's own cases, not a copy)
from omlx_profiles.live.build import build_model, save_local  # noqa: E402


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for m in t.MODULES:
        paths[m] = save_local(t._build(m), t._config(m), out / m)
    for m, make in t.WEIGHTS_ONLY.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            paths[m] = save_local(build_model(make(), "bf16"), make(), out / m)
    cases = [{"name": f"{m}-{par}", "path": str(paths[m]), "parallel": par,
              "split": list(t._split(m, par) or []) or None, "tokens": t.TOKENS, "chunk": t.CHUNK, "repeats": 1}
             for m, par in t.CASES + t._wo_cases()]
    (out / "spec.json").write_text(json.dumps({"cases": cases}))
    print(f"{len(cases)} cases -> {out / 'spec.json'}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
