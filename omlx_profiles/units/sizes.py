"""Human sizes and counts, in and out: ``64GiB``, ``48G``, ``1.5 TB``, ``32k``, ``131072``.

Sizes: binary units (KiB, MiB, GiB, TiB) are powers of 1024; decimal units (KB, MB, GB, TB) powers of
1000; a bare ``G``/``M``/``K`` is taken as binary, the way memory is sold and reported on a Mac.
Token counts: ``k`` = 1024 (``32k`` = 32768, as context lengths are quoted), ``m`` = 1024**2.
"""
from __future__ import annotations

import re
from decimal import Decimal

from ..errors import InputError

# ASCII only: \d would also match Arabic-Indic or full-width digits, which float() then accepts.
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$", re.ASCII)
_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 1024, "kib": 1024, "kb": 1000,
    "m": 1024**2, "mib": 1024**2, "mb": 1000**2,
    "g": 1024**3, "gib": 1024**3, "gb": 1000**3,
    "t": 1024**4, "tib": 1024**4, "tb": 1000**4,
    "p": 1024**5, "pib": 1024**5, "pb": 1000**5,  # the limit (MAX_BYTES) is 1 PiB: it can be written as such
}
_TOKEN_UNITS = {"": 1, "k": 1024, "m": 1024**2}
MAX_BYTES = 1 << 50
MAX_TOKENS = 1 << 30


def _number(digits: str, text: object, what: str) -> Decimal:
    """The decimal number exactly as written: ``16.4GB`` is 16,400,000,000 bytes, not 16,399,999,999
    (``float('16.4') * 1e9``)."""
    if len(digits) > 40:
        raise InputError(f"{what}: {str(text)[:60]!r} is out of range")
    return Decimal(digits)


def parse_size(text: object, what: str = "size") -> int:
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        raise InputError(f"{what} must be a size such as 64GiB, got {text!r}")
    m = _SIZE_RE.match(str(text))
    if not m or m.group(2).lower() not in _SIZE_UNITS:
        raise InputError(f"{what}: cannot read {text!r} as a size (examples: 64GiB, 48G, 512MB, 1073741824)")
    value = _number(m.group(1), text, what) * _SIZE_UNITS[m.group(2).lower()]
    if value > MAX_BYTES:
        raise InputError(f"{what}: {text!r} is out of range")
    return int(value)  # whole bytes (a fraction of a byte rounds down)


def parse_tokens(text: object, what: str = "tokens") -> int:
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        raise InputError(f"{what} must be a token count such as 32k or 8192, got {text!r}")
    m = _SIZE_RE.match(str(text))
    if not m or m.group(2).lower() not in _TOKEN_UNITS:
        raise InputError(f"{what}: cannot read {text!r} as a token count (examples: 32k, 8192, 1m)")
    value = _number(m.group(1), text, what) * _TOKEN_UNITS[m.group(2).lower()]
    if value != int(value):
        raise InputError(f"{what}: {text!r} is not a whole number of tokens")
    if value > MAX_TOKENS:
        raise InputError(f"{what}: {text!r} is out of range (at most {MAX_TOKENS})")
    return int(value)


def format_bytes(n: int | float | None) -> str:
    if n is None:
        return "unknown"
    n = float(n)
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{sign}{n:.0f} {unit}" if unit == "B" else f"{sign}{n:.2f} {unit}"
        n /= 1024
    return f"{sign}{n:.2f} PiB"  # pragma: no cover


def format_tokens(n: int) -> str:
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)
