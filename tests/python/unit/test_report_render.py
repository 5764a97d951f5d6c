# SPDX-License-Identifier: Apache-2.0
"""The Report wrapper and the HTML/SVG rendering, on reports the analyses make of corpus files.
Python reads reports through C++ (parse_report_json) and prints numbers with C++'s formatter."""

from __future__ import annotations

import json
import re
from html import escape

import pytest

import gpudiag
from gpudiag import Finding, Report, _core
from gpudiag.reporters import svg as charts
from gpudiag.reporters.html import memory_chart, memory_charts, partition_charts, step_chart


def test_findings_and_figures_read_from_the_report(starved_report: Report) -> None:
    r = starved_report
    f = r.finding("input_bound")
    assert f is not None, [x.id for x in r.findings]
    assert f.at_least("info")
    native = next(x for x in r.native().findings if x.id == "input_bound")
    assert native.figures
    for fig in native.figures:
        assert f.figure(fig.key) == pytest.approx(fig.value, nan_ok=True)
        assert f.figures[fig.key]["unit"] == fig.unit
    assert f.figure("absent") is None
    native_timeline = next(s for s in r.native().sections if s.id == "timeline")
    for fig in native_timeline.figures:
        assert r.figure("timeline", fig.key) == pytest.approx(fig.value, nan_ok=True)
    assert r.figure("timeline", "absent") is None
    assert r.worst_severity() == max(
        (x.severity for x in r.findings), key=lambda s: int(getattr(_core.Severity, s))
    )
    with pytest.raises(ValueError, match="severity"):
        f.at_least("dire")


def test_the_wrappers_read_the_native_report(job_report: Report, starved_report: Report) -> None:
    # Report and Finding wrap the C++ objects (no copy); a finding alone, or read from its JSON,
    # says what the report's JSON document says of it.
    native = job_report.native()
    assert Report(native).native() is native
    assert [r.native().source.rank for r in job_report.ranks] == [0, 1]
    checked = 0
    for report in (starved_report, job_report, *job_report.ranks):
        for finding, data in zip(report.findings, report.to_dict()["findings"]):
            assert finding.to_dict() == data
            assert Finding(finding.native()).to_dict() == data
            assert Finding(data).to_dict() == data
            checked += 1
    assert checked >= 3
    assert job_report.worst_severity() == max(
        (f.severity for f in job_report.all_findings()),
        key=lambda s: int(_core.Severity.__members__[s]),
    )


def test_summary_is_the_cpp_text_rendering(starved_report: Report) -> None:
    assert starved_report.summary() == _core.render_text(starved_report.native())


def test_json_round_trips_through_cpp(starved_report: Report, job_report: Report) -> None:
    for r in (starved_report, job_report):
        text = r.to_json()
        assert Report.from_json(text).to_json() == text
        assert Report(r.to_dict()).to_json() == text
        compact = r.to_json(compact=True)
        assert "\n" not in compact
        assert json.loads(compact) == json.loads(text) == r.to_dict()
    assert [x.source["rank"] for x in job_report.ranks] == [0, 1]


def test_what_is_not_a_report_is_refused_saying_where() -> None:
    with pytest.raises(gpudiag.CorruptDataError, match="not a gpudiag report"):
        Report.from_json('{"traceEvents": []}')
    with pytest.raises(gpudiag.CorruptDataError, match=r"report.findings\[0\].title"):
        Report({"schema_version": 1, "findings": [{"id": "x", "title": 3}]})
    with pytest.raises(TypeError):
        Report([])  # type: ignore[arg-type]


def test_to_dict_is_a_copy(starved_report: Report) -> None:
    d = starved_report.to_dict()
    d["findings"].clear()
    assert starved_report.findings


def test_save_picks_the_format_by_suffix(tmp_path, snapshot_report: Report) -> None:
    r = snapshot_report
    assert json.loads(r.save(tmp_path / "r.json").read_text())["sections"]
    assert r.save(tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert r.save(tmp_path / "r.txt").read_text() == r.summary()
    assert Report.load(tmp_path / "r.json").to_dict() == r.to_dict()
    assert gpudiag.detect_format(tmp_path / "r.json") == "report_json"
    assert gpudiag.analyze(tmp_path / "r.json").to_dict() == r.to_dict()


def test_html_is_self_contained_and_escaped(starved_report: Report) -> None:
    native = Report.from_json(starved_report.to_json()).native()
    native.source.description = "train.py <b>"
    html = Report(native)._repr_html_()
    assert "<script" not in html.lower()
    assert not re.search(r"(src|href)\s*=\s*[\"']?https?:", html)
    assert "@import" not in html
    assert "train.py &lt;b&gt;" in html


def test_html_ranks_findings_by_their_predicted_saving(starved_report: Report) -> None:
    # The text report's order and its "Fixing this saves about" line, in the HTML too.
    html = starved_report.to_html()
    text = starved_report.summary()
    priced = [f for f in starved_report.findings if f.predicted_saving]
    assert len(priced) >= 2
    savings = [f.predicted_saving["saving_ns"]["value"] for f in priced]
    assert savings == sorted(savings, reverse=True)
    lines = [line.strip() for line in text.splitlines() if "Fixing this saves about" in line]
    assert len(lines) == len(priced)
    positions = [html.find(f"<b>{escape(line)}</b>") for line in lines]
    assert -1 not in positions, lines
    assert positions == sorted(positions)
    titles = [html.find(escape(f.title)) for f in priced]
    assert titles == sorted(titles)


def test_numbers_print_as_cpp_prints_them(starved_report: Report) -> None:
    html = starved_report.to_html()
    step = starved_report.to_dict()["sections"]
    timeline = next(s for s in step if s["id"] == "timeline")
    fig = timeline["figures"]["step_time_ns"]
    assert _core.format_figure(fig["value"], "ns") in html
    assert gpudiag.format_figure(2.5e6, "ns") == "2.5 ms"  # the formatter is C++'s


def test_memory_chart_draws_the_memory_series_over_time(snapshot_report: Report) -> None:
    data = snapshot_report.to_dict()
    memory = next(s for s in data["sections"] if s["id"] == "memory")
    timed = [
        s for s in memory["series"] if s["unit"] == "bytes" and s["x_unit"] == "s" and s["points"]
    ]
    svg = memory_chart(snapshot_report.native())
    assert timed, "a snapshot with a trace has memory over time"
    assert svg.count('class="series"') == len(timed)
    assert "GiB" in svg or "MiB" in svg  # a byte axis, printed by C++'s formatter
    peaks = [f for f in memory["figures"].values() if f["kind"] == "peak"]
    # Each distinct peak is one watermark; peaks on one line (reserved and reserved + outside,
    # when nothing lay outside) share it.
    distinct = {round(f["value"] / 2**20) for f in peaks}
    labels = re.findall(r'class="watermark-label"[^>]*>([^<]*)<', svg)
    assert 1 <= len(labels) <= len(distinct)
    assert all(any(label.startswith(escape(f["label"])) for f in peaks) for label in labels)


def test_watermarks_are_the_figures_declared_peaks(snapshot_report: Report) -> None:
    native = Report.from_json(snapshot_report.to_json()).native()
    sections = native.sections  # a copy: lists of bound structs are converted
    memory = next(s for s in sections if s.id == "memory")
    figures = memory.figures
    for f in figures:
        f.kind = _core.FigureKind.gauge
    figures[0].kind = _core.FigureKind.peak
    memory.figures = figures
    native.sections = sections
    svg = memory_chart(native)
    assert svg.count('class="watermark"') == 1
    assert figures[0].label in svg


def test_step_chart_stacks_the_declared_partition(starved_report: Report) -> None:
    data = starved_report.to_dict()
    tables = [t for s in data["sections"] for t in s["tables"] if t["kind"] == "partition"]
    assert tables, "the timeline declares its per-step breakdown"
    table = tables[0]
    svg = step_chart(starved_report.native())
    shown = table["rows"][-charts.MAX_BARS :]
    bars = sum(1 for row in shown for v in row[1:] if v > 0)
    assert svg.count('class="bar"') == bars
    for i, column in enumerate(table["columns"][1:]):
        if any(row[i + 1] > 0 for row in shown):
            assert charts.STACK_COLOURS[i] in svg
            assert column in svg
    row = shown[0]
    label = _core.format_figure(row[0], table["units"][0])
    part = _core.format_figure(row[1], table["units"][1])
    assert f"{label} {table['columns'][1]}: {part}" in svg


def test_charts_are_left_out_without_their_data(
    snapshot_report: Report, starved_report: Report
) -> None:
    assert step_chart(snapshot_report.native()) == ""  # a snapshot has no timeline
    for report in (snapshot_report, starved_report):
        native = report.native()
        drawn = [c for _, c in (*memory_charts(native), *partition_charts(native)) if c]
        assert report.to_html().count("<svg") == len(drawn)
    # The snapshot's peak composition (a partition by site) is drawn; the step chart is not.
    assert partition_charts(snapshot_report.native())


def test_decimation_bounds_points_and_keeps_spikes() -> None:
    points = [(float(i), 1.0) for i in range(100_000)]
    points[54_321] = (54_321.0, 99.0)
    out = charts.decimate(points, limit=600)
    assert len(out) <= 600
    assert max(y for _, y in out) == 99.0


def test_many_steps_are_capped() -> None:
    svg = charts.stacked_bars(
        [str(i) for i in range(1000)], [("busy", [1.0] * 1000)], title="t", y_fmt=str
    )
    assert svg.count('class="bar"') == charts.MAX_BARS


def test_nice_byte_ticks_are_round() -> None:
    ticks = charts.nice_byte_ticks(9.5 * 1024**3)
    assert all(t % (1024**3 // 2) == 0 for t in ticks)


def test_html_names_devices_and_lists_figures_as_the_text_does(
    snapshot_report: Report, starved_report: Report
) -> None:
    # A snapshot does not record the device's model: the page says so, as the text does.
    assert "device 0: model not recorded in the input" in snapshot_report.to_html()
    assert "device 0: model not recorded in the input" in snapshot_report.summary()
    html = starved_report.to_html()
    assert (
        f"device 0: {escape(_core.describe_device(starved_report.native().source.devices[0]))}"
        in html
    )
    # The window figure is an enum: its word, never the code and the label's legend.
    assert "<td>window</td><td>steps</td>" in html
    assert "0 steps, 1 hta, 2 all" not in html
