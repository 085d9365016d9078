"""Human sizes and counts in and out: what users type (64GiB, 48G, 32k, 131072) and what they read."""
from __future__ import annotations

import pytest

from omlx_profiles.estimate.budget import RESERVE_FIXED, default_reserve, usable
from omlx_profiles.errors import InputError
from omlx_profiles.cli.render import table, tokens
from omlx_profiles.units import format_bytes, format_tokens, parse_size, parse_tokens


@pytest.mark.parametrize("text, value", [
    ("64GiB", 64 * 2**30), ("64gib", 64 * 2**30), ("48G", 48 * 2**30), ("48 GB", 48 * 10**9),
    ("1.5TB", 1.5 * 10**12), ("512MiB", 512 * 2**20), ("512M", 512 * 2**20), ("1073741824", 2**30),
    ("0", 0), (" 2 KiB ", 2048), ("100b", 100), (4096, 4096),
])
def test_parse_size(text, value):
    assert parse_size(text) == int(value)


@pytest.mark.parametrize("text", ["", "abc", "-1G", "1e9", "nan", "inf", "64 GiBs", "G", "1..5G", None, True, 1.5,
                                  "99999999999TB", "６４GiB", "٦٤G", "64ＧiB"])
def test_parse_size_rejects(text):
    with pytest.raises(InputError):
        parse_size(text)


@pytest.mark.parametrize("text, value", [("32k", 32768), ("32K", 32768), ("131072", 131072), ("1m", 2**20),
                                         ("0.5k", 512), ("256k", 262144), ("0", 0)])
def test_parse_tokens(text, value):
    assert parse_tokens(text) == value


@pytest.mark.parametrize("text", ["32kb", "0.3", "1.0001k", "-5", "many", "", "2g", True, "١٢٨", "１２８", "12\u00a08"])
def test_parse_tokens_rejects(text):
    with pytest.raises(InputError):
        parse_tokens(text)


def test_format_round_trips():
    assert format_bytes(64 * 2**30) == "64.00 GiB"
    assert format_bytes(512) == "512 B"
    assert format_bytes(-3 * 2**20) == "-3.00 MiB"
    assert format_bytes(None) == "unknown"
    assert parse_size(format_bytes(64 * 2**30).replace(" ", "")) == 64 * 2**30
    assert format_tokens(32768) == "32k" and format_tokens(1000) == "1000"
    assert parse_tokens(format_tokens(131072)) == 131072
    assert tokens(32768) == "32,768 (32k)" and tokens(1000) == "1,000"


def test_default_reserve():
    assert default_reserve(64 * 2**30) == RESERVE_FIXED + 64 * 2**30 * 5 // 100
    assert default_reserve(0) == 0
    assert default_reserve(100) == 100  # never more than the budget
    assert usable(64 * 2**30, 0) == 64 * 2**30
    assert usable(2**30, 2**31) == 0
    with pytest.raises(InputError):
        usable(2**30, -1)


def test_table_aligns():
    out = table([["a", "1"], None, ["long name", "12345"]], ["what", "n"], "lr")
    lines = out.splitlines()
    assert lines[0] == "  what           n"
    assert set(lines[1].strip()) == {"-"} and len(lines[1]) == len(lines[0])
    assert lines[2].endswith("    1") and lines[4] == "  long name  12345"


def test_decimal_sizes_are_exact():
    assert parse_size("16.4GB") == 16_400_000_000
    assert parse_size("0.1KiB") == 102
    assert parse_tokens("0.25k") == 256
    with pytest.raises(InputError):
        parse_size("1" * 100)
