# SPDX-License-Identifier: Apache-2.0
"""Comparing real runs as a user's CI does: two torch training loops recorded by a session (one
starved by its DataLoader, one fed) checked against each other's baseline with the pytest
helper, and `gpudiag compare --fail-on regression` as a process whose exit status a CI job
reads."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import gpudiag
from conftest import STARVED_TRACE, corpus_file
from gpudiag._errors import EXIT_OK, EXIT_VERDICT
from gpudiag.pytest_plugin import assert_no_regression

FIXED_TRACE = "kineto_traces/kineto_resnet50_num_workers_4_worker0.1623212756351.pt.trace.json.gz"
FETCH_S = 0.03  # the starved loop's time to fetch each batch
STEPS = 10


def _loop(fetch_s: float) -> gpudiag.Report:
    torch = pytest.importorskip("torch")

    class Items(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return STEPS

        def __getitem__(self, i: int) -> object:
            time.sleep(fetch_s)
            return torch.full((16,), float(i))

    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gpudiag.session(capture_gpu=False, nvml_hz=0) as s:
        for batch in torch.utils.data.DataLoader(Items(), batch_size=1):
            opt.zero_grad()
            model(batch).sum().backward()
            opt.step()
            time.sleep(0.005)  # the step's own work, so that a fed step is not 0
            gpudiag.step()
    return s.report()


@pytest.mark.torch
def test_a_fed_loop_improves_on_its_starved_baseline_and_not_back(tmp_path: Path) -> None:
    starved, fed = _loop(FETCH_S), _loop(0.0)
    assert assert_no_regression(starved, "starved", baseline_dir=tmp_path, update=True) is None
    comparison = assert_no_regression(fed, "starved", baseline_dir=tmp_path)
    assert comparison is not None
    assert comparison.verdict == "improvement", comparison.text
    assert "step_time_ns" in [d["key"] for d in comparison.deciding]
    assert_no_regression(fed, "fed", baseline_dir=tmp_path, update=True)
    with pytest.raises(pytest.fail.Exception, match="against baseline 'fed': regression"):
        assert_no_regression(starved, "fed", baseline_dir=tmp_path)


def test_the_gate_is_the_process_exit_status(tmp_path: Path) -> None:
    before, after = str(corpus_file(STARVED_TRACE)), str(corpus_file(FIXED_TRACE))
    env = {**os.environ, "GPUDIAG_BASELINE_DIR": str(tmp_path)}

    def gpudiag_cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gpudiag", *argv],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=120,
        )

    assert gpudiag_cli("baseline", "save", "main", after).returncode == EXIT_OK
    done = gpudiag_cli("compare", "main", before, "--fail-on", "regression", "--format", "json")
    assert done.returncode == EXIT_VERDICT, done.stderr
    assert '"verdict": "regression"' in done.stdout
    assert gpudiag_cli("compare", "main", after, "--fail-on", "regression").returncode == EXIT_OK
