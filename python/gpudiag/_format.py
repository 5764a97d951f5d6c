# SPDX-License-Identifier: Apache-2.0
"""Small formatting and parsing helpers shared by the renderers, the CLI and the pytest plugin."""

from __future__ import annotations

import math
import re

_BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")

# Decimal and binary size suffixes, case-insensitive ("2 GiB", "512mb", "1.5 G", "100").
_SIZE_FACTORS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1000,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1000**3,
    "gib": 1024**3,
    "t": 1024**4,
    "tb": 1000**4,
    "tib": 1024**4,
}
_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str | float) -> int:
    """Parses a byte size such as ``"2 GiB"``, ``"512 MB"``, ``"16MiB"`` or ``4096``.

    Binary suffixes (KiB, MiB, GiB, TiB) and bare K/M/G/T are powers of 1024; KB, MB, GB, TB are
    powers of 1000, as their SI names say.

    Raises:
        ValueError: for text that is not a non-negative size.
    """
    if isinstance(text, bool):  # the contract is ValueError for anything that is not a size
        raise ValueError(f"not a size: {text!r}")  # noqa: TRY004
    if isinstance(text, (int, float)):
        if text < 0 or not math.isfinite(text):
            raise ValueError(f"a size must be a non-negative number, not {text!r}")
        return int(text)
    match = _SIZE_RE.match(str(text))
    if not match:
        raise ValueError(f"not a size: {text!r} (expected e.g. '2 GiB', '512 MB', '16MiB')")
    number, suffix = match.groups()
    factor = _SIZE_FACTORS.get(suffix.lower())
    if factor is None:
        raise ValueError(f"unknown size unit {suffix!r} in {text!r} (use B, KiB, MiB, GiB, TiB)")
    return int(float(number) * factor)


def format_bytes(value: float) -> str:
    """``1536`` -> ``"1.5 KiB"``."""
    sign = "-" if value < 0 else ""
    v = abs(float(value))
    for unit in _BINARY_UNITS:
        if v < 1024 or unit == _BINARY_UNITS[-1]:
            return f"{sign}{v:.0f} {unit}" if unit == "B" else f"{sign}{v:.1f} {unit}"
        v /= 1024
    return f"{sign}{v:.1f} PiB"  # pragma: no cover


def format_duration_ns(value: float) -> str:
    """``2.5e6`` -> ``"2.50 ms"``."""
    v = float(value)
    a = abs(v)
    if a >= 60e9:
        return f"{v / 60e9:.1f} min"
    if a >= 1e9:
        return f"{v / 1e9:.2f} s"
    if a >= 1e6:
        return f"{v / 1e6:.2f} ms"
    if a >= 1e3:
        return f"{v / 1e3:.1f} us"
    return f"{v:.0f} ns"


def format_value(value: float, unit: str) -> str:
    """Formats a report figure by its unit, as the C++ text renderer does."""
    if unit == "bytes":
        return format_bytes(value)
    if unit == "ns":
        return format_duration_ns(value)
    if unit == "us":
        return format_duration_ns(value * 1e3)
    if unit == "s":
        return format_duration_ns(value * 1e9)
    if unit == "fraction":
        return f"{value * 100:.1f} %"
    if unit == "percent":
        return f"{value:.1f} %"
    if unit in ("bytes/step", "bytes/hour", "bytes/s"):
        return format_bytes(value) + unit[len("bytes") :]
    if unit == "count":
        return f"{value:,.0f}"
    if not unit:
        return f"{value:.3g}"
    return f"{value:.2f} {unit}"
