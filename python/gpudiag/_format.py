# SPDX-License-Identifier: Apache-2.0
"""Sizes people type (``"2 GiB"``) and numbers as reports print them. Printing is C++'s
(``gpudiag._core.format_figure``); only parsing what a user types lives here."""

from __future__ import annotations

import math
import re

from gpudiag import _core

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


def format_figure(value: float, unit: str) -> str:
    """A number as gpudiag's reports print it, by its unit: ``format_figure(2.5e6, "ns")`` is
    ``"2.5 ms"``. The formatter is C++'s (``gpudiag._core.format_figure``), the one the text and
    HTML reports use, so every rendering prints a number the same way."""
    return str(_core.format_figure(float(value), unit))


def format_bytes(value: float) -> str:
    """``1536`` -> ``"1.5 KiB"`` (C++'s formatter, as :func:`format_figure`)."""
    return format_figure(value, "bytes")
