"""Properties over generated config.json files and safetensors headers (strategies: tests/hostile/strategies.py).

* Any config: ``estimate --config`` exits 0 or 1 with a result, or 1/2 with a sentence; never a
  traceback, never the catch-all "internal error", never a raw control character, within the deadline.
* Any safetensors file: ``read_header`` returns a header whose tensors tile the data section exactly
  (sum of sizes == data bytes, no overlap, no gap) or raises ``SafetensorsError`` naming the file.
"""
from __future__ import annotations

import json
import struct

from hypothesis import HealthCheck, given, settings

from omlx_profiles.estimate.safetensors import SafetensorsError, read_header

from .hostile.harness import CONTROL, run_main
from .hostile.strategies import config_text, configs, safetensors_files

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@SETTINGS
@given(cfg=configs())
def test_any_config_is_answered_or_refused_in_a_sentence(cfg, tmp_path_factory):
    d = tmp_path_factory.mktemp("cfg")
    (d / "config.json").write_text(config_text(cfg))
    r = run_main("estimate", "--config", str(d), "--tokens", "1k")
    text = r.out + r.err
    assert "Traceback" not in text and "internal error" not in text, (cfg, r.err)
    assert CONTROL.search(text) is None, repr(text[:500])
    if r.code == 0:
        assert r.out.strip()
    else:
        assert r.code in (1, 2) and r.err.strip(), (cfg, r.code)


@SETTINGS
@given(blob=safetensors_files())
def test_any_safetensors_header_tiles_its_data_or_is_refused(blob, tmp_path_factory):
    p = tmp_path_factory.mktemp("st") / "model.safetensors"
    p.write_bytes(blob)
    try:
        h = read_header(p)
    except SafetensorsError as e:
        assert str(p) in str(e)
        return
    (n,) = struct.unpack("<Q", blob[:8])
    data_len = len(blob) - 8 - n
    assert h.nbytes == data_len  # every data byte belongs to exactly one tensor
    offs = sorted(tuple(v["data_offsets"]) for k, v in json.loads(blob[8:8 + n]).items() if k != "__metadata__")
    assert all(a[1] == b[0] for a, b in zip(offs, offs[1:]))
