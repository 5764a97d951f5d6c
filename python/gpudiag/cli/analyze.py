# SPDX-License-Identifier: Apache-2.0
"""``gpudiag analyze``: recordings, Kineto traces and torch memory snapshots to a diagnosis."""

from __future__ import annotations

import argparse

from gpudiag._analyze import analyze
from gpudiag._job import analyze_job
from gpudiag.cli._common import ProgressBar, add_analysis_options, add_report_options, emit_report

NAME = "analyze"
HELP = (
    "diagnose recordings, Kineto traces (.json/.json.gz), Nsight Systems SQLite exports or "
    "torch memory snapshots"
)
DESCRIPTION = """\
Diagnose one job from files: gpudiag recordings (.gpudiag), PyTorch profiler traces (Kineto JSON,
plain or gzip; one per rank for a multi-rank job), Nsight Systems reports exported to SQLite
(nsys export --type sqlite) or torch memory snapshots (torch.cuda.memory._dump_snapshot). A FILE
may be a folder, a tar archive (.tar, .tar.gz) or a glob pattern. Files of one process (a trace
and a snapshot of it) combine into one report. The format is told from the content, not the
name."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("inputs", nargs="+", metavar="FILE", help="files of one job")
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="analyse the files on N local processes (default 1: in this process)",
    )
    add_analysis_options(p)
    add_report_options(p)


def run(args: argparse.Namespace) -> int:
    if args.jobs > 1:
        report = analyze_job(args.inputs, jobs=args.jobs, window=args.window, rank=args.rank)
        return emit_report(report, args)
    with ProgressBar.for_args(args) as progress:
        report = analyze(args.inputs, window=args.window, rank=args.rank, progress=progress)
    return emit_report(report, args)
