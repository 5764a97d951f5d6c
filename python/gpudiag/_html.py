# SPDX-License-Identifier: Apache-2.0
"""Report HTML for notebooks and files: findings, then plots, then every section's figures.

Everything is inline: CSS in a <style> block scoped by the .gpudiag class, plots as <svg>. No
scripts, no CDN, so the page renders offline, in email and in sandboxed notebook viewers. Sections
the report lacks are simply left out.
"""

from __future__ import annotations

from html import escape
from typing import Any, Callable

from gpudiag import _core, _svg
from gpudiag._format import format_figure

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


def _sections(report: dict[str, Any]) -> list[dict[str, Any]]:
    return list(report.get("sections", []))


def _section(report: dict[str, Any], section_id: str) -> dict[str, Any] | None:
    return next((s for s in _sections(report) if s.get("id") == section_id), None)


def _formatter(unit: str) -> Callable[[float], str]:
    return lambda v: format_figure(v, unit)


# The memory section's byte series, one chart per kind of x axis: a per-step series is never
# drawn on the seconds axis (it would stretch a run's seconds to its step count).
_MEMORY_CHARTS = (
    ("s", "Device memory over time", "time"),
    ("step", "Device memory per step", "step (counted from the first seen)"),
)


def memory_charts(report: dict[str, Any]) -> list[tuple[str, str]]:
    """Device memory as (caption, chart): over time, with the section's peaks (figures of kind
    "peak") as watermarks, and per step (each step's peak and lowest level, where a leak shows as
    a rising floor); charts without data are left out."""
    section = _section(report, "memory")
    if section is None:
        return []
    charts = []
    for x_unit, caption, x_label in _MEMORY_CHARTS:
        series = [
            (str(s.get("id")), str(s.get("title") or s.get("id")), s["points"])
            for s in section.get("series", [])
            if s.get("unit") == "bytes" and s.get("x_unit", "s") == x_unit and s.get("points")
        ]
        if not series:
            continue
        watermarks = _peaks(section) if x_unit == "s" else []
        chart = _svg.line_chart(
            series,
            title=caption,
            y_fmt=_formatter("bytes"),
            x_fmt=_formatter(x_unit),
            x_label=x_label,
            x_unit=x_unit,
            integer_x=x_unit == "step",
            hlines=watermarks,
            byte_axis=True,
        )
        if chart:
            charts.append((caption, chart))
    return charts


def _peaks(section: dict[str, Any]) -> list[tuple[str, float]]:
    return [
        (str(f.get("label") or key), float(f["value"]))
        for key, f in section.get("figures", {}).items()
        if f.get("kind") == "peak" and f.get("unit") == "bytes" and f.get("value") is not None
    ]


def memory_chart(report: dict[str, Any]) -> str:
    """Device memory over time (see memory_charts); "" when the report has no such series."""
    timed = [chart for caption, chart in memory_charts(report) if caption == _MEMORY_CHARTS[0][1]]
    return timed[0] if timed else ""


def _partition_tables(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        t
        for s in _sections(report)
        for t in s.get("tables", [])
        if t.get("kind") == "partition" and t.get("rows")
    ]


def partition_chart(table: dict[str, Any]) -> str:
    """A table whose rows split a whole into parts (kind "partition": each step's GPU time,
    busy and idle by cause; what was live at each device's peak, by site) as stacked bars, its
    numbers printed by their declared units; "" when it has nothing to draw."""
    columns = [str(c) for c in table.get("columns", [])]
    units = [str(u) for u in table.get("units", [])] + [""] * len(columns)
    rows = [r for r in table.get("rows", []) if len(r) == len(columns)]
    if len(columns) < 2 or not rows:
        return ""
    label_unit = units[0]
    labels = [
        format_figure(r[0], label_unit) if isinstance(r[0], (int, float)) else str(r[0])
        for r in rows
    ]
    components = [
        (
            _short_label(_core.column_heading(columns[i], units[i])),
            [float(r[i]) if isinstance(r[i], (int, float)) else 0.0 for r in rows],
        )
        for i in range(1, len(columns))
    ]
    return _svg.stacked_bars(
        labels,
        components,
        title=str(table.get("title", "")),
        y_fmt=_formatter(units[1]),
        x_label=_core.column_heading(columns[0], units[0]),
        byte_axis=units[1] == "bytes",
    )


def _short_label(name: str, width: int = 24) -> str:
    """The end of a long legend entry (a site's file:line and function), so four fit a row."""
    return name if len(name) <= width else "\u2026" + name[-(width - 1) :]


def step_chart(report: dict[str, Any]) -> str:
    """The first partition whose rows are steps (its first column's unit is "step"), e.g. each
    step's GPU time by cause, as stacked bars; "" without one."""
    tables = [t for t in _partition_tables(report) if (t.get("units") or [""])[0] == "step"]
    return partition_chart(tables[0]) if tables else ""


def partition_charts(report: dict[str, Any]) -> list[tuple[str, str]]:
    """Every partition table of the report as (its title, its chart), charts that draw."""
    charts = [
        (str(t.get("title") or t.get("id", "")), partition_chart(t))
        for t in _partition_tables(report)
    ]
    return [(title, chart) for title, chart in charts if chart]


def _native_figure(key: str, f: dict[str, Any]) -> Any:
    figure = _core.Figure()
    figure.key = key
    value = f.get("value")
    figure.value = float("nan") if value is None else float(value)
    figure.unit = str(f.get("unit", ""))
    figure.label = str(f.get("label", ""))
    return figure


def _figures_table(figures: dict[str, Any]) -> str:
    """A section's or finding's figures, each listed as the text report lists it (C++'s rule)."""
    if not figures:
        return ""
    rows = "".join(
        f"<tr><td>{escape(label)}</td><td>{escape(value)}</td></tr>"
        for label, value in (_core.figure_row(_native_figure(key, f)) for key, f in figures.items())
    )
    return f"<table>{rows}</table>"


def _saving(predicted: dict[str, Any]) -> str:
    """What fixing the finding is worth, in the text report's words (C++'s), and whose savings
    it overlaps; "" when not predicted."""
    figures = [_native_figure(key, f) for key, f in predicted.items() if key != "shared_with"]
    text = _core.describe_saving(figures)
    if not text:
        return ""
    shared = _core.describe_shared_saving([str(i) for i in predicted.get("shared_with", [])])
    line = f"{text}. {shared}" if shared else text  # as the text report writes it
    return f'<div class="saving"><b>{escape(line)}</b></div>'


def _fix_all(report: dict[str, Any]) -> str:
    """What fixing every cause together is worth (C++'s words); "" when the report has none."""
    figures = [_native_figure(key, f) for key, f in report.get("fix_all_saving", {}).items()]
    text = _core.describe_fix_all(figures)
    return f'<div class="saving"><b>{escape(text)}.</b></div>' if text else ""


def _finding(f: dict[str, Any]) -> str:
    severity = str(f.get("severity", "info"))
    parts = [
        f'<div class="finding {escape(severity)}">',
        (
            f'<div><span class="sev">{escape(severity)}</span>'
            f"<b>{escape(str(f.get('title', '')))}</b></div>"
        ),
    ]
    if f.get("rank", -1) >= 0:
        parts.append(f'<div class="note">rank {int(f["rank"])}</div>')
    if f.get("summary"):
        parts.append(f"<p>{escape(str(f['summary']))}</p>")
    parts.append(_saving(f.get("predicted_saving", {})))
    parts.append(_figures_table(f.get("figures", {})))
    sites = f.get("sites", [])[:10]
    if sites:
        unit = str(f.get("site_unit", ""))
        rows = "".join(
            f"<tr><td>{escape(str(s.get('location', '')))}</td>"
            f"<td>{escape(format_figure(float(s.get('value', 0.0)), unit))}</td>"
            f"<td>{escape(format_figure(float(s.get('share', 0.0)), 'fraction'))}</td></tr>"
            for s in sites
        )
        parts.append(
            f"<table><tr><th>site</th><th>{escape(unit)}</th><th>share</th></tr>{rows}</table>"
        )
    for heading, key in (("Evidence", "evidence"), ("What to do", "advice")):
        items = f.get(key, [])
        if items:
            lis = "".join(f"<li>{escape(str(i))}</li>" for i in items)
            parts.append(f"<div>{heading}:</div><ul>{lis}</ul>")
    parts.append("</div>")
    return "".join(parts)


def _cell_text(cell: Any, unit: str) -> str:
    """A number by its column's declared unit; text as it is."""
    if cell is None:
        return format_figure(float("nan"), unit)
    if isinstance(cell, (int, float)):
        return format_figure(float(cell), unit)
    return str(cell)


def _section_details(s: dict[str, Any]) -> str:
    body = [_figures_table(s.get("figures", {}))]
    for t in [t for t in s.get("tables", []) if t.get("kind") != "data"][:4]:
        units = [str(u) for u in t.get("units", [])]
        head = "".join(
            f"<th>{escape(_core.column_heading(str(c), units[i] if i < len(units) else ''))}</th>"
            for i, c in enumerate(t.get("columns", []))
        )
        rows = "".join(
            "<tr>"
            + "".join(
                f"<td>{escape(_cell_text(c, units[i] if i < len(units) else ''))}</td>"
                for i, c in enumerate(row)
            )
            + "</tr>"
            for row in t.get("rows", [])[:20]
        )
        more = len(t.get("rows", [])) - 20
        tail = f'<div class="note">{more} more rows in the JSON report</div>' if more > 0 else ""
        body.append(
            f"<div>{escape(str(t.get('title', t.get('id', ''))))}</div>"
            f"<table><tr>{head}</tr>{rows}</table>{tail}"
        )
    return (
        f"<details><summary>{escape(str(s.get('title') or s.get('id', '')))}</summary>"
        f"{''.join(body)}</details>"
    )


def _device_line(device: dict[str, Any]) -> str:
    """A device as the text report names it (C++'s describe_device: never blank)."""
    native = _core.DeviceInfo()
    native.ordinal = int(device.get("ordinal", 0))
    native.name = str(device.get("name", ""))
    native.total_memory_bytes = int(device.get("total_memory_bytes", 0))
    native.uuid = str(device.get("uuid", ""))
    native.pci_bus_id = str(device.get("pci_bus_id", ""))
    native.parent_uuid = str(device.get("parent_uuid", ""))
    native.gpu_instance = int(device.get("gpu_instance", -1))
    native.compute_instance = int(device.get("compute_instance", -1))
    return f"device {native.ordinal}: {_core.describe_device(native)}"


def render_report(report: dict[str, Any], *, full_page: bool = False) -> str:
    """The report as HTML (a fragment for notebooks, or a whole page)."""
    findings = report.get("findings", [])
    source = report.get("source", {})
    out = [f"<style>{_CSS}</style>", '<div class="gpudiag">']
    title = f"gpudiag: {len(findings)} finding{'s' if len(findings) != 1 else ''}"
    out.append(f"<h2>{escape(title)}</h2>")
    if source.get("description"):
        out.append(f'<div class="note">{escape(str(source["description"]))}</div>')
    for device in source.get("devices", []):
        out.append(f'<div class="device">{escape(_device_line(device))}</div>')
    coverage = report.get("input", {})
    complete = bool(coverage.get("complete", True))
    if not complete:
        missing = "".join(f"<li>{escape(str(m))}</li>" for m in coverage.get("missing", []))
        out.append(
            '<div class="partial"><strong>Partial input:</strong> only part of the input '
            f"could be read ({escape(str(coverage.get('events', 0)))} events); everything "
            f"below covers that part alone.<ul>{missing}</ul></div>"
        )
    # The C++ headline: what was found, and what the input could not show.
    if report.get("headline"):
        out.append(f'<p class="headline">{escape(str(report["headline"]))}</p>')
    for note in report.get("notes", []):
        out.append(f'<div class="note">{escape(str(note))}</div>')
    out.extend(_finding(f) for f in findings)
    out.append(_fix_all(report))
    for rank in report.get("ranks", []):
        rank_findings = rank.get("findings", [])
        if rank_findings:
            r = rank.get("source", {}).get("rank", -1)
            out.append(f"<h3>Rank {escape(str(r))}</h3>")
            out.extend(_finding(f) for f in rank_findings)
    charts = [*memory_charts(report), *partition_charts(report)]
    for caption, chart in charts:
        if chart:
            out.append(
                f'<figure class="plot"><figcaption>{escape(caption)}</figcaption>{chart}</figure>'
            )
    sections = _sections(report)
    if sections:
        out.append("<h3>Figures</h3>")
        out.extend(_section_details(s) for s in sections)
    out.append("</div>")
    body = "".join(out)
    if not full_page:
        return body
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>gpudiag report</title>'
        f"</head><body>{body}</body></html>"
    )
