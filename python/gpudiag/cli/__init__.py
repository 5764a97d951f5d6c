# SPDX-License-Identifier: Apache-2.0
"""The ``gpudiag`` command line: one module per subcommand (run, analyze, export, whatif, compare,
baseline, demo)."""

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
    EXIT_PROGRAM_FAILED,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    EXIT_VERDICT,
    GpudiagError,
)

# Each exit code, what it means, and the subcommands that can return it (None: every one).
_EXIT_CODES: tuple[tuple[str, str, tuple[str, ...] | None], ...] = (
    (
        f"{EXIT_OK}",
        (
            "success (and, with --fail-on, no finding at that severity or above, or for compare\n"
            "a verdict it does not name); for run, also a clean exit of a program that recorded\n"
            "nothing (said to be no all-clear)"
        ),
        None,
    ),
    (
        f"{EXIT_FINDINGS}",
        "--fail-on was given and a finding at that severity or above was found",
        ("run", "analyze", "demo"),
    ),
    (f"{EXIT_USAGE}", "usage error: bad arguments or options", None),
    (
        f"{EXIT_INPUT}",
        (
            "input error: a file is missing, unreadable, corrupt, of an unsupported kind or\n"
            "beyond gpudiag's memory limits; or only part of the input could be read (its report\n"
            "is still printed; accept it with --allow-partial); or nothing was observed (a\n"
            "report of 0 events is no all-clear)"
        ),
        ("run", "analyze", "export", "whatif", "compare", "baseline"),
    ),
    (
        f"{EXIT_UNAVAILABLE}",
        (
            "a needed capability is unavailable here (live capture not built, or the\n"
            "injection library or the bundled demo recording missing from this installation;\n"
            "for mcp, the MCP Python SDK not installed)"
        ),
        ("run", "demo", "mcp"),
    ),
    (
        f"{EXIT_PROGRAM_FAILED}",
        (
            "the program failed (a non-zero exit status or an uncaught exception): gpudiag\n"
            "prints its status, and its report is still written"
        ),
        ("run",),
    ),
    (
        f"{EXIT_VERDICT}",
        "--fail-on was given and the comparison's verdict is one it names (a regression)",
        ("compare",),
    ),
    ("128+N", "the program was ended by signal N (its report is still written)", ("run",)),
    (f"{EXIT_INTERNAL}", "internal error in gpudiag (please report it)", None),
    (f"{EXIT_INTERRUPTED}", "interrupted (Ctrl-C)", None),
)


def exit_codes_help(command: str | None = None) -> str:
    """The exit codes `command` can return (every code for None), as an --help epilog."""
    lines = ["exit codes:"]
    for code, meaning, commands in _EXIT_CODES:
        if command is not None and commands is not None and command not in commands:
            continue
        first, *rest = meaning.split("\n")
        lines.append(f"  {code:<6}{first}")
        lines.extend(f"        {line}" for line in rest)
    return "\n".join(lines) + "\n"


EXIT_CODES_HELP = exit_codes_help()


class UsageError(GpudiagError):
    """A command-line usage error (exit code 2)."""

    code = "usage"
    exit_code = EXIT_USAGE


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    from gpudiag import __version__
    from gpudiag.cli import analyze, baseline, compare, demo, export, mcp, run, whatif

    parser = _Parser(
        prog="gpudiag",
        description="Diagnose GPU memory and utilization problems of training and inference "
        "programs: why they are slow, run out of memory or leak.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gpudiag {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module in (run, analyze, export, whatif, compare, baseline, demo, mcp):
        p = sub.add_parser(
            module.NAME,
            help=module.HELP,
            description=module.DESCRIPTION,
            epilog=exit_codes_help(module.NAME),
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


__all__ = ["EXIT_CODES_HELP", "UsageError", "build_parser", "exit_codes_help", "main"]
