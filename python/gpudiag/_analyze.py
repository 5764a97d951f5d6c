# SPDX-License-Identifier: Apache-2.0
"""``gpudiag.analyze()``: recordings, Kineto traces and torch memory snapshots to a Report."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable, Union

from gpudiag import _core
from gpudiag._errors import InvalidArgumentError
from gpudiag._report import Report

PathLike = Union[str, Path]


def analyze(
    paths: PathLike | Sequence[PathLike],
    *,
    window: str = "steps",
    rank: int = -1,
    progress: Callable[[int, int], None] | None = None,
) -> Report:
    """Analyses files of one job (e.g. one Kineto trace per rank) into one report.

    Args:
        paths: files, folders, tar archives (.tar, .tar.gz) or glob patterns; the format is told
            from the content, not the name. Files of one process (a trace and a memory snapshot
            of it) combine into one report; ranks into the job view.
        window: "steps" (complete steps only), "hta" (Holistic Trace Analysis' window), "all".
        rank: with several rank files, analyse only this rank (-1: all).
        progress: called with (bytes read, total bytes) during long imports.

    Raises:
        NotFoundError, CorruptDataError, UnsupportedError, IoError: for unusable input; the
        message says which file and what is wrong with it.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    files = [str(p) for p in paths]
    if not files:
        raise InvalidArgumentError("no input files given")
    options = _core.AnalysisOptions()
    options.window = analysis_window(window)
    options.rank = int(rank)
    return Report.from_native(_core.analyze_files(files, options, progress))


def analysis_window(name: str) -> Any:
    """The ``_core.AnalysisWindow`` named ``name`` (its names come from C++: "steps", "hta",
    "all")."""
    members = _core.AnalysisWindow.__members__
    if name not in members:
        raise InvalidArgumentError(
            f"window must be one of {', '.join(repr(n) for n in members)}, not {name!r}"
        )
    return members[name]


def detect_format(path: PathLike) -> str:
    """The format of ``path``, by content: "recording", "kineto_json", "torch_snapshot",
    "nsight_sqlite" or "report_json" (a report gpudiag saved)."""
    return str(_core.detect_format(str(path)).name)
