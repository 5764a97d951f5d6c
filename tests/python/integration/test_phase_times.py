# SPDX-License-Identifier: Apache-2.0
"""Time per phase on a real torch training loop (CPU) in a real session: the phases marked with
gpudiag.phase() each get their calls, time per call and share of the step, in the report's
"phases" section, and the text report shows the table."""

from __future__ import annotations

import time
from typing import Any

import pytest

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch")

import gpudiag

ITERATIONS = 5
PHASES = ("forward", "backward", "optimizer")


def _phase_rows(report: Any) -> dict[str, dict[str, float]]:
    """The "phase_times" table's rows, by phase name, each by column key."""
    section = report.section("phases")
    assert section is not None, report.notes
    table = next(t for t in section["tables"] if t["id"] == "phase_times")
    columns = table["columns"]
    return {row[0]: dict(zip(columns[1:], row[1:], strict=True)) for row in table["rows"]}


def test_a_torch_loop_gets_time_per_phase() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batch = torch.randn(32, 64)
    with gpudiag.session(capture_gpu=False, nvml_hz=0) as s:
        for _ in range(ITERATIONS):
            gpudiag.step()
            with gpudiag.phase("forward"):
                loss = model(batch).pow(2).mean()
                time.sleep(0.003)  # each phase lasts milliseconds whatever the machine
            with gpudiag.phase("backward"):
                loss.backward()
                time.sleep(0.002)
            with gpudiag.phase("optimizer"):
                opt.step()
                opt.zero_grad()
                time.sleep(0.001)
        gpudiag.step()  # ends the last iteration's step
    report = s.report()

    rows = _phase_rows(report)
    assert set(rows) == set(PHASES)
    steps = report.figure("phases", "steps")
    assert steps == ITERATIONS
    for name, sleep_s in zip(PHASES, (0.003, 0.002, 0.001), strict=True):
        row = rows[name]
        assert row["calls"] == ITERATIONS
        assert row["mean_per_call_ns"] >= sleep_s * 1e9
        assert row["self_per_step_ns"] >= sleep_s * 1e9
        assert row["self_outside_steps_ns"] == 0
        assert 0 < row["self_share_of_step"] < 1
    shares = sum(row["self_share_of_step"] for row in rows.values())
    assert shares <= 1.0
    assert report.figure("phases", "phase_share_of_step") == pytest.approx(shares)
    # The phases that take most of the step come first.
    per_step = [row["self_per_step_ns"] for row in rows.values()]
    assert per_step == sorted(per_step, reverse=True)

    text = str(report)
    assert "Time per phase" in text
    assert "self share of step" in text
