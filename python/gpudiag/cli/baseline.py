# SPDX-License-Identifier: Apache-2.0
"""``gpudiag baseline``: keep a run's report under a name, and list the names kept."""

from __future__ import annotations

import argparse
import json
import sys

from gpudiag import _core
from gpudiag._baseline import (
    DEFAULT_DIR,
    ENV_DIR,
    baseline_dir,
    baseline_path,
    list_baselines,
    save_baseline,
)
from gpudiag._compare import report_of
from gpudiag._errors import EXIT_INPUT, EXIT_OK, InvalidArgumentError
from gpudiag._report import Report
from gpudiag.cli._common import nothing_observed

NAME = "baseline"
HELP = "keep a run's report under a name for `gpudiag compare`, or list the names kept"
DESCRIPTION = f"""\
A baseline is a run's report (never its trace) kept as NAME.json in a folder: --dir, else
${ENV_DIR}, else ./{DEFAULT_DIR}. Wherever `gpudiag compare` takes an input, NAME stands for it
(write ./NAME for a file of that name).

  gpudiag baseline save main trace.json.gz
  gpudiag baseline save main trace.json.gz --replace      # after an intended change
  gpudiag baseline list
  gpudiag compare main new_trace.json.gz --fail-on regression"""


def add_dir_option(p: argparse.ArgumentParser, flag: str = "--dir") -> None:
    p.add_argument(
        flag,
        dest="baseline_dir",
        metavar="DIR",
        default=None,
        help=f"the baselines' folder (default: ${ENV_DIR}, else ./{DEFAULT_DIR})",
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="action", metavar="ACTION", parser_class=type(p))
    actions.required = True
    save = actions.add_parser(
        "save", help="analyse INPUT and keep its report as baseline NAME", description=DESCRIPTION
    )
    save.add_argument("name", metavar="NAME", help="the baseline's name")
    save.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="what `gpudiag analyze` reads (one job), or a baseline's name",
    )
    save.add_argument(
        "--replace", action="store_true", help="overwrite baseline NAME when it exists"
    )
    save.add_argument(
        "--window",
        choices=list(_core.AnalysisWindow.__members__),
        default="steps",
        help="time window of the analysis (as `gpudiag analyze --window`)",
    )
    save.add_argument(
        "--allow-partial",
        action="store_true",
        help=f"keep a report of input read only in part (refused with exit code {EXIT_INPUT} "
        "otherwise)",
    )
    add_dir_option(save)
    listing = actions.add_parser("list", help="list the baselines kept", description=DESCRIPTION)
    listing.add_argument("--format", choices=("text", "json"), default="text")
    add_dir_option(listing)


def run(args: argparse.Namespace) -> int:
    if args.action == "save":
        return _save(args)
    return _list(args)


def _save(args: argparse.Namespace) -> int:
    # The name, and a baseline it would overwrite, are checked before the analysis runs.
    if baseline_path(args.name, args.baseline_dir).exists() and not args.replace:
        raise InvalidArgumentError(
            f"baseline {args.name!r} exists in {baseline_dir(args.baseline_dir)}: --replace "
            "overwrites it"
        )
    # One input may itself be a baseline: `baseline save release main` keeps main as release.
    side = args.inputs[0] if len(args.inputs) == 1 else args.inputs
    report = report_of(side, window=args.window, directory=args.baseline_dir)
    # A baseline of part of a run, or of nothing, would pass later runs against data not seen.
    if not report.complete and not args.allow_partial:
        print(
            f"gpudiag: only part of the input could be read, so it was not kept as baseline "
            f"{args.name!r} (--allow-partial keeps it):\n  "
            + "\n  ".join(report.input.get("missing", [])),
            file=sys.stderr,
        )
        return EXIT_INPUT
    if nothing_observed(report):
        print(
            f"gpudiag: the input holds 0 events, so it was not kept as baseline {args.name!r}",
            file=sys.stderr,
        )
        return EXIT_INPUT
    path = save_baseline(args.name, report, args.baseline_dir, replace=args.replace)
    print(f"baseline {args.name!r} kept in {path}: {report.headline}")
    return EXIT_OK


def _list(args: argparse.Namespace) -> int:
    folder = baseline_dir(args.baseline_dir)
    rows = []
    for b in list_baselines(folder):
        try:
            about = _about(b.report())
        except Exception as e:  # noqa: BLE001 - one unreadable file must not hide the others
            about = {"error": f"unreadable: {e}"}
        rows.append({"name": b.name, "path": str(b.path), "saved": b.saved.isoformat(), **about})
    if args.format == "json":
        print(json.dumps({"dir": str(folder), "baselines": rows}, indent=1))
    elif not rows:
        print(f"no baselines in {folder}")
    else:
        print(f"baselines in {folder}:")
        width = max(len(r["name"]) for r in rows)
        for r in rows:
            saved = r["saved"][:19].replace("T", " ")
            print(f"  {r['name']:<{width}}  {saved} UTC  {r.get('source') or r.get('error', '')}")
    return EXIT_OK


def _about(report: Report) -> dict[str, str]:
    """What a listing says of a baseline: the input it was made of, and its headline."""
    source = report.source
    described = source.get("description") or source.get("path") or ""
    return {"source": str(described), "headline": report.headline}
