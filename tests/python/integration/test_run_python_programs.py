# SPDX-License-Identifier: Apache-2.0
"""`gpudiag run` on real PyTorch training scripts, on the CPU: a script with its own session (as
the README's Python section writes it) under `gpudiag run script.py` and `gpudiag run -- python`,
and a script that crashes. Each is a loop starved by a slow Dataset: the verdict is input_bound,
CRITICAL, whichever way it is run, and the exit code says what happened."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpudiag import cli
from gpudiag._errors import EXIT_FINDINGS, EXIT_PROGRAM_FAILED

pytestmark = pytest.mark.torch

# A slow Dataset (10 ms a sample, 4 per batch) in front of a tiny model: about 95 % of each step
# waits for the next batch, with num_workers=0.
TRAIN = """
import sys, time
import torch
from torch.utils.data import DataLoader, Dataset
import gpudiag

class SlowDataset(Dataset):
    def __len__(self):
        return 48

    def __getitem__(self, i):
        time.sleep(0.01)
        return torch.randn(8), torch.randn(1)

model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)

def train(crash_at=None):
    for i, (x, y) in enumerate(DataLoader(SlowDataset(), batch_size=4)):
        with gpudiag.phase("forward"):
            loss = torch.nn.functional.mse_loss(model(x), y)
        with gpudiag.phase("backward"):
            opt.zero_grad()
            loss.backward()
        opt.step()
        gpudiag.step()
        if i == crash_at:
            raise RuntimeError("the loss went NaN")
"""

OWN_SESSION = (
    TRAIN
    + """
with gpudiag.session(record=sys.argv[1]) as s:
    train(crash_at=int(sys.argv[2]) if len(sys.argv) > 2 else None)
print("own report:", ",".join(f.id for f in s.report().findings))
"""
)


def _write(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(OWN_SESSION))
    return path


def _severity(tmp_path: Path, finding: str) -> str | None:
    report = json.loads((tmp_path / "run.report.json").read_text())
    return next((f["severity"] for f in report["findings"] if f["id"] == finding), None)


def test_a_script_with_its_own_session_under_gpudiag_run(tmp_path, capsys) -> None:
    own = tmp_path / "own.gpudiag"
    record = tmp_path / "run.gpudiag"
    script = _write(tmp_path)
    code = cli.main(
        ["run", "--fail-on", "critical", "--record", str(record), str(script), str(own)]
    )
    out = capsys.readouterr()
    assert code == EXIT_FINDINGS, out.err
    assert "another gpudiag session" not in out.err
    assert "own report: input_bound" in out.out  # its report() is the run's so far
    assert "[CRITICAL] input_bound" in out.err  # the printed report
    assert _severity(tmp_path, "input_bound") == "critical"  # and the JSON one
    assert own.read_bytes() == record.read_bytes()  # the copy it asked for


def test_a_python_program_after_double_dash_is_diagnosed_without_a_gpu(tmp_path) -> None:
    # One run for both: the program opens its own session (joining the one gpudiag run's
    # bootstrap started in its process), is starved of input, and crashes at step 6.
    command = [sys.executable, "-m", "gpudiag", "run", "--record", str(tmp_path / "run.gpudiag")]
    command += ["--", sys.executable, str(_write(tmp_path)), str(tmp_path / "own.gpudiag"), "6"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == EXIT_PROGRAM_FAILED, result.stderr
    assert "RuntimeError: the loss went NaN" in result.stderr
    assert "the program failed with status 1; exit code 5" in result.stderr
    assert "[CRITICAL] input_bound" in result.stderr  # the steps that ran before the crash
    assert _severity(tmp_path, "input_bound") == "critical"
