# SPDX-License-Identifier: Apache-2.0
"""Jupyter/IPython support: ``%load_ext gpudiag``, then a cell under ``%%gpudiag``.

::

    %%gpudiag --record run.gpudiag
    for batch in loader:
        train_step(batch)

runs the cell in a session and displays its report (HTML with plots; plain text in a terminal).
The report is also stored in the variable ``_gpudiag_report``. IPython is imported only here.
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any, NoReturn

from gpudiag._errors import InvalidArgumentError
from gpudiag._report import Report
from gpudiag._session import Session


class _MagicParser(argparse.ArgumentParser):
    """argparse that raises instead of printing its usage and exiting (a magic must not exit)."""

    def error(self, message: str) -> NoReturn:
        raise InvalidArgumentError(f"%%gpudiag: {message}\n{self.format_usage().rstrip()}")


def _parse(line: str) -> argparse.Namespace:
    parser = _MagicParser(prog="%%gpudiag", add_help=False)
    parser.add_argument("--record", default=None, help="write a .gpudiag recording here")
    parser.add_argument("--no-torch", action="store_true", help="do not instrument PyTorch")
    parser.add_argument("--no-dataloader", action="store_true", help="do not time DataLoader")
    parser.add_argument("--text", action="store_true", help="show the plain-text report")
    try:
        words = shlex.split(line)
    except ValueError as e:  # an unclosed quote
        raise InvalidArgumentError(f"%%gpudiag: {e}") from None
    return parser.parse_args(words)


def run_cell(
    ipython: Any, line: str, cell: str, args: argparse.Namespace | None = None
) -> Report | None:
    """Runs ``cell`` under a session and displays its report (the ``%%gpudiag`` magic)."""
    args = args if args is not None else _parse(line)
    session = Session(
        args.record,
        torch=False if args.no_torch else "auto",
        dataloader=not args.no_dataloader,
        _origin="the session of the %%gpudiag cell",
    )
    with session:
        result = ipython.run_cell(cell)
    report = session.report()
    ipython.user_ns["_gpudiag_report"] = report
    from IPython.display import display

    if args.text:
        print(report.summary())
    else:
        display(report)
    if getattr(result, "error_in_exec", None) is not None:
        return None
    return None  # displayed already; returning it would display it twice


def load_ipython_extension(ipython: Any) -> None:
    """Called by ``%load_ext gpudiag``."""

    def gpudiag_magic(line: str, cell: str) -> None:
        try:
            args = _parse(line)
        except InvalidArgumentError as e:
            from IPython.core.error import UsageError

            raise UsageError(str(e)) from None  # IPython shows it as one message, no traceback
        run_cell(ipython, line, cell, args)

    gpudiag_magic.__doc__ = __doc__
    ipython.register_magic_function(gpudiag_magic, magic_kind="cell", magic_name="gpudiag")


def unload_ipython_extension(ipython: Any) -> None:
    """Called by ``%unload_ext gpudiag``."""
    magics = getattr(ipython, "magics_manager", None)
    if magics is not None:
        magics.magics.get("cell", {}).pop("gpudiag", None)
