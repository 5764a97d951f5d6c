# SPDX-License-Identifier: Apache-2.0
"""``gpudiag compare``: did a change help? One verdict on two runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpudiag import _core
from gpudiag._baseline import DEFAULT_DIR, ENV_DIR
from gpudiag._compare import compare, verdict_names
from gpudiag._errors import EXIT_OK, EXIT_VERDICT
from gpudiag.cli.baseline import add_dir_option

NAME = "compare"
HELP = "compare two runs (traces, snapshots, recordings, reports or baselines): one verdict"
DESCRIPTION = f"""\
Compares two runs of one program and says whether the change between them helped: improvement,
regression, mixed, unchanged or inconclusive, for step time, GPU time, device memory and card
health. Each figure is judged against the runs' own step-to-step noise, the verdict names the
few figures that decided it, and runs that cannot be compared one to one (another GPU, another
software stack, another process on the GPU, throttling in one run only, too few steps) say why.

BEFORE and AFTER are each what `gpudiag analyze` reads (a trace, a folder or quoted glob of rank
files, a snapshot, a recording, a saved report) or the name of a baseline kept with `gpudiag
baseline save` (in --baseline-dir, else ${ENV_DIR}, else ./{DEFAULT_DIR}; write ./NAME for a
file of that name).

  gpudiag compare before.json.gz after.json.gz
  gpudiag compare main after.json.gz --fail-on regression      # CI: exit {EXIT_VERDICT} on a regression
  gpudiag compare main after.json.gz --output compare.html"""

_FORMATS = ("text", "json", "html")


def _verdicts(text: str) -> list[str]:
    """--fail-on's value: verdicts, comma-separated."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in verdict_names()]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"not a verdict: {text!r} (choose from {', '.join(verdict_names())})"
        )
    return names


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("before", metavar="BEFORE", help="the run before the change, or a baseline")
    p.add_argument("after", metavar="AFTER", help="the run after the change, or a baseline")
    p.add_argument(
        "--format",
        choices=_FORMATS,
        default=None,
        help="text (default), the JSON comparison, or a self-contained HTML page "
        "(default with --output: by its suffix)",
    )
    p.add_argument(
        "--output", metavar="FILE", help="write the comparison to FILE instead of stdout"
    )
    p.add_argument(
        "--fail-on",
        type=_verdicts,
        action="extend",
        default=[],
        metavar="VERDICT",
        help=f"exit with {EXIT_VERDICT} when the verdict is one of these ("
        f"{', '.join(verdict_names())}; repeat or separate with commas), e.g. regression",
    )
    add_dir_option(p, "--baseline-dir")
    p.add_argument(
        "--window",
        choices=list(_core.AnalysisWindow.__members__),
        default="steps",
        help="time window of the analysis of inputs that are not saved reports",
    )


def _format(args: argparse.Namespace) -> str:
    if args.format is not None:
        return str(args.format)
    suffix = Path(args.output).suffix.lower() if args.output else ""
    return {".json": "json", ".html": "html", ".htm": "html"}.get(suffix, "text")


def run(args: argparse.Namespace) -> int:
    comparison = compare(
        args.before, args.after, window=args.window, baseline_dir=args.baseline_dir
    )
    chosen = _format(args)
    if chosen == "json":
        text = comparison.to_json() + "\n"
    elif chosen == "html":
        text = comparison.to_html(full_page=True)
    else:
        text = comparison.text if comparison.text.endswith("\n") else comparison.text + "\n"
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        print(comparison.headline)
    else:
        sys.stdout.write(text)
    if comparison.verdict in args.fail_on:
        print(
            f"gpudiag: the verdict is {comparison.verdict} (--fail-on): exit code {EXIT_VERDICT}",
            file=sys.stderr,
        )
        return EXIT_VERDICT
    return EXIT_OK
