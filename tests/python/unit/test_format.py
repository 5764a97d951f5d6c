# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

import pytest

from gpudiag._format import format_bytes, format_duration_ns, format_value, parse_size


@pytest.mark.parametrize(("text", "expected"), [
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
])
def test_parse_size_accepts_common_spellings(text: object, expected: int) -> None:
    assert parse_size(text) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", "GiB", "-1 GiB", "2 GiBs", "two", "1e3 MB", -5, True])
def test_parse_size_rejects_nonsense(bad: object) -> None:
    with pytest.raises(ValueError, match="size"):
        parse_size(bad)  # type: ignore[arg-type]


def test_formatters_pick_readable_units() -> None:
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(3 * 1024**3) == "3.0 GiB"
    assert format_duration_ns(2.5e6) == "2.50 ms"
    assert format_duration_ns(750) == "750 ns"
    assert format_value(0.25, "fraction") == "25.0 %"
    assert format_value(20 * 1024**2, "bytes/step") == "20.0 MiB/step"
    assert format_value(3, "count") == "3"
