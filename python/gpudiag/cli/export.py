# SPDX-License-Identifier: Apache-2.0
"""``gpudiag export``: a recording or trace as a Chrome trace, or its diagnosis as Prometheus
text."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpudiag import _core
from gpudiag._analyze import analyze, detect_format
from gpudiag._errors import EXIT_INPUT, FailedPreconditionError
from gpudiag._report import Report
from gpudiag.cli._common import ProgressBar, add_analysis_options

NAME = "export"
HELP = "convert to a Chrome/Perfetto trace, or the diagnosis to Prometheus text"
DESCRIPTION = """\
  gpudiag export run.gpudiag --chrome run.trace.json    a timeline for ui.perfetto.dev or
                                                       chrome://tracing, with memory tracks
  gpudiag export run.gpudiag --prometheus metrics.prom  the diagnosis for node_exporter's
                                                       textfile collector ('-': stdout)
  gpudiag export a.json b.json --prometheus -          reports saved with --json, together"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "inputs",
        nargs="+",
        metavar="FILE",
        help="recordings, traces, snapshots, or (for --prometheus) saved JSON reports",
    )
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--chrome", metavar="PATH", help="write a Chrome trace (JSON) here")
    target.add_argument(
        "--prometheus",
        metavar="PATH",
        help="write the diagnosis as Prometheus text here ('-': stdout)",
    )
    p.add_argument(
        "--host-labels",
        choices=("both", "hostname", "Hostname"),
        default="both",
        help="the host label(s) of --prometheus: dcgm-exporter writes `hostname` since 4.8.3 and "
        "`Hostname` before (default: both)",
    )
    add_analysis_options(p)


def run(args: argparse.Namespace) -> int:
    from gpudiag.cli import UsageError

    if args.prometheus is not None:
        from gpudiag import prometheus

        if all(detect_format(p) == "report_json" for p in args.inputs):
            # Saved reports (of different runs or hosts): each keeps its own series.
            text = prometheus.exposition(
                [Report.load(p) for p in args.inputs], host_labels=args.host_labels
            )
        else:
            with ProgressBar.for_args(args) as progress:
                report = analyze(args.inputs, window=args.window, rank=args.rank, progress=progress)
            text = prometheus.exposition(report, host_labels=args.host_labels)
        if args.prometheus == "-":
            sys.stdout.write(text)
        else:
            Path(args.prometheus).write_text(text, encoding="utf-8")
        return 0
    if args.chrome == "-":
        raise UsageError("gpudiag export --chrome needs a file name")
    options = _core.AnalysisOptions()
    options.rank = args.rank
    options.window = getattr(_core.AnalysisWindow, args.window)
    try:
        _core.export_chrome_trace([str(p) for p in args.inputs], args.chrome, options)
    except FailedPreconditionError as e:
        # An input with nothing to draw: the library wrote no trace and says what the input held.
        # That is about the input, not the command line, so it exits with the input-error code.
        print(f"gpudiag: error: {e}", file=sys.stderr)
        return EXIT_INPUT
    print(f"gpudiag: wrote {args.chrome} (open it in ui.perfetto.dev)", file=sys.stderr)
    return 0
