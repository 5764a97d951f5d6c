# SPDX-License-Identifier: Apache-2.0
"""Compatibility: what ``gpudiag.torch_integration`` offered, now in ``gpudiag.integrations``
(``torch``, ``memory``, ``distributed``, ``lightning``, ``transformers``). New code imports from
there; module state (the running integration, the OOM observer) lives there too."""

from __future__ import annotations

from gpudiag.integrations.distributed import gather_report
from gpudiag.integrations.lightning import lightning_callback
from gpudiag.integrations.memory import run_watch_action, snapshot_report
from gpudiag.integrations.torch import (
    OOM_DEDUP_WINDOW_S,
    STAT_COUNTERS,
    Integration,
    attach,
    nvtx_pop,
    nvtx_push,
    oom_note,
    oom_state,
)
from gpudiag.integrations.transformers import hf_callback

__all__ = [
    "OOM_DEDUP_WINDOW_S",
    "STAT_COUNTERS",
    "Integration",
    "attach",
    "gather_report",
    "hf_callback",
    "lightning_callback",
    "nvtx_pop",
    "nvtx_push",
    "oom_note",
    "oom_state",
    "run_watch_action",
    "snapshot_report",
]
