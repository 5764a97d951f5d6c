# SPDX-License-Identifier: Apache-2.0
"""Sizes typed by people are parsed in Python; numbers are printed by C++ (one formatter)."""

from __future__ import annotations

import pytest

from gpudiag import _core, _format
from gpudiag._format import format_bytes, format_figure, parse_size


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2 GiB", 2 * 1024**3),
        ("2GiB", 2 * 1024**3),
        ("16 MiB", 16 * 1024**2),
        ("512 MB", 512 * 1000**2),
        ("1.5 G", int(1.5 * 1024**3)),
        ("100", 100),
        ("0", 0),
        ("  4 kib ", 4096),
        (4096, 4096),
        ("1 TB", 1000**4),
    ],
)
def test_parse_size_accepts_common_spellings(text: object, expected: int) -> None:
    assert parse_size(text) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", "GiB", "-1 GiB", "2 GiBs", "two", "1e3 MB", -5, True])
def test_parse_size_rejects_nonsense(bad: object) -> None:
    with pytest.raises(ValueError, match="size"):
        parse_size(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (2.5e6, "ns", "2.5 ms"),  # once "2.50 ms" here and "2.5 ms" in the text report
        (90e9, "ns", "90 s"),  # once "1.5 min"
        (3 * 3600e9, "ns", "3 h"),  # once "180.0 min"
        (0.25, "fraction", "25 %"),  # once "25.0 %"
        (1234, "count", "1234"),  # once "1,234"
        (20 * 1024**2, "bytes/step", "20.0 MiB/step"),
    ],
)
def test_python_prints_numbers_as_the_cpp_reports_do(value: float, unit: str, text: str) -> None:
    assert format_figure(value, unit) == _core.format_figure(value, unit) == text


def test_no_formatting_rule_is_left_in_python() -> None:
    assert format_bytes(1536) == _core.format_figure(1536, "bytes") == "1.5 KiB"
    assert not hasattr(_format, "format_duration_ns")
    assert not hasattr(_format, "format_value")
