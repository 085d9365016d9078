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
        f = load_calibration(p)
        assert f.points or f.sharded_points


def test_a_good_file(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(GOOD)
    f = load_calibration(p)
    assert (f.backend, f.points[0].chunk, f.points[0].peak) == ("cpu", 256, 120)


def test_a_rank_point_is_kept_apart(tmp_path):
    """A point measured on one rank of a sharded model is never read as a whole-model point."""
    p = tmp_path / "c.yaml"
    p.write_text(GOOD + "  - model: b\n    profile: llama-3.2-1b-instruct\n    tokens: 1025\n    prefill_step_size: 256\n"
                 "    peak_over_baseline: [50]\n    ranks: 2\n    rank: 1\n    parallel: tensor\n")
    f = load_calibration(p)
    assert [q.model for q in f.points] == ["a"]
    assert [(q.model, q.shard["ranks"], q.shard["rank"], q.shard["parallel"]) for q in f.sharded_points] == \
        [("b", 2, 1, "tensor")]


@pytest.mark.parametrize("shard,msg", [
    ("    ranks: 2\n", "needs ranks, rank and parallel together"),
    ("    ranks: 2\n    rank: 2\n    parallel: tensor\n", "rank 2 is not in a group of 2"),
    ("    ranks: 2\n    rank: 0\n    parallel: tensor\n    split: [1, 1]\n", "split is for parallel: pipeline"),
])
def test_a_bad_rank_point(tmp_path, shard, msg):
    p = tmp_path / "c.yaml"
    p.write_text(GOOD + shard)
    with pytest.raises(OmlxProfilesError, match=msg):
        load_calibration(p)


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
