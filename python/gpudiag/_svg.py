# SPDX-License-Identifier: Apache-2.0
"""Self-contained SVG charts (no scripts, no fonts or files from elsewhere) for report HTML.

Two charts cover what reports plot: a line chart over time with horizontal watermarks and
vertical marks, and a stacked bar chart of the parts of a whole (per-step time by cause). Inputs are decimated so a
long run still renders as a few kilobytes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from typing import Callable

# Colours by role. The parts of a stacked bar take STACK_COLOURS in the order the report lists
# them, so a partition the analysis always writes in the same order keeps its colours.
SERIES_COLOURS = ("#1f77b4", "#ff7f0e", "#9467bd", "#17becf", "#8c564b", "#bcbd22")
WATERMARK_COLOUR = "#d62728"
STEP_MARK_COLOUR = "#9e9e9e"
STACK_COLOURS = ("#2ca02c", "#e377c2", "#bcbd22", "#7f7f7f", "#9467bd", "#17becf", "#8c564b")

MAX_POINTS = 600  # per series: beyond this, min/max per bucket keeps spikes visible
MAX_STEP_MARKS = 150
MAX_BARS = 120

Formatter = Callable[[float], str]


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


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi]."""
    if not (_finite(lo) and _finite(hi)) or hi <= lo:
        return [lo]
    raw = (hi - lo) / max(1, count)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
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
        top: int = 24,
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


def _open_svg(width: int, height: int, label: str) -> list[str]:
    return [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}" '
            'font-family="sans-serif" font-size="11">'
        ),
        f"<title>{escape(label)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
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
            f'<text x="{f.left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#555555">'
            f"{escape(y_fmt(t))}</text>"
        )
    base = f.height - f.bottom
    for t in x_ticks:
        x = f.x(t)
        parts.append(
            f'<text x="{x:.1f}" y="{base + 14}" text-anchor="middle" fill="#555555">'
            f"{escape(x_fmt(t))}</text>"
        )
    parts.append(
        f'<line x1="{f.left}" y1="{base}" x2="{f.width - f.right}" y2="{base}" stroke="#333333"/>'
    )
    parts.append(f'<line x1="{f.left}" y1="{f.top}" x2="{f.left}" y2="{base}" stroke="#333333"/>')
    if x_label:
        parts.append(
            f'<text x="{(f.left + f.width - f.right) / 2:.1f}" y="{f.height - 4}" '
            f'text-anchor="middle" fill="#333333">{escape(x_label)}</text>'
        )


def _legend(parts: list[str], entries: list[tuple[str, str, bool]], x: float, y: float) -> None:
    """Entries of (label, colour, dashed) in one row from (x, y)."""
    for label, colour, dashed in entries:
        dash = ' stroke-dasharray="5,3"' if dashed else ""
        parts.append(
            f'<line x1="{x:.1f}" y1="{y - 4:.1f}" x2="{x + 18:.1f}" y2="{y - 4:.1f}" '
            f'stroke="{colour}" stroke-width="3"{dash}/>'
        )
        parts.append(f'<text x="{x + 22:.1f}" y="{y:.1f}" fill="#333333">{escape(label)}</text>')
        x += 30 + 6.2 * len(label)


def line_chart(
    series: Sequence[tuple[str, Sequence[tuple[float, float]]]],
    *,
    title: str,
    y_fmt: Formatter,
    x_fmt: Formatter = lambda v: f"{v:g} s",
    x_label: str = "time (s)",
    hlines: Sequence[tuple[str, float]] = (),
    vlines: Sequence[float] = (),
    byte_axis: bool = False,
    width: int = 720,
    height: int = 260,
) -> str:
    """A line chart of ``series`` [(label, [(x, y), ...])] with dashed watermarks ``hlines`` and
    step marks ``vlines``."""
    prepared = [(label, decimate(points)) for label, points in series]
    prepared = [(label, pts) for label, pts in prepared if pts]
    xs = [x for _, pts in prepared for x, _ in pts]
    ys = [y for _, pts in prepared for _, y in pts] + [v for _, v in hlines if _finite(v)]
    if not xs:
        return ""
    y_hi = max(ys) * 1.08 if ys and max(ys) > 0 else 1.0
    y_ticks = nice_byte_ticks(y_hi) if byte_axis else nice_ticks(0.0, y_hi)
    f = _Frame(width, height, (min(xs), max(xs)), (0.0, max(y_hi, y_ticks[-1])))
    parts = _open_svg(width, height, title)
    _axes(parts, f, nice_ticks(f.x0, f.x1), y_ticks, x_fmt, y_fmt, x_label)
    marks = [v for v in vlines if _finite(v) and f.x0 <= v <= f.x1]
    if len(marks) > MAX_STEP_MARKS:  # keep every n-th mark: the cadence stays visible
        stride = math.ceil(len(marks) / MAX_STEP_MARKS)
        marks = marks[::stride]
    for v in marks:
        x = f.x(v)
        parts.append(
            f'<line class="step-mark" x1="{x:.1f}" y1="{f.top}" x2="{x:.1f}" '
            f'y2="{f.height - f.bottom}" stroke="{STEP_MARK_COLOUR}" stroke-width="1" '
            'stroke-opacity="0.6"/>'
        )
    legend: list[tuple[str, str, bool]] = []
    for i, (label, pts) in enumerate(prepared):
        colour = SERIES_COLOURS[i % len(SERIES_COLOURS)]
        path = " ".join(f"{f.x(x):.1f},{f.y(y):.1f}" for x, y in pts)
        parts.append(
            f'<polyline class="series" points="{path}" fill="none" stroke="{colour}" '
            'stroke-width="2.5" stroke-linejoin="round"/>'
        )
        legend.append((label, colour, False))
    for label, value in hlines:
        if not _finite(value):
            continue
        y = f.y(value)
        parts.append(
            f'<line class="watermark" x1="{f.left}" y1="{y:.1f}" '
            f'x2="{f.width - f.right}" y2="{y:.1f}" stroke="{WATERMARK_COLOUR}" '
            'stroke-width="2" stroke-dasharray="6,4"/>'
        )
        parts.append(
            f'<text x="{f.width - f.right - 4}" y="{y - 4:.1f}" text-anchor="end" '
            f'fill="{WATERMARK_COLOUR}">{escape(label)} {escape(y_fmt(value))}</text>'
        )
    if marks:
        legend.append(("step", STEP_MARK_COLOUR, False))
    _legend(parts, legend, f.left + 4, 14)
    parts.append("</svg>")
    return "".join(parts)


def stacked_bars(
    labels: Sequence[str],
    components: Sequence[tuple[str, Sequence[float]]],
    *,
    title: str,
    y_fmt: Formatter,
    x_label: str = "step",
    width: int = 720,
    height: int = 260,
) -> str:
    """One bar per label, stacked from ``components`` [(name, values per label)]."""
    n = len(labels)
    if n == 0 or not components:
        return ""
    first = max(0, n - MAX_BARS)  # the most recent steps when there are many
    labels = list(labels)[first:]
    comps = [
        (name, [max(0.0, float(v)) if _finite(v) else 0.0 for v in list(vals)[first:]])
        for name, vals in components
    ]
    totals = [sum(vals[i] for _, vals in comps) for i in range(len(labels))]
    top = max(totals) if totals and max(totals) > 0 else 1.0
    y_ticks = nice_ticks(0.0, top * 1.05)
    f = _Frame(width, height, (0.0, float(len(labels))), (0.0, max(top * 1.05, y_ticks[-1])))
    parts = _open_svg(width, height, title)
    stride = max(1, math.ceil(len(labels) / 12))
    tick_positions = [i + 0.5 for i in range(0, len(labels), stride)]
    label_at = {i + 0.5: labels[i] for i in range(0, len(labels), stride)}
    _axes(parts, f, tick_positions, y_ticks, lambda v: str(label_at.get(v, "")), y_fmt, x_label)
    bar_w = max(1.0, (f.x(1.0) - f.x(0.0)) * 0.8)
    colours = [STACK_COLOURS[i % len(STACK_COLOURS)] for i in range(len(comps))]
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
                f'fill="{colour}"><title>{escape(str(labels[i]))} {escape(name)}: '
                f"{escape(y_fmt(v))}</title></rect>"
            )
            base += v
    _legend(
        parts, [(name, colour, False) for (name, _), colour in zip(comps, colours)], f.left + 4, 14
    )
    parts.append("</svg>")
    return "".join(parts)
