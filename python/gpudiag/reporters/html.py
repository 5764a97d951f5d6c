# SPDX-License-Identifier: Apache-2.0
"""Report HTML for notebooks and files: findings, then plots, then every section's figures.

Everything is inline: CSS in a <style> block scoped by the .gpudiag class, plots as <svg>. No
scripts, no CDN, so the page renders offline, in email and in sandboxed notebook viewers. Sections
the report lacks are simply left out. It reads the native report (``gpudiag._core.Report``) as
the C++ renderers do, and every word and number in it comes from C++'s calls.
"""

from __future__ import annotations

import math
from html import escape
from typing import Callable

from gpudiag import _core
from gpudiag.reporters import svg

_CSS = """
.gpudiag{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;font-size:13px;
 color:#222;max-width:760px}
.gpudiag h2{font-size:16px;margin:6px 0}.gpudiag h3{font-size:14px;margin:12px 0 4px}
.gpudiag .finding{border-left:5px solid #999;padding:4px 10px;margin:8px 0;background:#fafafa}
.gpudiag .critical{border-color:#d62728}.gpudiag .warning{border-color:#ff9f1c}
.gpudiag .info{border-color:#1f77b4}
.gpudiag .sev{font-weight:bold;text-transform:uppercase;font-size:11px;margin-right:6px}
.gpudiag table{border-collapse:collapse;margin:4px 0}
.gpudiag td,.gpudiag th{border:1px solid #ddd;padding:2px 6px;text-align:left}
.gpudiag th{background:#f0f0f0}.gpudiag .note{color:#666}
.gpudiag figure{margin:8px 0}.gpudiag figcaption{font-weight:bold;margin-bottom:2px}
.gpudiag .partial{border-left:5px solid #d62728;padding:4px 10px;margin:8px 0;background:#fff4f4}
.gpudiag .device{color:#444}.gpudiag .headline{font-size:14px;font-weight:bold;margin:8px 0}
"""

# What a chart needs to know about a figure, a series or a table comes from what the report
# declares (units, kinds, the "partition" table kind), never from their names.


def _section(report: _core.Report, section_id: str) -> _core.Section | None:
    return next((s for s in report.sections if s.id == section_id), None)


def _formatter(unit: str) -> Callable[[float], str]:
    return lambda v: _core.format_figure(v, unit)


# The memory section's byte series, one chart per kind of x axis: a per-step series is never
# drawn on the seconds axis (it would stretch a run's seconds to its step count).
_MEMORY_CHARTS = (
    ("s", "Device memory over time", "time"),
    ("step", "Device memory per step", "step (counted from the first seen)"),
)


def memory_charts(report: _core.Report) -> list[tuple[str, str]]:
    """Device memory as (caption, chart): over time, with the section's peaks (figures of kind
    "peak") as watermarks, and per step (each step's peak and lowest level, where a leak shows as
    a rising floor); charts without data are left out."""
    section = _section(report, "memory")
    if section is None:
        return []
    charts = []
    for x_unit, caption, x_label in _MEMORY_CHARTS:
        series = [
            (s.id, s.title or s.id, s.points)
            for s in section.series
            if s.unit == "bytes" and s.x_unit == x_unit and s.points
        ]
        if not series:
            continue
        chart = svg.line_chart(
            series,
            title=caption,
            y_fmt=_formatter("bytes"),
            x_fmt=_formatter(x_unit),
            x_label=x_label,
            x_unit=x_unit,
            integer_x=x_unit == "step",
            hlines=_peaks(section) if x_unit == "s" else [],
            byte_axis=True,
        )
        if chart:
            charts.append((caption, chart))
    return charts


def _peaks(section: _core.Section) -> list[tuple[str, float]]:
    return [
        (f.label or f.key, f.value)
        for f in section.figures
        if f.kind == _core.FigureKind.peak and f.unit == "bytes" and math.isfinite(f.value)
    ]


def memory_chart(report: _core.Report) -> str:
    """Device memory over time (see memory_charts); "" when the report has no such series."""
    timed = [chart for caption, chart in memory_charts(report) if caption == _MEMORY_CHARTS[0][1]]
    return timed[0] if timed else ""


def _partition_tables(report: _core.Report) -> list[_core.Table]:
    return [
        t
        for s in report.sections
        for t in s.tables
        if t.kind == _core.TableKind.partition and t.rows
    ]


def partition_chart(table: _core.Table) -> str:
    """A table whose rows split a whole into parts (kind "partition": each step's GPU time,
    busy and idle by cause; what was live at each device's peak, by site) as stacked bars, its
    numbers printed by their declared units; "" when it has nothing to draw."""
    columns = table.columns
    units = [*table.units, *[""] * len(columns)]
    rows = [r for r in table.rows if len(r) == len(columns)]
    if len(columns) < 2 or not rows:
        return ""
    labels = [_cell_text(r[0], units[0]) for r in rows]
    components = [
        (
            _short_label(_core.column_heading(columns[i], units[i])),
            [_part(r[i]) for r in rows],
        )
        for i in range(1, len(columns))
    ]
    return svg.stacked_bars(
        labels,
        components,
        title=table.title,
        y_fmt=_formatter(units[1]),
        x_label=_core.column_heading(columns[0], units[0]),
        byte_axis=units[1] == "bytes",
    )


def _part(cell: float | str) -> float:
    """A part of a partition's whole: a number; a cell of text stands for none."""
    return cell if isinstance(cell, float) else 0.0


def _short_label(name: str, width: int = 24) -> str:
    """The end of a long legend entry (a site's file:line and function), so four fit a row."""
    return name if len(name) <= width else "\u2026" + name[-(width - 1) :]


def step_chart(report: _core.Report) -> str:
    """The first partition whose rows are steps (its first column's unit is "step"), e.g. each
    step's GPU time by cause, as stacked bars; "" without one."""
    tables = [t for t in _partition_tables(report) if (t.units or [""])[0] == "step"]
    return partition_chart(tables[0]) if tables else ""


def partition_charts(report: _core.Report) -> list[tuple[str, str]]:
    """Every partition table of the report as (its title, its chart), charts that draw."""
    charts = [(t.title or t.id, partition_chart(t)) for t in _partition_tables(report)]
    return [(title, chart) for title, chart in charts if chart]


def _figures_table(figures: list[_core.Figure]) -> str:
    """A section's or finding's figures, each listed as the text report lists it (C++'s rule)."""
    if not figures:
        return ""
    rows = "".join(
        f"<tr><td>{escape(label)}</td><td>{escape(value)}</td></tr>"
        for label, value in map(_core.figure_row, figures)
    )
    return f"<table>{rows}</table>"


def _saving(finding: _core.Finding) -> str:
    """What fixing the finding is worth, in the text report's words (C++'s), and whose savings
    it overlaps; "" when not predicted."""
    text = _core.describe_saving(finding.predicted_saving)
    if not text:
        return ""
    shared = _core.describe_shared_saving(finding.saving_shared_with)
    line = f"{text}. {shared}" if shared else text  # as the text report writes it
    return f'<div class="saving"><b>{escape(line)}</b></div>'


def _fix_all(report: _core.Report) -> str:
    """What fixing every cause together is worth (C++'s words); "" when the report has none."""
    text = _core.describe_fix_all(report.fix_all_saving)
    return f'<div class="saving"><b>{escape(text)}.</b></div>' if text else ""


def _sites(finding: _core.Finding) -> str:
    sites = finding.sites[:10]
    if not sites:
        return ""
    unit = finding.site_unit
    rows = "".join(
        f"<tr><td>{escape(s.location)}</td>"
        f"<td>{escape(_core.format_figure(s.value, unit))}</td>"
        f"<td>{escape(_core.format_figure(s.share, 'fraction'))}</td></tr>"
        for s in sites
    )
    return f"<table><tr><th>site</th><th>{escape(unit)}</th><th>share</th></tr>{rows}</table>"


def _finding(f: _core.Finding) -> str:
    severity = _core.severity_name(f.severity)
    parts = [
        f'<div class="finding {escape(severity)}">',
        f'<div><span class="sev">{escape(severity)}</span><b>{escape(f.title)}</b></div>',
    ]
    if f.rank >= 0:
        parts.append(f'<div class="note">rank {f.rank}</div>')
    if f.summary:
        parts.append(f"<p>{escape(f.summary)}</p>")
    parts.append(_saving(f))
    parts.append(_figures_table(f.figures))
    parts.append(_sites(f))
    for heading, items in (("Evidence", f.evidence), ("What to do", f.advice)):
        if items:
            lis = "".join(f"<li>{escape(i)}</li>" for i in items)
            parts.append(f"<div>{heading}:</div><ul>{lis}</ul>")
    parts.append("</div>")
    return "".join(parts)


def _cell_text(cell: float | str, unit: str) -> str:
    """A number by its column's declared unit; text as it is."""
    return _core.format_figure(cell, unit) if isinstance(cell, float) else cell


def _table(t: _core.Table) -> str:
    units = t.units
    head = "".join(
        f"<th>{escape(_core.column_heading(c, units[i] if i < len(units) else ''))}</th>"
        for i, c in enumerate(t.columns)
    )
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{escape(_cell_text(c, units[i] if i < len(units) else ''))}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in t.rows[:20]
    )
    more = len(t.rows) - 20
    tail = f'<div class="note">{more} more rows in the JSON report</div>' if more > 0 else ""
    return f"<div>{escape(t.title)}</div><table><tr>{head}</tr>{rows}</table>{tail}"


def _section_details(s: _core.Section) -> str:
    shown = [t for t in s.tables if t.kind != _core.TableKind.data][:4]
    body = [_figures_table(s.figures), *map(_table, shown)]
    return f"<details><summary>{escape(s.title or s.id)}</summary>{''.join(body)}</details>"


def _header(report: _core.Report) -> list[str]:
    """The title, what was read (the source, its devices, how much of the input) and the
    headline."""
    count = len(report.findings)
    title = f"gpudiag: {count} finding{'s' if count != 1 else ''}"
    out = [f"<h2>{escape(title)}</h2>"]
    source = report.source
    if source.description:
        out.append(f'<div class="note">{escape(source.description)}</div>')
    for device in source.devices:
        line = f"device {device.ordinal}: {_core.describe_device(device)}"
        out.append(f'<div class="device">{escape(line)}</div>')
    coverage = report.input
    if not coverage.complete:
        missing = "".join(f"<li>{escape(m)}</li>" for m in coverage.missing)
        out.append(
            '<div class="partial"><strong>Partial input:</strong> only part of the input '
            f"could be read ({coverage.events} events); everything "
            f"below covers that part alone.<ul>{missing}</ul></div>"
        )
    headline = _core.headline(report)  # what was found, and what the input could not show
    if headline:
        out.append(f'<p class="headline">{escape(headline)}</p>')
    return out


def render_report(report: _core.Report, *, full_page: bool = False) -> str:
    """The report as HTML (a fragment for notebooks, or a whole page)."""
    out = [f"<style>{_CSS}</style>", '<div class="gpudiag">', *_header(report)]
    out.extend(f'<div class="note">{escape(note)}</div>' for note in report.notes)
    out.extend(map(_finding, report.findings))
    out.append(_fix_all(report))
    for rank in report.ranks:
        if rank.findings:
            out.append(f"<h3>Rank {rank.source.rank}</h3>")
            out.extend(map(_finding, rank.findings))
    for caption, chart in [*memory_charts(report), *partition_charts(report)]:
        out.append(
            f'<figure class="plot"><figcaption>{escape(caption)}</figcaption>{chart}</figure>'
        )
    if report.sections:
        out.append("<h3>Figures</h3>")
        out.extend(map(_section_details, report.sections))
    out.append("</div>")
    body = "".join(out)
    if not full_page:
        return body
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>gpudiag report</title>'
        f"</head><body>{body}</body></html>"
    )
