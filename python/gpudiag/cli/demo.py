# SPDX-License-Identifier: Apache-2.0
"""``gpudiag demo``: the diagnosis of the recording bundled with gpudiag (no GPU needed)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpudiag._analyze import analyze
from gpudiag._errors import UnavailableError
from gpudiag.cli._common import add_report_options, emit_report

NAME = "demo"
HELP = "show what gpudiag reports, on the recording bundled with it (no GPU needed)"
DESCRIPTION = """\
Analyse the recording that ships with gpudiag and print the diagnosis, exactly as `gpudiag
analyze` would for your own recording. The recording is simulated: generated to show a training
run with planted problems (a starved DataLoader, pageable copies, a .item() per step, a leak), not
recorded on a GPU; the report says so too."""

DEMO_RECORDING = "demo.gpudiag"


def demo_path() -> Path:
    """Where the bundled recording lives in the installed package."""
    return Path(__file__).resolve().parent.parent / "data" / DEMO_RECORDING


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_report_options(p)


def run(args: argparse.Namespace) -> int:
    path = demo_path()
    if not path.is_file():
        raise UnavailableError(
            f"the bundled demo recording is missing from this installation ({path}); "
            "reinstall gpudiag, or run `gpudiag analyze` on a recording of your own"
        )
    return emit_report(analyze([path]), args)
