# SPDX-License-Identifier: Apache-2.0
"""The notebook HTML, rendered by headless Chromium: the screenshot must show the plots."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpudiag import Report
from gpudiag.reporters import svg
from gpudiag.reporters.html import memory_chart

pytestmark = pytest.mark.chromium
Image = pytest.importorskip("PIL.Image")


def _screenshot(html: str, tmp_path: Path, name: str, height: int = 1600) -> Path:
    from conftest import chromium_binary

    page = tmp_path / f"{name}.html"
    page.write_text(html, encoding="utf-8")
    png = tmp_path / f"{name}.png"
    cmd = [
        chromium_binary(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        f"--screenshot={png}",
        f"--window-size=800,{height}",
        page.as_uri(),
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert png.exists(), f"chromium wrote no screenshot: {result.stderr[-2000:]}"
    return png


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    h = hex_colour.lstrip("#")
    return int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)


def _colour_counts(
    img, colours: dict[str, str], tolerance: int = 40
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
    "allocated": svg.SERIES_COLOURS[0],
    "reserved": svg.SERIES_COLOURS[1],
    "busy": svg.STACK_COLOURS[0],  # the timeline's partition lists GPU busy first
    "input_wait": svg.STACK_COLOURS[1],  # and the idle time spent waiting for input second
}


def _page(*charts: str) -> str:
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>'
        + "".join(charts)
        + "</body></html>"
    )


def test_screenshot_shows_the_step_bars(tmp_path: Path, starved_report: Report) -> None:
    # The starvation case: per-step bars, GPU busy and idle waiting for input, on the full page
    # (a tall window: the findings and the memory charts come first).
    img = Image.open(
        _screenshot(starved_report.to_html(full_page=True), tmp_path, "steps", height=4000)
    )
    seen = _colour_counts(img.convert("RGB"), PLOT_COLOURS)
    assert seen["busy"][0] > 2000, "per-step bars (busy) not visible"
    assert seen["input_wait"][0] > 2000, "per-step bars (input wait) not visible"


def test_screenshot_shows_memory_over_time(tmp_path: Path, snapshot_report: Report) -> None:
    # The chart alone: finding borders share colours with the memory lines.
    chart = memory_chart(snapshot_report.native())
    assert chart
    img = Image.open(_screenshot(_page(chart), tmp_path, "memory")).convert("RGB")
    seen = _colour_counts(img, PLOT_COLOURS)
    for line in ("allocated", "reserved"):
        count, (x0, _y0, x1, _y1) = seen[line]
        assert count > 200, f"memory line ({line}) not visible"
        assert x1 - x0 > 400, f"memory line ({line}) does not span the plot"
    assert seen["busy"][0] == 0
    assert seen["input_wait"][0] == 0


def test_screenshot_without_plot_sections_has_no_bars(
    tmp_path: Path, starved_report: Report
) -> None:
    bare = starved_report.to_dict()
    bare["sections"] = [s for s in bare["sections"] if s["id"] not in ("memory", "timeline")]
    html = Report(bare).to_html(full_page=True)
    assert "<svg" not in html
    img = Image.open(_screenshot(html, tmp_path, "bare"))
    seen = _colour_counts(img.convert("RGB"), PLOT_COLOURS)
    assert seen["busy"][0] == 0
    assert seen["input_wait"][0] == 0
