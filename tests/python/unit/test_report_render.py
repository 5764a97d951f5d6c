# SPDX-License-Identifier: Apache-2.0
"""Report wrapper and HTML/SVG rendering from report documents."""

from __future__ import annotations

import json
import re

import pytest
from sample_reports import empty_report, full_report, without_sections

from gpudiag import Report, _svg
from gpudiag._html import memory_chart, step_chart, step_starts


def test_findings_and_figures_read_from_the_document() -> None:
    r = Report(full_report())
    assert [f.id for f in r.findings] == ["input_bound", "memory_leak"]
    f = r.finding("input_bound")
    assert f is not None
    assert f.severity == "critical"
    assert f.figure("input_wait_share") == pytest.approx(0.4)
    assert f.at_least("warning")
    assert r.figure("memory", "peak_allocated") == 8 * 1024**3
    assert r.figure("memory", "absent") is None
    assert r.worst_severity() == "critical"
    assert Report(empty_report()).worst_severity() is None


def test_summary_is_the_cpp_text_rendering() -> None:
    text = Report(full_report()).summary()
    assert "Input-bound: 40 % of step time waiting" in text
    assert "[CRITICAL]" in text
    assert "Use DataLoader(num_workers=8)" in text


def test_json_round_trips_through_the_native_report() -> None:
    original = full_report()
    r = Report(original)
    again = json.loads(__import__("gpudiag")._core.render_json(r.native()))
    for key in ("findings", "sections", "notes", "capture"):
        assert again[key] == json.loads(json.dumps(original[key])), key
    assert again["source"]["devices"] == original["source"]["devices"]
    assert Report.from_json(r.to_json()).to_dict() == original


def test_to_dict_is_a_copy() -> None:
    r = Report(full_report())
    d = r.to_dict()
    d["findings"].clear()
    assert len(r.findings) == 2


def test_save_picks_the_format_by_suffix(tmp_path) -> None:
    r = Report(full_report())
    assert json.loads(r.save(tmp_path / "r.json").read_text())["findings"]
    assert r.save(tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert "[CRITICAL]" in r.save(tmp_path / "r.txt").read_text()
    assert Report.load(tmp_path / "r.json").to_dict() == r.to_dict()


def test_html_is_self_contained_and_escaped() -> None:
    html = Report(full_report())._repr_html_()
    assert "<script" not in html.lower()
    assert not re.search(r"(src|href)\s*=\s*[\"']?https?:", html)
    assert "@import" not in html
    assert "train.py &lt;b&gt;" in html  # the description is escaped
    assert html.count("<svg") == 2


def test_memory_chart_has_series_watermarks_and_step_marks() -> None:
    svg = memory_chart(full_report())
    assert svg.count('class="series"') == 2
    assert _svg.SERIES_COLOURS[0] in svg
    assert _svg.SERIES_COLOURS[1] in svg
    assert 'class="watermark"' in svg
    assert "peak allocated" in svg
    assert svg.count('class="step-mark"') == 30
    assert "GiB" in svg  # byte-formatted axis


def test_step_chart_stacks_time_components_by_cause() -> None:
    svg = step_chart(full_report())
    assert svg.count('class="bar"') == 30 * 3
    assert _svg.BUSY_COLOUR in svg
    assert _svg.cause_colour("input wait") in svg
    assert "busy" in svg
    assert "input wait" in svg


def test_step_starts_come_from_the_step_table() -> None:
    starts = step_starts(full_report())
    assert starts[:3] == pytest.approx([0.0, 0.1, 0.2])


def test_rendering_degrades_gracefully_without_sections() -> None:
    no_memory = without_sections(full_report(), "memory")
    assert memory_chart(no_memory) == ""
    assert step_chart(no_memory) != ""
    bare = without_sections(full_report(), "memory", "timeline")
    html = Report(bare).to_html()
    assert "<svg" not in html
    assert "Input-bound" in html
    assert "No problems found" in Report(empty_report()).to_html()


def test_decimation_bounds_points_and_keeps_spikes() -> None:
    points = [(float(i), 1.0) for i in range(100_000)]
    points[54_321] = (54_321.0, 99.0)
    out = _svg.decimate(points, limit=600)
    assert len(out) <= 600
    assert max(y for _, y in out) == 99.0


def test_many_steps_are_capped() -> None:
    svg = _svg.stacked_bars([str(i) for i in range(1000)], [("busy", [1.0] * 1000)],
                            title="t", y_fmt=str)
    assert svg.count('class="bar"') == _svg.MAX_BARS


def test_nice_byte_ticks_are_round() -> None:
    ticks = _svg.nice_byte_ticks(9.5 * 1024**3)
    assert all(t % (1024**3 // 2) == 0 for t in ticks)


def test_timeline_step_table_stacks_busy_and_idle_causes() -> None:
    report = full_report()
    report["sections"][1]["tables"] = [{
        "id": "steps", "title": "Per step",
        "columns": ["step", "start_s", "duration_ns", "gpu_busy_ns", "gpu_idle_ns",
                    "host_wait_ns", "input_wait_ns", "compute_ns", "communication_ns",
                    "memory_ns", "sync_calls"],
        "rows": [[0, 0.0, 100e6, 60e6, 40e6, 30e6, 25e6, 50e6, 5e6, 5e6, 2],
                 [1, 0.1, 100e6, 90e6, 10e6, 2e6, 50e6, 80e6, 5e6, 5e6, 2]]}]
    svg = step_chart(report)
    # busy, input wait, host wait, other for step 0; step 1's input wait is capped by its idle
    assert "0 busy: 60.00 ms" in svg
    assert "0 idle: input wait: 25.00 ms" in svg
    assert "0 idle: host wait: 5.00 ms" in svg
    assert "0 idle: other: 10.00 ms" in svg
    assert "1 idle: input wait: 2.00 ms" in svg
    assert "compute" not in svg  # a part of busy: stacking it would count busy twice
