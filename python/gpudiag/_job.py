# SPDX-License-Identifier: Apache-2.0
"""``gpudiag.analyze_job()``: a job's files analysed side by side on any executor.

Each input (a rank's trace, a snapshot, an archive member) is analysed on its own by a worker of
a ``concurrent.futures.Executor``: a local process pool by default, a Dask cluster's
``client.get_executor()``, an ``mpi4py.futures.MPIPoolExecutor``. Workers send back their report
as JSON (never a pickle of C++ state); the caller combines the reports into the job report, which
holds only these per-rank summaries, never events. Workers need gpudiag installed and the files
at the same paths (shared storage).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from pathlib import Path
from typing import Union

from gpudiag import _core
from gpudiag._analyze import analysis_window
from gpudiag._errors import InvalidArgumentError
from gpudiag._report import Report

PathLike = Union[str, Path]


def _options(window: str, rank: int = -1, for_job: bool = False) -> _core.AnalysisOptions:
    options = _core.AnalysisOptions()
    options.window = analysis_window(window)  # named as C++ names them
    options.rank = int(rank)
    options.for_job = for_job
    return options


def analyze_input_json(path: str, member: str, window: str, for_job: bool) -> str:
    """One input's report as JSON: what a worker runs (importable by name, so picklable)."""
    report = _core.analyze_input(path, member, _options(window, for_job=for_job))
    return str(_core.render_json(report))


def expand_inputs(paths: PathLike | Sequence[PathLike]) -> list[_core.JobInput]:
    """The inputs ``paths`` stand for: files, folder contents, archive members, glob matches."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    files = [str(p) for p in paths]
    if not files:
        raise InvalidArgumentError("no input files given")
    return list(_core.expand_job_inputs(files))


def analyze_job(
    paths: PathLike | Sequence[PathLike],
    *,
    executor: Executor | None = None,
    jobs: int | None = None,
    window: str = "steps",
    rank: int = -1,
) -> Report:
    """Analyses a job's files in parallel and combines them into one report.

    Args:
        paths: files, folders, tar archives (.tar, .tar.gz) or glob patterns of one job.
        executor: where the inputs are analysed; ``None``: a local process pool of ``jobs``
            processes (the number of CPUs by default), shut down afterwards.
        jobs: processes of the default pool; ignored with an ``executor``.
        window: "steps", "hta" or "all" (see ``gpudiag.analyze``).
        rank: keep only this rank (-1: all).

    The result equals ``gpudiag.analyze(paths)``: the files of one process combine into one
    report, the ranks into the job view (stragglers, imbalance, every rank's findings). A worker
    given a member of a compressed archive reads the archive up to that member: for hundreds of
    ranks, unpack a .tar.gz first (or ship a plain .tar, or a folder).
    """
    options = _options(window, rank)
    inputs = expand_inputs(paths)
    if jobs is not None and jobs < 1:
        raise InvalidArgumentError(f"jobs must be at least 1, not {jobs}")
    owned = executor is None
    if executor is None:
        # spawn: the caller may run threads (a Dask client, a notebook), which fork would copy
        # mid-operation.
        executor = ProcessPoolExecutor(
            max_workers=min(jobs or os.cpu_count() or 1, len(inputs)),
            mp_context=multiprocessing.get_context("spawn"),
        )
    try:
        for_job = len(inputs) > 1
        futures = [
            executor.submit(analyze_input_json, i.path, i.member, window, for_job) for i in inputs
        ]
        documents = [f.result() for f in futures]
    finally:
        if owned:
            executor.shutdown()
    reports = [_core.parse_report_json(d) for d in documents]
    return Report.from_native(_core.combine_input_reports(reports, inputs, options))
