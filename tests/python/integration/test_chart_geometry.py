# SPDX-License-Identifier: Apache-2.0
"""What the report's charts show, measured where headless Chromium laid the page out: no two
labels overlap, each axis is scaled to its data, a chart has one kind of x axis, the demo's
planted leak rises, a chart without data is not drawn. Every report comes from the analyzer on a
real input (the bundled demo recording, files of the corpus)."""

from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

import gpudiag
from conftest import SNAPSHOT, STARVED_TRACE, chromium_binary, corpus_file, corpus_report
from gpudiag import Report

pytestmark = pytest.mark.chromium

DEMO = Path(gpudiag.__file__).parent / "data" / "demo.gpudiag"
CPU_ONLY_TRACE = "kineto_traces/hta_cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
SNAPSHOT_WITH_ANNOTATIONS = "memory_snapshots/decomfl_memory.pickle"

# Runs in the page once it is laid out: every chart's text boxes, series points (in the chart's
# own coordinates) and the plot area and y-axis top the chart declares.
GEOMETRY_SCRIPT = """<script>
(function () {
  const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const charts = Array.from(document.querySelectorAll('svg')).map((svg) => ({
    title: svg.getAttribute('aria-label'),
    x_unit: svg.dataset.xUnit,
    y_max: parseFloat(svg.dataset.yMax),
    plot: svg.dataset.plot.split(',').map(Number),
    box: box(svg),
    texts: Array.from(svg.querySelectorAll('text')).map((t) => ({
      cls: t.getAttribute('class') || '', text: t.textContent, box: box(t),
      value: t.dataset.value === undefined ? null : parseFloat(t.dataset.value)})),
    series: Array.from(svg.querySelectorAll('polyline.series')).map((p) => {
      const points = [];
      for (let i = 0; i < p.points.numberOfItems; ++i) {
        const q = p.points.getItem(i); points.push([q.x, q.y]);
      }
      return {id: p.dataset.series, points: points};
    }),
    bars: svg.querySelectorAll('rect.bar').length,
  }));
  const out = document.createElement('pre');
  out.id = 'gpudiag-geometry';
  out.textContent = JSON.stringify(charts);
  document.body.appendChild(out);
})();
</script>"""


def laid_out_charts(report: Report, tmp_path: Path) -> list[dict[str, Any]]:
    """The charts of the report's HTML page as Chromium lays them out."""
    page = tmp_path / "report.html"
    page.write_text(
        report.to_html(full_page=True).replace("</body>", GEOMETRY_SCRIPT + "</body>"),
        encoding="utf-8",
    )
    binary = chromium_binary()
    assert binary is not None
    cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
    cmd += ["--window-size=800,1200", "--dump-dom", page.as_uri()]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    found = re.search(r'<pre id="gpudiag-geometry">(.*?)</pre>', result.stdout, re.DOTALL)
    assert found, f"the page's geometry script did not run: {result.stderr[-2000:]}"
    charts: list[dict[str, Any]] = json.loads(html.unescape(found.group(1)))
    return charts


def demo_report() -> Report:
    return gpudiag.analyze(DEMO)


def chart(charts: list[dict[str, Any]], title: str) -> dict[str, Any]:
    matching = [c for c in charts if c["title"] == title]
    assert matching, f"no chart {title!r} among {[c['title'] for c in charts]}"
    return matching[0]


def memory_series(report: Report, x_unit: str) -> dict[str, list[list[float]]]:
    memory = next(s for s in report.to_dict()["sections"] if s["id"] == "memory")
    return {
        s["id"]: s["points"]
        for s in memory["series"]
        if s["unit"] == "bytes" and s["x_unit"] == x_unit and s["points"]
    }


def plot_height(c: dict[str, Any]) -> float:
    _left, top, _right, bottom = c["plot"]
    return float(bottom - top)


def test_the_demo_leak_rises_on_a_step_axis(tmp_path: Path) -> None:
    report = demo_report()
    per_step = chart(laid_out_charts(report, tmp_path), "Device memory per step")
    assert per_step["x_unit"] == "step"
    drawn = {s["id"]: s["points"] for s in per_step["series"]}
    assert set(drawn) == set(memory_series(report, "step"))
    # The planted leak: each step's lowest level climbs (SVG y grows downwards).
    floor = drawn["step_min_allocated"]
    assert floor[0][1] - floor[-1][1] > 0.15 * plot_height(per_step), floor
    # Steps are counted: whole-number ticks, the last at most the last step.
    ticks = [t for t in per_step["texts"] if t["cls"] == "tick-x"]
    assert ticks
    assert all(re.fullmatch(r"\d+", t["text"]) for t in ticks), ticks
    last_step = max(x for points in memory_series(report, "step").values() for x, _ in points)
    assert max(t["value"] for t in ticks) <= last_step


def test_the_demo_memory_over_time_is_scaled_to_its_data(tmp_path: Path) -> None:
    report = demo_report()
    over_time = chart(laid_out_charts(report, tmp_path), "Device memory over time")
    assert over_time["x_unit"] == "s"
    timed = memory_series(report, "s")
    assert {s["id"] for s in over_time["series"]} == set(timed)  # no per-step series here
    memory = next(s for s in report.to_dict()["sections"] if s["id"] == "memory")
    peaks = [f["value"] for f in memory["figures"].values() if f["kind"] == "peak"]
    data_max = max([y for points in timed.values() for _, y in points] + peaks)
    # The axis ends just above the data, not at the device's 141 GiB.
    assert data_max <= over_time["y_max"] <= 1.25 * data_max
    capacity = memory["figures"]["capacity_bytes"]["value"]
    assert over_time["y_max"] < capacity / 10
    # The time axis spans the run (4.75 s), not the step count.
    run_end = max(x for points in timed.values() for x, _ in points)
    ticks = [t["value"] for t in over_time["texts"] if t["cls"] == "tick-x"]
    assert max(ticks) <= run_end
    labels = [t for t in over_time["texts"] if t["cls"] == "watermark-label"]
    assert labels, "the peaks are marked"


REAL_INPUTS = {
    "demo recording": demo_report,
    "torch snapshot": lambda: corpus_report(SNAPSHOT),
    "torch snapshot with annotations": lambda: corpus_report(SNAPSHOT_WITH_ANNOTATIONS),
    "kineto trace with steps": lambda: corpus_report(STARVED_TRACE),
}


def _overlap(a: list[float], b: list[float], slack: float = 0.5) -> bool:
    return (
        a[0] + slack < b[2] and b[0] + slack < a[2] and a[1] + slack < b[3] and b[1] + slack < a[3]
    )


@pytest.mark.parametrize("name", list(REAL_INPUTS))
def test_no_two_labels_of_a_chart_overlap(name: str, tmp_path: Path) -> None:
    charts = laid_out_charts(REAL_INPUTS[name](), tmp_path)
    assert charts, f"{name}: no chart drawn"
    for c in charts:
        texts = [t for t in c["texts"] if t["text"].strip()]
        for i, a in enumerate(texts):
            inside = c["box"]
            assert inside[0] - 0.5 <= a["box"][0], f"{c['title']}: {a['text']!r} leaves the chart"
            assert a["box"][2] <= inside[2] + 0.5, f"{c['title']}: {a['text']!r} leaves the chart"
            for b in texts[i + 1 :]:
                assert not _overlap(a["box"], b["box"]), (
                    f"{c['title']}: {a['text']!r} overlaps {b['text']!r}"
                )
        for axis in ("tick-x", "tick-y"):
            shown = [t["text"] for t in texts if t["cls"] == axis]
            assert len(shown) == len(set(shown)), f"{c['title']}: {axis} labels repeat: {shown}"


def test_a_host_only_trace_draws_no_empty_chart(tmp_path: Path) -> None:
    # A CPU-only profile has steps but no GPU work: no per-step GPU bars of zeros ("0 ns, 1 ns"
    # ticks), no memory chart (nothing allocated was seen).
    report = gpudiag.analyze(corpus_file(CPU_ONLY_TRACE))
    assert laid_out_charts(report, tmp_path) == []
    assert "<svg" not in report.to_html()
