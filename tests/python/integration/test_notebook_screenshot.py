# SPDX-License-Identifier: Apache-2.0
"""The notebook HTML, rendered by headless Chromium: the screenshot must show the plots."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "unit"))
from sample_reports import full_report, without_sections

from gpudiag import Report, _svg

pytestmark = pytest.mark.chromium
Image = pytest.importorskip("PIL.Image")


def _screenshot(html: str, tmp_path: Path, name: str) -> Path:
    from conftest import chromium_binary

    page = tmp_path / f"{name}.html"
    page.write_text(html, encoding="utf-8")
    png = tmp_path / f"{name}.png"
    cmd = [chromium_binary(), "--headless", "--no-sandbox", "--disable-gpu",
           "--disable-dev-shm-usage", "--hide-scrollbars", "--force-device-scale-factor=1",
           f"--screenshot={png}", "--window-size=800,1600", page.as_uri()]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert png.exists(), f"chromium wrote no screenshot: {result.stderr[-2000:]}"
    return png


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    h = hex_colour.lstrip("#")
    return int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)


def _colour_counts(img, colours: dict[str, str], tolerance: int = 40
                   ) -> dict[str, tuple[int, tuple[int, int, int, int]]]:
    """For each named colour: pixels within `tolerance` (L1 in RGB) and their bounding box."""
    targets = {name: _rgb(c) for name, c in colours.items()}
    found = {name: [0, img.width, img.height, -1, -1] for name in colours}
    width = img.width
    data = img.tobytes()  # RGB bytes, row by row (getdata() is deprecated in Pillow 12)
    for i in range(len(data) // 3):
        r, g, b = data[3 * i], data[3 * i + 1], data[3 * i + 2]
        if r > 235 and g > 235 and b > 235:
            continue  # background: most of the page
        for name, (r0, g0, b0) in targets.items():
            if abs(r - r0) + abs(g - g0) + abs(b - b0) <= tolerance:
                x, y = i % width, i // width
                f = found[name]
                f[0] += 1
                f[1], f[2] = min(f[1], x), min(f[2], y)
                f[3], f[4] = max(f[3], x), max(f[4], y)
    return {name: (f[0], (f[1], f[2], f[3], f[4])) for name, f in found.items()}


PLOT_COLOURS = {
    "allocated": _svg.SERIES_COLOURS[0],
    "reserved": _svg.SERIES_COLOURS[1],
    "watermark": _svg.WATERMARK_COLOUR,
    "busy": _svg.BUSY_COLOUR,
    "input_wait": _svg.cause_colour("input wait"),
}


def test_screenshot_shows_memory_and_step_plots(tmp_path: Path) -> None:
    html = Report(full_report()).to_html(full_page=True)
    img = Image.open(_screenshot(html, tmp_path, "report")).convert("RGB")
    seen = _colour_counts(img, PLOT_COLOURS)
    assert seen["allocated"][0] > 400, "memory line (allocated) not visible"
    assert seen["reserved"][0] > 400, "memory line (reserved) not visible"
    assert seen["watermark"][0] > 100, "watermark not visible"
    assert seen["busy"][0] > 5000, "per-step bars (busy) not visible"
    assert seen["input_wait"][0] > 3000, "per-step bars (input wait) not visible"
    box_line, box_bars = seen["allocated"][1], seen["busy"][1]
    assert box_line[2] - box_line[0] > 400  # the memory line spans the plot's width
    assert box_line[3] - box_line[1] > 80   # and climbs (the sample memory grows)
    assert box_bars[1] > box_line[3]        # the step bars sit below the memory plot


def test_screenshot_without_plot_sections_has_no_plot_colours(tmp_path: Path) -> None:
    bare = without_sections(full_report(), "memory", "timeline")
    img = Image.open(_screenshot(Report(bare).to_html(full_page=True), tmp_path, "bare"))
    seen = _colour_counts(img.convert("RGB"), PLOT_COLOURS)
    assert seen["busy"][0] == 0
    assert seen["input_wait"][0] == 0
    assert seen["allocated"][0] < 20
    assert seen["reserved"][0] < 20
