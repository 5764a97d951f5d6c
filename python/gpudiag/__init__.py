# SPDX-License-Identifier: Apache-2.0
"""gpudiag: in-process GPU memory and utilization diagnostics.

Importing gpudiag touches no CUDA state and does not import PyTorch; both happen only when a
session starts (and CUDA only when the program itself first uses it)::

    import gpudiag
    with gpudiag.session(record="run.gpudiag") as s:
        for batch in loader:
            ...
            gpudiag.step()          # optional: optimizer steps are detected automatically
    print(s.report().summary())

Offline: ``gpudiag.analyze("trace.json")``; from a shell: ``gpudiag analyze trace.json``. A job's
files on a cluster: ``gpudiag.analyze_job("traces/", executor=client.get_executor())``.
"""

from __future__ import annotations

from gpudiag import _core
from gpudiag._analyze import analyze, detect_format
from gpudiag._capabilities import (
    Capabilities,
    SoftwareStack,
    StackIssue,
    Status,
    capabilities,
    status,
)
from gpudiag._compare import Comparison, compare
from gpudiag._errors import (
    CorruptDataError,
    FailedPreconditionError,
    GpudiagError,
    InternalError,
    InvalidArgumentError,
    IoError,
    NotFoundError,
    ResourceExhaustedError,
    UnavailableError,
    UnsupportedError,
)
from gpudiag._format import format_figure, parse_size
from gpudiag._job import analyze_job
from gpudiag._report import Finding, Report
from gpudiag._session import (
    Session,
    current_session,
    phase,
    report,
    session,
    start,
    step,
    stop,
    watch_memory,
)
from gpudiag._whatif import whatif
from gpudiag.integrations.lightning import lightning_callback
from gpudiag.integrations.transformers import hf_callback

__version__: str = str(_core.__version__)

__all__ = [
    "Capabilities",
    "Comparison",
    "CorruptDataError",
    "FailedPreconditionError",
    "Finding",
    "GpudiagError",
    "InternalError",
    "InvalidArgumentError",
    "IoError",
    "NotFoundError",
    "Report",
    "ResourceExhaustedError",
    "Session",
    "SoftwareStack",
    "StackIssue",
    "Status",  # deprecated: Capabilities
    "UnavailableError",
    "UnsupportedError",
    "__version__",
    "analyze",
    "analyze_job",
    "capabilities",
    "compare",
    "current_session",
    "detect_format",
    "format_figure",
    "hf_callback",
    "lightning_callback",
    "parse_size",
    "phase",
    "report",
    "session",
    "start",
    "status",  # deprecated: capabilities()
    "step",
    "stop",
    "watch_memory",
    "whatif",
]


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext gpudiag``: registers the ``%%gpudiag`` cell magic."""
    from gpudiag.notebook import load_ipython_extension as _load

    _load(ipython)
