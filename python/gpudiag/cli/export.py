# SPDX-License-Identifier: Apache-2.0
"""``gpudiag export``: a recording or trace as a Chrome trace, or its diagnosis as Prometheus
text."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpudiag import _core
from gpudiag._analyze import analyze
from gpudiag.cli._common import ProgressBar, add_analysis_options

NAME = "export"
HELP = "convert to a Chrome/Perfetto trace, or the diagnosis to Prometheus text"
DESCRIPTION = """\
  gpudiag export run.gpudiag --to chrome -o run.trace.json   open in ui.perfetto.dev or
                                                            chrome://tracing
  gpudiag export run.gpudiag --to prometheus -o metrics.prom for node_exporter's textfile
                                                            collector ('-o -': stdout)"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("inputs", nargs="+", metavar="FILE", help="recordings, traces or snapshots")
    p.add_argument("--to", required=True, choices=("chrome", "prometheus"), help="output format")
    p.add_argument("-o", "--output", required=True, metavar="PATH", help="output file ('-': "
                   "stdout, prometheus only)")
    add_analysis_options(p)


def run(args: argparse.Namespace) -> int:
    from gpudiag.cli import UsageError

    if args.to == "prometheus":
        from gpudiag import prometheus

        with ProgressBar.for_args(args) as progress:
            report = analyze(args.inputs, window=args.window, rank=args.rank, progress=progress)
        text = prometheus.exposition(report)
        if args.output == "-":
            sys.stdout.write(text)
        else:
            Path(args.output).write_text(text, encoding="utf-8")
        return 0
    if args.output == "-":
        raise UsageError("gpudiag export --to chrome needs a file for -o")
    options = _core.AnalysisOptions()
    options.rank = args.rank
    with ProgressBar.for_args(args) as progress:
        count = _core.export_chrome_trace([str(p) for p in args.inputs], args.output, options,
                                          progress)
    print(f"gpudiag: wrote {count} trace events to {args.output}", file=sys.stderr)
    return 0
