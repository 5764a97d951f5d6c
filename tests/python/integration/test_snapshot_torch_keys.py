# SPDX-License-Identifier: Apache-2.0
"""A snapshot the installed torch writes itself, on this machine without a GPU: torch 2.13+
returns host_segments and host_traces (pinned host memory, pytorch PR #182407) beside the
device keys, empty here since recording needs the driver. gpudiag reads it as it is, notes no
key as unknown, and takes the keys as a lower bound on the torch version."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

import gpudiag

torch = pytest.importorskip("torch")


def test_reads_the_snapshot_this_torch_writes(tmp_path: Path) -> None:
    snapshot = torch.cuda.memory._snapshot()
    if "host_segments" not in snapshot:
        pytest.skip(f"torch {torch.__version__} predates host_segments (PR #182407)")
    path = tmp_path / "torch_snapshot.pickle"
    path.write_bytes(pickle.dumps(snapshot))
    report = gpudiag.analyze(path)
    assert report.source["properties"].get("snapshot_torch_at_least") == "2.13"
    notes = report.to_dict()["capture"]["notes"]
    assert not [n for n in notes if "does not know" in n], notes
