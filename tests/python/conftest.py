# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures. Markers (gpu, torch, slow, chromium) are declared in pyproject.toml."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# The plugin is registered through its pytest11 entry point once gpudiag is pip-installed; from a
# build tree (PYTHONPATH=build/<dir>/python) there is no entry point, so load it here then.
pytest_plugins: list[str] = ["pytester"]
try:
    from importlib.metadata import entry_points

    _plugins = entry_points(group="pytest11")
except TypeError:  # Python 3.9: entry_points() takes no selection
    _plugins = entry_points().get("pytest11", ())  # type: ignore[attr-defined]
_has_entry_point = any(ep.name == "gpudiag" for ep in _plugins)
if not _has_entry_point:
    pytest_plugins.append("gpudiag.pytest_plugin")

# For pytester runs: how the inner pytest gets the plugin.
PLUGIN_ARGS: list[str] = [] if _has_entry_point else ["-p", "gpudiag.pytest_plugin"]

HAVE_TORCH = importlib.util.find_spec("torch") is not None

# Real traces and snapshots, read in place (../shared/corpus beside the checkout); tests that need
# them skip where they are absent. Renderer tests run on reports the analyses make from these.
CORPUS = Path(os.environ.get("GPUDIAG_CORPUS_DIR", HERE.parents[2] / "shared" / "corpus"))
STARVED_TRACE = "kineto_traces/kineto_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz"
RANK_TRACES = (
    "kineto_traces/hta_sampled_rank-0.json.gz",
    "kineto_traces/hta_sampled_rank-1.json.gz",
)
SNAPSHOT = "memory_snapshots/silmont2000_cs336a2_mem_snapshot.pickle"
_analysed: dict[tuple[str, ...], Any] = {}


def corpus_file(name: str) -> Path:
    """A corpus file's path; skips the test when it is absent."""
    path = CORPUS / name
    if not path.exists():
        pytest.skip(f"corpus file absent: {path}")
    return path


def corpus_report(*names: str) -> Any:
    """The report gpudiag.analyze makes of these corpus files (analysed once per run)."""
    import gpudiag

    paths = [corpus_file(n) for n in names]
    if names not in _analysed:
        _analysed[names] = gpudiag.analyze(paths)
    return _analysed[names]


@pytest.fixture
def starved_report() -> Any:
    """ResNet-50 with DataLoader(num_workers=0): steps, input waits, kernels, memory events."""
    return corpus_report(STARVED_TRACE)


@pytest.fixture
def snapshot_report() -> Any:
    """A torch memory snapshot: memory only."""
    return corpus_report(SNAPSHOT)


@pytest.fixture
def job_report() -> Any:
    """Two ranks of an NCCL job."""
    return corpus_report(*RANK_TRACES)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "torch" in item.keywords and not HAVE_TORCH:
            item.add_marker(pytest.mark.skip(reason="PyTorch is not installed"))
        if "chromium" in item.keywords and chromium_binary() is None:
            item.add_marker(
                pytest.mark.skip(
                    reason="headless Chromium is not installed (apt-get install -y chromium)"
                )
            )
        if "gpu" in item.keywords:
            reason = _gpu_missing_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


def chromium_binary() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _gpu_missing_reason() -> str | None:
    if not HAVE_TORCH:
        return "needs PyTorch with a CUDA device"
    import torch

    return None if torch.cuda.is_available() else "needs a CUDA device; none is available"


@pytest.fixture
def fake_backend():
    """A FakeFactory for gpudiag.Session(_backend_factory=...)."""
    from _fakes import FakeFactory

    return FakeFactory()


@pytest.fixture(autouse=True)
def no_session_leak():
    """Fails a test that leaves a gpudiag session running."""
    import gpudiag

    yield
    current = gpudiag.current_session()
    if current is not None:
        current.stop()
        pytest.fail("the test left a gpudiag session running")
