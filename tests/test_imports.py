"""The registry, resolver and estimator must not import mlx, mlx_lm, transformers or matplotlib."""
from __future__ import annotations

import subprocess
import sys

HEAVY = ("mlx", "mlx_lm", "transformers", "matplotlib")

CODE = """
import sys, omlx_profiles
reg = omlx_profiles.load_registry()
res = reg.resolve('meta-llama/Llama-3.1-8B-Instruct')
omlx_profiles.Estimator(res.profile).kv_bytes(32768)
from omlx_profiles.cli.main import main
main(['estimate', 'meta-llama/Llama-3.1-8B-Instruct', '--tokens', '32k', '--json'])
print('LOADED', sorted(m for m in sys.modules if m.split('.')[0] in %r))
""" % (HEAVY,)


def test_no_heavy_imports():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "LOADED []"


def test_importtime_shows_no_mlx():
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", "import omlx_profiles; omlx_profiles.load_registry()"],
                       capture_output=True, text=True, check=True)
    mods = [line.split("|")[-1].strip() for line in r.stderr.splitlines() if "|" in line]
    assert not [m for m in mods if m.split(".")[0] in HEAVY]
