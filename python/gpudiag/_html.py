# SPDX-License-Identifier: Apache-2.0
"""Report HTML for notebooks and files: findings, then plots, then every section's figures.

Everything is inline: CSS in a <style> block scoped by the .gpudiag class, plots as <svg>. No
scripts, no CDN, so the page renders offline, in email and in sandboxed notebook viewers. Sections
the report lacks are simply left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from gpudiag import _svg
from gpudiag._format import format_bytes, format_duration_ns, format_value

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
"""

# Table columns that place a step in time or give its total; the rest are its time components.
_STEP_META_COLUMNS = {
    "step", "rank", "device", "start", "end", "start_s", "end_s", "start_ns", "end_ns",
    "duration", "duration_s", "duration_ns", "duration_ms", "total", "total_s", "total_ns",
    "step_time", "step_time_ns", "step_time_s", "wall", "wall_ns", "wall_s", "time", "time_ns",
}
_WATERMARK_WORDS = ("peak", "watermark", "high_water", "limit", "capacity")
_PEAK_SERIES = "peak_sites"  # the memory section's composition of its peak (x = table row)
_PEAK_SITES_SHOWN = 3  # by name in the peak chart; one legend row holds four entries


def _unit_of(column: str) -> str:
    for suffix, unit in (("_ns", "ns"), ("_us", "us"), ("_ms", "ms"), ("_s", "s"),
                         ("_bytes", "bytes"), ("_share", "fraction"), ("_fraction", "fraction")):
        if column.endswith(suffix):
            return unit
    return ""


def _to_ns(value: float, unit: str) -> float:
    return value * {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}.get(unit, 1.0)


def _sections(report: dict[str, Any]) -> list[dict[str, Any]]:
    return list(report.get("sections", []))


def _section(report: dict[str, Any], section_id: str) -> dict[str, Any] | None:
    return next((s for s in _sections(report) if s.get("id") == section_id), None)


def _step_table(report: dict[str, Any]) -> dict[str, Any] | None:
    """The per-step table: in the timeline section first, else any section's table with a
    'step' column and time components."""
    ordered = sorted(_sections(report), key=lambda s: s.get("id") != "timeline")
    for section in ordered:
        tables: list[dict[str, Any]] = section.get("tables", [])
        for table in tables:
            columns = [str(c) for c in table.get("columns", [])]
            if "step" in columns and any(c not in _STEP_META_COLUMNS for c in columns):
                return table
    return None


def step_starts(report: dict[str, Any]) -> list[float]:
    """Start times of steps in seconds, for the marks on time plots."""
    table = _step_table(report)
    if table:
        columns = [str(c) for c in table.get("columns", [])]
        for name, scale in (("start_s", 1.0), ("start", 1.0), ("start_ns", 1e-9)):
            if name in columns:
                i = columns.index(name)
                return [float(row[i]) * scale for row in table.get("rows", [])
                        if isinstance(row[i], (int, float))]
    for section in _sections(report):
        for series in section.get("series", []):
            if series.get("id") in ("steps", "step_starts", "step_start"):
                return [float(p[0]) for p in series.get("points", [])]
    return []


def memory_chart(report: dict[str, Any]) -> str:
    """Memory over time with watermarks and step marks; "" when the report has no memory series."""
    section = _section(report, "memory")
    candidates = [section] if section else _sections(report)
    series: list[tuple[str, Sequence[tuple[float, float]]]] = []
    watermarks: list[tuple[str, float]] = []
    for sec in candidates:
        for s in sec.get("series", []):
            if str(s.get("id", "")).startswith(_PEAK_SERIES):
                continue  # not over time: the peak's composition (peak_chart)
            if s.get("unit") == "bytes" and s.get("points"):
                series.append((str(s.get("title") or s.get("id")), s["points"]))
        for key, fig in sec.get("figures", {}).items():
            if fig.get("unit") == "bytes" and any(w in key for w in _WATERMARK_WORDS):
                watermarks.append((str(fig.get("label") or key), float(fig.get("value", 0.0))))
        if series:
            break
    if not series:
        return ""
    return _svg.line_chart(series, title="Device memory over time", y_fmt=format_bytes,
                           hlines=watermarks[:4], vlines=step_starts(report), byte_axis=True)


def peak_chart(report: dict[str, Any]) -> str:
    """What was live at each device's peak, stacked by allocation site; "" without one."""
    section = _section(report, "memory")
    if not section:
        return ""
    tables = [t for t in section.get("tables", []) if t.get("id") == "peak_sites"]
    plots = [s for s in section.get("series", []) if str(s.get("id", "")).startswith(_PEAK_SERIES)]
    if not tables or len(tables) != len(plots):
        return ""
    labels: list[str] = []
    by_site: dict[str, list[float]] = {}
    for bar, (table, plot) in enumerate(zip(tables, plots)):
        suffix = str(plot.get("id", ""))[len(_PEAK_SERIES):].lstrip("_")
        labels.append(f"device {suffix}" if suffix else "peak")
        rows = table.get("rows", [])
        for x, value in plot.get("points", []):
            row = rows[int(x)] if 0 <= int(x) < len(rows) else None
            if not row:
                continue
            values = by_site.setdefault(str(row[0]), [0.0] * len(tables))
            values[bar] += float(value)
    if not by_site:
        return ""
    # The largest sites by name (what the legend has room for), the rest as one.
    ranked = sorted(by_site.items(), key=lambda kv: -sum(kv[1]))
    shown = [(_short_label(site), values) for site, values in ranked[:_PEAK_SITES_SHOWN]]
    rest = [sum(values[i] for _, values in ranked[_PEAK_SITES_SHOWN:]) for i in range(len(labels))]
    if any(rest):
        shown.append(("other sites", rest))
    return _svg.stacked_bars(labels, shown, title="Live at the peak, by site",
                             y_fmt=format_bytes, x_label="")


def _short_label(site: str, width: int = 24) -> str:
    """The end of a site name (its file:line and function) when it is long."""
    return site if len(site) <= width else "…" + site[-(width - 1):]


def step_chart(report: dict[str, Any]) -> str:
    """Per-step time as stacked bars by cause (busy, input wait, ...); "" without a step table."""
    table = _step_table(report)
    if not table:
        return ""
    columns = [str(c) for c in table.get("columns", [])]
    rows = [r for r in table.get("rows", []) if len(r) == len(columns)]
    if not rows:
        return ""
    step_i = columns.index("step")
    labels = [str(int(r[step_i])) if isinstance(r[step_i], (int, float)) else str(r[step_i])
              for r in rows]
    if {"gpu_busy_ns", "gpu_idle_ns"} <= set(columns):
        return _svg.stacked_bars(labels, _timeline_components(columns, rows),
                                 title="GPU time per step: busy, and idle by cause",
                                 y_fmt=format_duration_ns)
    components = []
    for i, name in enumerate(columns):
        if name in _STEP_META_COLUMNS or not all(isinstance(r[i], (int, float)) for r in rows):
            continue
        unit = _unit_of(name)
        if unit not in ("ns", "us", "ms", "s"):
            continue
        pretty = name.rsplit("_", 1)[0] if unit else name
        components.append((pretty.replace("_", " "), [_to_ns(float(r[i]), unit) for r in rows]))
    if not components:
        return ""
    return _svg.stacked_bars(labels, components, title="Time per step by cause",
                             y_fmt=format_duration_ns)


def _timeline_components(columns: list[str], rows: list[list[Any]]) -> list[tuple[str, list[float]]]:
    """Busy and idle-by-cause from the timeline analysis' per-step table. GPU busy + idle is the
    step's span; host wait is the part of idle the GPU spent waiting for the host, and the loop's
    input wait (host time) is shown as the share of that host wait it can explain."""
    col = {name: i for i, name in enumerate(columns)}

    def get(row: list[Any], name: str) -> float:
        i = col.get(name)
        v = row[i] if i is not None else 0.0
        return float(v) if isinstance(v, (int, float)) else 0.0

    busy, input_wait, host_other, other = [], [], [], []
    for row in rows:
        idle = get(row, "gpu_idle_ns")
        host = min(idle, get(row, "host_wait_ns"))
        waiting = min(host, get(row, "input_wait_ns"))
        busy.append(get(row, "gpu_busy_ns"))
        input_wait.append(waiting)
        host_other.append(host - waiting)
        other.append(idle - host)
    return [("busy", busy), ("idle: input wait", input_wait), ("idle: host wait", host_other),
            ("idle: other", other)]


def _figures_table(figures: dict[str, Any]) -> str:
    if not figures:
        return ""
    rows = "".join(
        f"<tr><td>{escape(str(f.get('label') or key))}</td>"
        f"<td>{escape(format_value(float(f.get('value', 0.0)), str(f.get('unit', ''))))}</td></tr>"
        for key, f in figures.items())
    return f"<table>{rows}</table>"


def _finding(f: dict[str, Any]) -> str:
    severity = str(f.get("severity", "info"))
    parts = [f'<div class="finding {escape(severity)}">',
             (f'<div><span class="sev">{escape(severity)}</span>'
              f"<b>{escape(str(f.get('title', '')))}</b></div>")]
    if f.get("rank", -1) >= 0:
        parts.append(f'<div class="note">rank {int(f["rank"])}</div>')
    if f.get("summary"):
        parts.append(f"<p>{escape(str(f['summary']))}</p>")
    parts.append(_figures_table(f.get("figures", {})))
    sites = f.get("sites", [])[:10]
    if sites:
        unit = str(f.get("site_unit", ""))
        rows = "".join(
            f"<tr><td>{escape(str(s.get('location', '')))}</td>"
            f"<td>{escape(format_value(float(s.get('value', 0.0)), unit))}</td>"
            f"<td>{float(s.get('share', 0.0)) * 100:.0f} %</td></tr>" for s in sites)
        parts.append(f"<table><tr><th>site</th><th>{escape(unit)}</th><th>share</th></tr>"
                     f"{rows}</table>")
    for heading, key in (("Evidence", "evidence"), ("What to do", "advice")):
        items = f.get(key, [])
        if items:
            lis = "".join(f"<li>{escape(str(i))}</li>" for i in items)
            parts.append(f"<div>{heading}:</div><ul>{lis}</ul>")
    parts.append("</div>")
    return "".join(parts)


def _section_details(s: dict[str, Any]) -> str:
    body = [_figures_table(s.get("figures", {}))]
    for t in s.get("tables", [])[:4]:
        head = "".join(f"<th>{escape(str(c))}</th>" for c in t.get("columns", []))
        rows = "".join(
            "<tr>" + "".join(
                f"<td>{escape(f'{c:.4g}' if isinstance(c, float) else str(c))}</td>" for c in row)
            + "</tr>" for row in t.get("rows", [])[:20])
        more = len(t.get("rows", [])) - 20
        tail = f'<div class="note">{more} more rows in the JSON report</div>' if more > 0 else ""
        body.append(f"<div>{escape(str(t.get('title', t.get('id', ''))))}</div>"
                    f"<table><tr>{head}</tr>{rows}</table>{tail}")
    return (f"<details><summary>{escape(str(s.get('title') or s.get('id', '')))}</summary>"
            f"{''.join(body)}</details>")


def render_report(report: dict[str, Any], *, full_page: bool = False) -> str:
    """The report as HTML (a fragment for notebooks, or a whole page)."""
    findings = report.get("findings", [])
    source = report.get("source", {})
    out = [f"<style>{_CSS}</style>", '<div class="gpudiag">']
    title = f"gpudiag: {len(findings)} finding{'s' if len(findings) != 1 else ''}"
    out.append(f"<h2>{escape(title)}</h2>")
    if source.get("description"):
        out.append(f'<div class="note">{escape(str(source["description"]))}</div>')
    for note in report.get("notes", []):
        out.append(f'<div class="note">{escape(str(note))}</div>')
    if not findings and not report.get("ranks"):
        out.append("<p>No problems found.</p>")
    out.extend(_finding(f) for f in findings)
    for rank in report.get("ranks", []):
        rank_findings = rank.get("findings", [])
        if rank_findings:
            r = rank.get("source", {}).get("rank", -1)
            out.append(f"<h3>Rank {escape(str(r))}</h3>")
            out.extend(_finding(f) for f in rank_findings)
    for caption, chart in (("Memory", memory_chart(report)), ("Live at the peak", peak_chart(report)),
                           ("Steps", step_chart(report))):
        if chart:
            out.append(f'<figure class="plot"><figcaption>{caption}</figcaption>{chart}</figure>')
    sections = _sections(report)
    if sections:
        out.append("<h3>Figures</h3>")
        out.extend(_section_details(s) for s in sections)
    out.append("</div>")
    body = "".join(out)
    if not full_page:
        return body
    return ('<!DOCTYPE html><html><head><meta charset="utf-8"><title>gpudiag report</title>'
            f"</head><body>{body}</body></html>")
