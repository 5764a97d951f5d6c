# SPDX-License-Identifier: Apache-2.0
"""Self-contained SVG charts (no scripts, no fonts or files from elsewhere) for report HTML.

Two charts cover what reports plot: a line chart over one kind of x axis (time, or steps) with
horizontal watermarks and vertical marks, and a stacked bar chart of the parts of a whole
(per-step time by cause). Inputs are decimated so a long run still renders as a few kilobytes. A
chart with nothing to show (no points, or every value zero) is not drawn at all: its ticks would
be made up.

Elements carry classes so a test can read what a rendered picture shows: the root has
``data-plot`` (the plot area: left, top, right, bottom), ``data-y-max`` and ``data-x-unit``;
series lines are ``series`` (``data-series``: the series' id), watermarks ``watermark`` with their
labels ``watermark-label``, ticks ``tick-x``/``tick-y`` (``data-value``), legend entries
``legend``, axis titles ``axis-label``, bars ``bar``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from typing import Callable

# Colours by role. The parts of a stacked bar take STACK_COLOURS in the order the report lists
# them, so a partition the analysis always writes in the same order keeps its colours; there are
# enough for the longest partition (the critical path's nine parts) without a repeat.
SERIES_COLOURS = ("#1f77b4", "#ff7f0e", "#9467bd", "#17becf", "#8c564b", "#bcbd22")
WATERMARK_COLOUR = "#d62728"
STEP_MARK_COLOUR = "#9e9e9e"
STACK_COLOURS = (
    "#2ca02c",
    "#e377c2",
    "#bcbd22",
    "#7f7f7f",
    "#9467bd",
    "#17becf",
    "#8c564b",
    "#ff9896",
    "#aec7e8",
    "#c5b0d5",
)

MAX_POINTS = 600  # per series: beyond this, min/max per bucket keeps spikes visible
MAX_STEP_MARKS = 150
MAX_BARS = 120
MAX_X_TICK_LABELS = 12

# Text metrics of the charts' 11 px sans-serif, on the generous side: layout uses them to keep
# labels apart (a wide glyph run is at most this wide per character).
CHAR_WIDTH = 6.2
TEXT_HEIGHT = 11.0
LEGEND_ROW = 14.0

Formatter = Callable[[float], str]
Series = tuple[str, str, Sequence[tuple[float, float]]]  # (id, label, points)
Box = tuple[float, float, float, float]  # left, top, right, bottom


def decimate(
    points: Sequence[tuple[float, float]], limit: int = MAX_POINTS
) -> list[tuple[float, float]]:
    """At most ``limit`` points: each bucket keeps its minimum and maximum, in time order."""
    pts = [(float(x), float(y)) for x, y in points if _finite(x) and _finite(y)]
    if len(pts) <= limit:
        return pts
    buckets = max(1, limit // 2)
    size = len(pts) / buckets
    out: list[tuple[float, float]] = []
    for b in range(buckets):
        chunk = pts[int(b * size) : int((b + 1) * size)]
        if not chunk:
            continue
        lo = min(chunk, key=lambda p: p[1])
        hi = max(chunk, key=lambda p: p[1])
        out.extend(sorted({lo, hi}))
    return out


def _finite(v: object) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def text_width(text: str) -> float:
    return CHAR_WIDTH * len(text)


def nice_ticks(lo: float, hi: float, count: int = 5, *, integer: bool = False) -> list[float]:
    """Round tick values covering [lo, hi]; whole numbers only when ``integer`` (steps)."""
    if not (_finite(lo) and _finite(hi)) or hi <= lo:
        return [lo]
    raw = (hi - lo) / max(1, count)
    magnitude = 10 ** math.floor(math.log10(raw))
    multiples = (1, 2, 5, 10) if integer else (1, 2, 2.5, 5, 10)
    step = next(m * magnitude for m in multiples if m * magnitude >= raw)
    if integer:
        step = max(1.0, float(round(step)))
    first = math.ceil(lo / step) * step
    ticks = []
    v = first
    while v <= hi + step * 1e-9:
        ticks.append(round(v, 12))
        v += step
    return ticks


def nice_byte_ticks(hi: float, count: int = 5) -> list[float]:
    """Ticks at round binary sizes (0, 2 GiB, 4 GiB, ...) up to ``hi``."""
    if not _finite(hi) or hi <= 0:
        return [0.0]
    unit = 1024 ** max(0, min(5, int(math.log(hi, 1024)))) if hi >= 1 else 1
    return [t * unit for t in nice_ticks(0.0, hi / unit, count)]


class _Frame:
    """Maps data coordinates to the plot area of a chart."""

    def __init__(
        self,
        width: int,
        height: int,
        x_range: tuple[float, float],
        y_range: tuple[float, float],
        left: int = 70,
        right: int = 16,
        top: float = 24,
        bottom: int = 36,
    ) -> None:
        self.width, self.height = width, height
        self.left, self.right, self.top, self.bottom = left, right, top, bottom
        self.x0, self.x1 = x_range
        self.y0, self.y1 = y_range
        if self.x1 <= self.x0:
            self.x1 = self.x0 + 1.0
        if self.y1 <= self.y0:
            self.y1 = self.y0 + 1.0

    def x(self, v: float) -> float:
        span = self.width - self.left - self.right
        return self.left + (v - self.x0) / (self.x1 - self.x0) * span

    def y(self, v: float) -> float:
        span = self.height - self.top - self.bottom
        return self.height - self.bottom - (v - self.y0) / (self.y1 - self.y0) * span


def _open_svg(f: _Frame, label: str, x_unit: str) -> list[str]:
    plot = f"{f.left},{f.top:.1f},{f.width - f.right},{f.height - f.bottom}"
    return [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{f.width}" height="{f.height}" '
            f'viewBox="0 0 {f.width} {f.height}" role="img" aria-label="{escape(label)}" '
            f'font-family="sans-serif" font-size="11" data-plot="{plot}" '
            f'data-y-max="{f.y1:.6g}" data-x-unit="{escape(x_unit)}">'
        ),
        f"<title>{escape(label)}</title>",
        f'<rect x="0" y="0" width="{f.width}" height="{f.height}" fill="#ffffff"/>',
    ]


def _axes(
    parts: list[str],
    f: _Frame,
    x_ticks: list[float],
    y_ticks: list[float],
    x_fmt: Formatter,
    y_fmt: Formatter,
    x_label: str,
) -> None:
    for t in y_ticks:
        y = f.y(t)
        parts.append(
            f'<line x1="{f.left}" y1="{y:.1f}" x2="{f.width - f.right}" y2="{y:.1f}" '
            'stroke="#eeeeee"/>'
        )
        parts.append(
            f'<text class="tick-y" data-value="{t:.6g}" x="{f.left - 6}" y="{y + 4:.1f}" '
            f'text-anchor="end" fill="#555555">{escape(y_fmt(t))}</text>'
        )
    base = f.height - f.bottom
    for t in x_ticks:
        x = f.x(t)
        parts.append(
            f'<text class="tick-x" data-value="{t:.6g}" x="{x:.1f}" y="{base + 16}" '
            f'text-anchor="middle" fill="#555555">{escape(x_fmt(t))}</text>'
        )
    parts.append(
        f'<line x1="{f.left}" y1="{base}" x2="{f.width - f.right}" y2="{base}" stroke="#333333"/>'
    )
    parts.append(
        f'<line x1="{f.left}" y1="{f.top:.1f}" x2="{f.left}" y2="{base}" stroke="#333333"/>'
    )
    if x_label:
        parts.append(
            f'<text class="axis-label" x="{(f.left + f.width - f.right) / 2:.1f}" '
            f'y="{f.height - 4}" text-anchor="middle" fill="#333333">{escape(x_label)}</text>'
        )


LegendEntry = tuple[str, str, bool]  # (label, colour, dashed)


def _legend_rows(entries: list[LegendEntry], x0: float, x_max: float) -> list[list[LegendEntry]]:
    """The legend's entries in rows that fit between x0 and x_max."""
    rows: list[list[LegendEntry]] = [[]]
    x = x0
    for entry in entries:
        width = 22 + text_width(entry[0])
        if rows[-1] and x + width > x_max:
            rows.append([])
            x = x0
        rows[-1].append(entry)
        x += width + 8
    return rows


def _legend(parts: list[str], rows: list[list[LegendEntry]], x0: float, y: float) -> None:
    for row in rows:
        x = x0
        for label, colour, dashed in row:
            dash = ' stroke-dasharray="5,3"' if dashed else ""
            parts.append(
                f'<line x1="{x:.1f}" y1="{y - 4:.1f}" x2="{x + 18:.1f}" y2="{y - 4:.1f}" '
                f'stroke="{colour}" stroke-width="3"{dash}/>'
            )
            parts.append(
                f'<text class="legend" x="{x + 22:.1f}" y="{y:.1f}" fill="#333333">'
                f"{escape(label)}</text>"
            )
            x += 30 + text_width(label)
        y += LEGEND_ROW


def _top_for_legend(rows: list[list[LegendEntry]]) -> float:
    """The plot area's top: below the legend's rows and a gap."""
    return 24 + LEGEND_ROW * (len(rows) - 1)


def _boxes_overlap(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _watermarks(
    parts: list[str], f: _Frame, hlines: Sequence[tuple[str, float]], y_fmt: Formatter
) -> None:
    """Dashed lines at ``hlines`` [(label, value)], each labelled just above or below it, at the
    plot's right or left end, wherever its label touches no other. A watermark on a line drawn
    already, or with no such place (within a text line of others), is left out: the one drawn
    (the first the report lists) stands for it."""
    placed: list[Box] = []
    lines: list[float] = []
    for label, value in hlines:
        if not _finite(value):
            continue
        y = f.y(value)
        if any(abs(y - other) < 2 for other in lines):
            continue  # the same line as one drawn: that one stands for both
        text = f"{label} {y_fmt(value)}"
        spot = _label_spot(f, y, text_width(text), placed)
        if spot is None:
            continue
        x, base, anchor, box = spot
        placed.append(box)
        lines.append(y)
        parts.append(
            f'<line class="watermark" x1="{f.left}" y1="{y:.1f}" '
            f'x2="{f.width - f.right}" y2="{y:.1f}" stroke="{WATERMARK_COLOUR}" '
            'stroke-width="2" stroke-dasharray="6,4"/>'
        )
        parts.append(
            f'<text class="watermark-label" x="{x:.1f}" y="{base:.1f}" text-anchor="{anchor}" '
            f'fill="{WATERMARK_COLOUR}">{escape(text)}</text>'
        )


def _label_spot(
    f: _Frame, y: float, width: float, placed: list[Box]
) -> tuple[float, float, str, Box] | None:
    """Where a watermark's label at line height ``y`` fits inside the plot without touching the
    labels ``placed``: (x, baseline, text-anchor, box), or None."""
    right, left = f.width - f.right - 4, f.left + 4
    for base in (y - 4, y + 4 + TEXT_HEIGHT):  # above the line, else below it
        if base - TEXT_HEIGHT < f.top or base + 3 > f.height - f.bottom:
            continue
        for x, anchor, x0 in ((right, "end", right - width), (left, "start", left)):
            box = (x0, base - TEXT_HEIGHT, x0 + width, base + 3)
            if not any(_boxes_overlap(box, other) for other in placed):
                return x, base, anchor, box
    return None


def line_chart(
    series: Sequence[Series],
    *,
    title: str,
    y_fmt: Formatter,
    x_fmt: Formatter = lambda v: f"{v:g} s",
    x_label: str = "time (s)",
    x_unit: str = "s",
    integer_x: bool = False,
    hlines: Sequence[tuple[str, float]] = (),
    vlines: Sequence[float] = (),
    byte_axis: bool = False,
    width: int = 720,
    height: int = 260,
) -> str:
    """A line chart of ``series`` [(id, label, [(x, y), ...])], all on one x axis (``x_unit``;
    ``integer_x`` for steps), with dashed watermarks ``hlines`` and step marks ``vlines``; ""
    when there is nothing to draw."""
    prepared = [(sid, label, decimate(points)) for sid, label, points in series]
    prepared = [(sid, label, pts) for sid, label, pts in prepared if pts]
    xs = [x for _, _, pts in prepared for x, _ in pts]
    ys = [y for _, _, pts in prepared for _, y in pts] + [v for _, v in hlines if _finite(v)]
    if not xs or max(ys) <= 0:
        return ""
    y_hi = max(ys) * 1.1  # room above the highest line for its watermark's label
    y_ticks = nice_byte_ticks(y_hi) if byte_axis else nice_ticks(0.0, y_hi)
    marks_shown = any(_finite(v) and min(xs) <= v <= max(xs) for v in vlines)
    legend = [
        (label, SERIES_COLOURS[i % len(SERIES_COLOURS)], False)
        for i, (_, label, _) in enumerate(prepared)
    ] + ([("step", STEP_MARK_COLOUR, False)] if marks_shown else [])
    rows = _legend_rows(legend, 74, width - 16)
    f = _Frame(
        width,
        height,
        (min(xs), max(xs)),
        (0.0, max(y_hi, y_ticks[-1])),
        top=_top_for_legend(rows),
    )
    parts = _open_svg(f, title, x_unit)
    _axes(parts, f, nice_ticks(f.x0, f.x1, integer=integer_x), y_ticks, x_fmt, y_fmt, x_label)
    _step_marks(parts, f, vlines)
    for i, (sid, _, pts) in enumerate(prepared):
        colour = SERIES_COLOURS[i % len(SERIES_COLOURS)]
        path = " ".join(f"{f.x(x):.1f},{f.y(y):.1f}" for x, y in pts)
        parts.append(
            f'<polyline class="series" data-series="{escape(sid)}" points="{path}" fill="none" '
            f'stroke="{colour}" stroke-width="2.5" stroke-linejoin="round"/>'
        )
    _watermarks(parts, f, hlines, y_fmt)
    _legend(parts, rows, f.left + 4, 14)
    parts.append("</svg>")
    return "".join(parts)


def _step_marks(parts: list[str], f: _Frame, vlines: Sequence[float]) -> None:
    marks = [v for v in vlines if _finite(v) and f.x0 <= v <= f.x1]
    if len(marks) > MAX_STEP_MARKS:  # keep every n-th mark: the cadence stays visible
        stride = math.ceil(len(marks) / MAX_STEP_MARKS)
        marks = marks[::stride]
    for v in marks:
        x = f.x(v)
        parts.append(
            f'<line class="step-mark" x1="{x:.1f}" y1="{f.top:.1f}" x2="{x:.1f}" '
            f'y2="{f.height - f.bottom}" stroke="{STEP_MARK_COLOUR}" stroke-width="1" '
            'stroke-opacity="0.6"/>'
        )


def stacked_bars(
    labels: Sequence[str],
    components: Sequence[tuple[str, Sequence[float]]],
    *,
    title: str,
    y_fmt: Formatter,
    x_label: str = "step",
    byte_axis: bool = False,
    width: int = 720,
    height: int = 260,
) -> str:
    """One bar per label, stacked from ``components`` [(name, values per label)]; "" when there
    is nothing to draw (no bars, or every part zero)."""
    n = len(labels)
    if n == 0 or not components:
        return ""
    first = max(0, n - MAX_BARS)  # the most recent steps when there are many
    labels = [str(label) for label in list(labels)[first:]]
    comps = [
        (name, [max(0.0, float(v)) if _finite(v) else 0.0 for v in list(vals)[first:]])
        for name, vals in components
    ]
    totals = [sum(vals[i] for _, vals in comps) for i in range(len(labels))]
    if max(totals) <= 0:
        return ""
    top = max(totals) * 1.05
    y_ticks = nice_byte_ticks(top) if byte_axis else nice_ticks(0.0, top)
    colours = [STACK_COLOURS[i % len(STACK_COLOURS)] for i in range(len(comps))]
    rows = _legend_rows(
        [(name, colour, False) for (name, _), colour in zip(comps, colours)], 74, width - 16
    )
    f = _Frame(
        width,
        height,
        (0.0, float(len(labels))),
        (0.0, max(top, y_ticks[-1])),
        top=_top_for_legend(rows),
    )
    parts = _open_svg(f, title, "label")
    if len(labels) == 1 and labels[0] == x_label:
        x_label = ""  # one bar named as its axis: say it once
    x_ticks, x_fmt = _bar_ticks(f, labels)
    _axes(parts, f, x_ticks, y_ticks, x_fmt, y_fmt, x_label)
    bar_w = max(1.0, (f.x(1.0) - f.x(0.0)) * 0.8)
    for i in range(len(labels)):
        base = 0.0
        for (name, vals), colour in zip(comps, colours):
            v = vals[i]
            if v <= 0:
                continue
            y_top, y_bottom = f.y(base + v), f.y(base)
            parts.append(
                f'<rect class="bar" x="{f.x(i + 0.1):.1f}" y="{y_top:.1f}" '
                f'width="{bar_w:.1f}" height="{max(0.5, y_bottom - y_top):.1f}" '
                f'fill="{colour}"><title>{escape(labels[i])} {escape(name)}: '
                f"{escape(y_fmt(v))}</title></rect>"
            )
            base += v
    _legend(parts, rows, f.left + 4, 14)
    parts.append("</svg>")
    return "".join(parts)


def _bar_ticks(f: _Frame, labels: list[str]) -> tuple[list[float], Formatter]:
    """Tick positions under the bars and their labels: every n-th bar, n chosen so that no two
    labels touch and at most MAX_X_TICK_LABELS show."""
    per_bar = f.x(1.0) - f.x(0.0)
    widest = max(text_width(label) for label in labels) + 8
    stride = max(1, math.ceil(len(labels) / MAX_X_TICK_LABELS), math.ceil(widest / per_bar))
    label_at = {i + 0.5: labels[i] for i in range(0, len(labels), stride)}
    return list(label_at), lambda v: label_at.get(v, "")
