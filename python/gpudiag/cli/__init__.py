# SPDX-License-Identifier: Apache-2.0
"""The ``gpudiag`` command line: one module per subcommand (run, analyze, export, whatif, demo)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gpudiag._errors import (
    EXIT_FINDINGS,
    EXIT_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    GpudiagError,
)

EXIT_CODES_HELP = f"""\
exit codes:
  {EXIT_OK}    success (and, with --fail-on, no finding at that severity or above)
  {EXIT_FINDINGS}    --fail-on was given and a finding at that severity or above was found
  {EXIT_USAGE}    usage error: bad arguments or options
  {EXIT_INPUT}    input error: a file is missing, unreadable, corrupt, of an unsupported kind or
       beyond gpudiag's memory limits; or only part of the input could be read (its report
       is still printed; accept it with --allow-partial)
  {EXIT_UNAVAILABLE}    a needed capability is unavailable here (live capture not built, bundled
       demo recording missing, no recording produced)
  N    gpudiag run: the program failed with status N (128 + S when signal S ended it);
       its report is still written
  {EXIT_INTERNAL}   internal error in gpudiag (please report it)
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C)
"""


class UsageError(GpudiagError):
    """A command-line usage error (exit code 2)."""

    code = "usage"
    exit_code = EXIT_USAGE


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    from gpudiag import __version__
    from gpudiag.cli import analyze, demo, export, run, whatif

    parser = _Parser(
        prog="gpudiag",
        description="Diagnose GPU memory and utilization problems of training and inference "
        "programs: why they are slow, run out of memory or leak.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gpudiag {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module in (run, analyze, export, whatif, demo):
        p = sub.add_parser(
            module.NAME,
            help=module.HELP,
            description=module.DESCRIPTION,
            epilog=EXIT_CODES_HELP,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(p)
        p.set_defaults(handler=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser()
        args = parser.parse_args(args_list)
        if getattr(args, "handler", None) is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        return int(args.handler(args))
    except KeyboardInterrupt:
        print("gpudiag: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except GpudiagError as e:
        print(f"gpudiag: error: {e}", file=sys.stderr)
        return int(e.exit_code)
    except OSError as e:
        print(f"gpudiag: error: {e}", file=sys.stderr)
        return EXIT_INPUT
    except Exception as e:  # noqa: BLE001 - a bug: say so, with the traceback, and a distinct code
        import traceback

        traceback.print_exc()
        print(f"gpudiag: internal error: {e}", file=sys.stderr)
        return EXIT_INTERNAL


__all__ = ["EXIT_CODES_HELP", "UsageError", "build_parser", "main"]
