# SPDX-License-Identifier: Apache-2.0
"""The cost budget travels from gpudiag.Session to the C++ session, and its report shows it."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpudiag
from gpudiag import InvalidArgumentError


def test_the_budget_reaches_the_report(tmp_path: Path) -> None:
    with gpudiag.session(
        tmp_path / "run.gpudiag",
        torch=False,
        capture_gpu=False,
        nvml_hz=0,
        cost_budget_cpu_share=0.25,
        cost_budget_step_share=0,
    ) as s:
        report = s.report()
    assert report.figure("cost", "budget_cpu_share") == pytest.approx(0.25)
    assert report.figure("cost", "budget_step_share") is None  # 0: no limit on the step share
    assert report.figure("cost", "budget_rung") == 0
    assert report.figure("cost", "shed_events") == 0


def test_the_library_defaults_hold_when_left_unset(tmp_path: Path) -> None:
    with gpudiag.session(tmp_path / "run.gpudiag", torch=False, capture_gpu=False, nvml_hz=0) as s:
        report = s.report()
    assert report.figure("cost", "budget_cpu_share") == pytest.approx(0.01)
    assert report.figure("cost", "budget_step_share") == pytest.approx(0.005)


def test_a_share_out_of_range_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="cost_budget"):
        gpudiag.start(
            tmp_path / "run.gpudiag",
            torch=False,
            capture_gpu=False,
            nvml_hz=0,
            cost_budget_cpu_share=1.5,
        )
