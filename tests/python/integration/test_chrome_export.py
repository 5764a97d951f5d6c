# SPDX-License-Identifier: Apache-2.0
"""``gpudiag export --chrome`` of a real torch training loop recorded on a CPU: the trace has the
loop's steps, its phases and its DataLoader waits as tracks of the process, in the order and
nesting the loop made them; a recording with nothing to draw is refused with the input-error code
and no file, never written as an empty trace."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch")

import gpudiag
from gpudiag._errors import EXIT_INPUT

BATCHES = 6
PHASES = ("forward", "backward", "optimizer")
STEPS_TID = 0xFFFFFFFF  # the process' "steps" track


def _export(recording: Path, out: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "gpudiag", "export", str(recording), "--chrome", str(out)]
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)


def _record_loop(recording: Path) -> None:
    data = torch.utils.data.TensorDataset(torch.randn(4 * BATCHES, 8), torch.randn(4 * BATCHES, 1))
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gpudiag.session(record=str(recording), capture_gpu=False, nvml_hz=0):
        for x, y in torch.utils.data.DataLoader(data, batch_size=4):
            gpudiag.step()
            with gpudiag.phase("forward"):
                loss = torch.nn.functional.mse_loss(model(x), y)
                time.sleep(0.002)  # each phase lasts milliseconds whatever the machine
            with gpudiag.phase("backward"):
                loss.backward()
                time.sleep(0.001)
            with gpudiag.phase("optimizer"):
                opt.step()
                opt.zero_grad()
                time.sleep(0.001)
        gpudiag.step()  # ends the last iteration's step


def _inside(inner: dict[str, Any], outer: dict[str, Any]) -> bool:
    slack = 1e-3  # a nanosecond: µs are written as decimals, and their sums round
    return bool(
        inner["ts"] >= outer["ts"] - slack
        and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + slack
    )


def test_a_cpu_session_exports_its_steps_phases_and_input_waits(tmp_path: Path) -> None:
    recording, out = tmp_path / "run.gpudiag", tmp_path / "run.trace.json"
    _record_loop(recording)
    done = _export(recording, out)
    assert done.returncode == 0, done.stderr
    assert "ui.perfetto.dev" in done.stderr

    events = json.loads(out.read_text(encoding="utf-8"))["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    thread_names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert thread_names[STEPS_TID] == "steps"

    # One slice per iteration on the steps track, numbered from 0; the step begun by the last
    # gpudiag.step() never ended and says so.
    steps = sorted((s for s in slices if s["tid"] == STEPS_TID), key=lambda s: s["ts"])
    assert [s["name"] for s in steps] == [f"step {n}" for n in range(BATCHES)] + [
        f"step {BATCHES} (no end recorded)"
    ]
    assert [s["args"]["step"] for s in steps] == list(range(BATCHES + 1))

    # The phases and the DataLoader's waits are on the loop's thread: every phase inside its
    # step, in the loop's order; one wait per batch and one more (the call that ended the loop).
    loop_tid = steps[0]["pid"]  # the loop ran on the main thread, whose tid is the pid
    assert thread_names[loop_tid] == "main thread"
    by_name = {name: [s for s in slices if s["name"] == name] for name in (*PHASES, "input wait")}
    for name in PHASES:
        assert len(by_name[name]) == BATCHES, name
        for step, phase in zip(steps, by_name[name], strict=False):
            assert phase["cat"] == "phase"
            assert phase["tid"] == loop_tid
            assert _inside(phase, step), (name, step["name"])
    for fwd, bwd, opt in zip(*(by_name[n] for n in PHASES), strict=True):
        assert fwd["ts"] + fwd["dur"] <= bwd["ts"] + 1e-3
        assert bwd["ts"] + bwd["dur"] <= opt["ts"] + 1e-3
        assert fwd["dur"] >= 2000  # µs
    waits = by_name["input wait"]
    assert len(waits) == BATCHES  # the fetch that ends the epoch delivers no batch: no wait
    assert all(w["cat"] == "input_wait" and w["tid"] == loop_tid for w in waits)
    # Each batch is fetched before its step begins (the first before any step).
    for wait, step in zip(waits, steps, strict=False):
        assert wait["ts"] + wait["dur"] <= step["ts"] + 1e-3

    other = json.loads(out.read_text(encoding="utf-8"))["otherData"]
    assert other["range_markers"]["paired"] == len(PHASES) * BATCHES  # the waits are whole ranges
    assert other["range_markers"]["ends_without_begin"] == 0
    assert other["step_markers"] == {
        "paired": BATCHES,
        "ends_without_begin": 0,
        "begins_without_end": 1,
        "past_open_cap": 0,
    }


def test_a_recording_with_nothing_to_draw_is_refused(tmp_path: Path) -> None:
    recording, out = tmp_path / "idle.gpudiag", tmp_path / "idle.trace.json"
    with gpudiag.session(record=str(recording), capture_gpu=False, nvml_hz=0):
        time.sleep(0.01)
    done = _export(recording, out)
    assert done.returncode == EXIT_INPUT, done.stderr
    assert f"{recording} holds no events: nothing to draw" in done.stderr
    assert "perfetto" not in done.stderr
    assert not out.exists()
