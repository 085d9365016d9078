"""Calibration files are validated by a schema (omlx_profiles/schema/calibration.py), like every data file:
a mistyped key or a non-integer peak is an error naming the file, the line and the key."""
from __future__ import annotations

import pytest

from omlx_profiles.errors import OmlxProfilesError
from omlx_profiles.estimate.calibration import calibration_files, load_calibration

GOOD = "backend: cpu\ndevice: test\nmlx: 0.32.4\npoints:\n  - model: a\n    profile: llama-3.2-1b-instruct\n    tokens: 1025\n    prefill_step_size: 256\n    peak_over_baseline: [100, 120]\n"


def test_every_committed_file_loads():
    files = calibration_files()
    assert files
    for p in files:
        assert load_calibration(p).points


def test_a_good_file(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(GOOD)
    f = load_calibration(p)
    assert (f.backend, f.points[0].chunk, f.points[0].peak) == ("cpu", 256, 120)


@pytest.mark.parametrize("extra,where", [
    ("    peek_total_bytes: 5\n", "c.yaml:10: points.0.peek_total_bytes: unknown key"),
    ("    kv_bytes: lots\n", "c.yaml:10: points.0.kv_bytes"),
    ("    cached_tokens: -1\n", "c.yaml:10: points.0.cached_tokens"),
])
def test_a_bad_point_names_file_line_and_key(tmp_path, extra, where):
    p = tmp_path / "c.yaml"
    p.write_text(GOOD + extra)
    with pytest.raises(OmlxProfilesError) as e:
        load_calibration(p)
    assert where in str(e.value)


def test_a_point_without_a_peak(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(GOOD.replace("    peak_over_baseline: [100, 120]\n", ""))
    with pytest.raises(OmlxProfilesError, match="needs peak_over_baseline or peak_total_bytes"):
        load_calibration(p)
