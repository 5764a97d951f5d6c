# SPDX-License-Identifier: Apache-2.0
"""The pytest-markers row: tests a project marks with gpudiag's limits, run by pytest in a
directory of their own (the matrix copies this file there as test_marked.py). Each test is a
column: the runner reads its outcome from pytest's junit XML."""

from __future__ import annotations

import pytest
import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
kept: list[torch.Tensor] = []


def train_step() -> float:
    model = torch.nn.Linear(256, 256).to(DEVICE)
    loss = model(torch.randn(32, 256, device=DEVICE)).square().mean()
    loss.backward()
    return float(loss)


@pytest.mark.gpu_limit_leaks("16 MiB")
def test_growth() -> None:
    """Keeps 64 MiB past its end: over the limit."""
    train_step()
    kept.extend(torch.ones(1 << 20, device=DEVICE) for _ in range(16))


@pytest.mark.gpu_limit_memory("2 GiB")
def test_crash() -> None:
    """Fails in its body: the failure is the test's, whatever the marker measures."""
    train_step()
    raise RuntimeError("planted crash")


@pytest.mark.gpu_limit_memory("2 GiB")
@pytest.mark.gpu_limit_leaks("16 MiB")
def test_clean() -> None:
    """Within both limits."""
    assert train_step() >= 0
