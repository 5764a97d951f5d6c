# SPDX-License-Identifier: Apache-2.0
"""Options and output shared by the subcommands."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from gpudiag import _core
from gpudiag._errors import EXIT_FINDINGS, EXIT_INPUT, EXIT_OK
from gpudiag._format import format_bytes
from gpudiag._report import Report

if TYPE_CHECKING:  # typing.Self is 3.11+; typing_extensions is only needed by type checkers
    from typing_extensions import Self

SEVERITIES = tuple(_core.Severity.__members__)  # lowest first, as the C++ enum


def add_report_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="what to print: the plain-text diagnosis (default) or the JSON report",
    )
    p.add_argument("--json", metavar="PATH", help="also write the report as JSON to PATH")
    p.add_argument(
        "--html",
        metavar="PATH",
        help="also write the report as a self-contained HTML page with plots",
    )
    p.add_argument(
        "--fail-on",
        choices=SEVERITIES,
        default=None,
        help="exit with 1 when a finding at this severity or above is found",
    )
    p.add_argument(
        "--allow-partial",
        action="store_true",
        help="accept input that could be read only in part (a file cut short, "
        "damaged parts, a rank missing): the report says what is missing either "
        f"way, but without this the exit code is {EXIT_INPUT}",
    )


def add_analysis_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--window",
        choices=list(_core.AnalysisWindow.__members__),
        default="steps",
        help="time window: complete steps only (default), Holistic Trace Analysis' "
        "window, or everything",
    )
    p.add_argument("--rank", type=int, default=-1, help="with several rank files, only this rank")
    p.add_argument(
        "--progress",
        choices=("auto", "always", "never"),
        default="auto",
        help="progress bar on stderr for long imports (auto: when stderr is a terminal)",
    )


def emit_report(report: Report, args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Prints/writes the report as asked and returns the exit code for --fail-on."""
    out = out if out is not None else sys.stdout
    if args.format == "json" or args.json == "-":
        out.write(report.to_json() + "\n")
    else:
        text = report.summary()
        out.write(text if text.endswith("\n") else text + "\n")
    if args.json and args.json != "-":
        Path(args.json).write_text(report.to_json() + "\n", encoding="utf-8")
    if getattr(args, "html", None):
        Path(args.html).write_text(report.to_html(full_page=True), encoding="utf-8")
    allow_partial = bool(getattr(args, "allow_partial", False))
    if not report.complete and not allow_partial:
        print(
            f"gpudiag: only part of the input could be read (see the report); exit code "
            f"{EXIT_INPUT} (--allow-partial accepts it)",
            file=sys.stderr,
        )
    elif nothing_observed(report):
        print(
            "gpudiag: nothing was observed: the report holds 0 events (no step, input wait, "
            "phase or GPU activity was recorded), so it is no all-clear",
            file=sys.stderr,
        )
    return exit_code_for(report, args.fail_on, allow_partial)


def nothing_observed(report: Report) -> bool:
    """A report of 0 events: no input to diagnose, which is no all-clear."""
    return int(report.input.get("events", 0)) == 0


def exit_code_for(report: Report, fail_on: str | None, allow_partial: bool = False) -> int:
    # A diagnosis of part of the input is no all-clear: partial input fails unless accepted.
    if not report.complete and not allow_partial:
        return EXIT_INPUT
    if nothing_observed(report):
        return EXIT_INPUT
    if fail_on is None:
        return EXIT_OK
    threshold = SEVERITIES.index(fail_on)
    worst = report.worst_severity()
    if worst is not None and SEVERITIES.index(worst) >= threshold:
        return EXIT_FINDINGS
    return EXIT_OK


class ProgressBar:
    """A one-line progress bar on a terminal, shown only once an import takes over half a
    second (short ones stay quiet) and redrawn at most ten times a second."""

    DELAY_S = 0.5
    PERIOD_S = 0.1
    WIDTH = 30

    def __init__(self, stream: TextIO, enabled: bool, label: str = "reading") -> None:
        self._stream = stream
        self._enabled = enabled
        self._label = label
        self._started = time.monotonic()
        self._last = 0.0
        self._shown = False

    @classmethod
    def for_args(cls, args: argparse.Namespace, stream: TextIO | None = None) -> ProgressBar:
        stream = stream if stream is not None else sys.stderr
        mode = getattr(args, "progress", "auto")
        enabled = mode == "always" or (mode == "auto" and stream.isatty())
        return cls(stream, enabled)

    def __call__(self, done: int, total: int) -> None:
        if not self._enabled:
            return
        now = time.monotonic()
        if now - self._started < self.DELAY_S and not self._shown:
            return
        if now - self._last < self.PERIOD_S and done < total:
            return
        self._last = now
        self._shown = True
        fraction = min(1.0, done / total) if total > 0 else 0.0
        filled = int(fraction * self.WIDTH)
        bar = "#" * filled + "." * (self.WIDTH - filled)
        self._stream.write(
            f"\r{self._label} [{bar}] {fraction * 100:5.1f} % "
            f"{format_bytes(done)} / {format_bytes(total)}"
        )
        self._stream.flush()

    def close(self) -> None:
        if self._shown:
            self._stream.write("\n")
            self._stream.flush()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
