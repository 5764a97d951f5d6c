# SPDX-License-Identifier: Apache-2.0
"""Steps counted as the loop has them, on real torch training loops (CPU) in a real session: one
iteration is one step whatever mix of markers the program uses (gpudiag.step(), the hooked
optimizer, torch.profiler), numbered as the framework numbers them, with no fake step of a
fraction of a millisecond and no empty row at the end of the per-step table."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch")

import gpudiag

ITERATIONS = 6
WORK_S = 0.004  # host work per iteration: a real step takes milliseconds, a fake one does not


def _session() -> Any:
    return gpudiag.session(capture_gpu=False, nvml_hz=0)


def _model() -> tuple[Any, Any]:
    model = torch.nn.Linear(4, 1)
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def _iteration(model: Any, opt: Any) -> None:
    time.sleep(WORK_S)
    opt.zero_grad()
    model(torch.ones(2, 4)).sum().backward()
    opt.step()


def _steps(report: Any) -> list[tuple[int, float]]:
    """(step number, duration in ns) of every row of the timeline's per-step table."""
    section = report.section("timeline")
    assert section is not None, report.notes
    table = next(t for t in section["tables"] if t["id"] == "steps")
    number, duration = table["columns"].index("step"), table["columns"].index("duration_ns")
    return [(int(row[number]), float(row[duration])) for row in table["rows"]]


def _assert_whole_iterations(steps: list[tuple[int, float]], numbers: list[int]) -> None:
    assert [n for n, _ in steps] == numbers
    for n, duration in steps:
        assert duration >= WORK_S * 0.9e9, f"step {n} lasted {duration / 1e6:.3f} ms"


def test_gpudiag_step_after_the_hooked_optimizer_adds_no_fake_step() -> None:
    model, opt = _model()
    with _session() as s:
        for _ in range(ITERATIONS):
            _iteration(model, opt)
            gpudiag.step()
    report = s.report()
    # Iteration 0 ends at the first boundary; iterations 1..5 are steps 1..5 (the framework's
    # iteration index); the step the last gpudiag.step() begins holds nothing and is not a row.
    _assert_whole_iterations(_steps(report), list(range(1, ITERATIONS)))
    assert report.figure("timeline", "steps") == ITERATIONS - 1


def test_gpudiag_step_at_the_top_of_the_loop_numbers_iterations_from_zero() -> None:
    model, opt = _model()
    with _session() as s:
        for _ in range(ITERATIONS):
            gpudiag.step()
            _iteration(model, opt)
    # The last iteration's step never ends (nothing marks its end), so it is not counted.
    _assert_whole_iterations(_steps(s.report()), list(range(ITERATIONS - 1)))


def test_the_optimizer_hook_alone_counts_each_iteration_once() -> None:
    model, opt = _model()
    with _session() as s:
        for _ in range(ITERATIONS):
            _iteration(model, opt)
    _assert_whole_iterations(_steps(s.report()), list(range(1, ITERATIONS)))


def test_profiler_steps_keep_the_profilers_numbers(tmp_path) -> None:
    # Iteration i sleeps i + 1 times WORK_S, so each step's length says which iteration it is.
    # torch.profiler names its steps only under a schedule; step 0 is its warm-up (not recorded).
    model, opt = _model()
    activities = [torch.profiler.ProfilerActivity.CPU]
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=ITERATIONS - 1, repeat=1)
    with _session() as s, torch.profiler.profile(activities=activities, schedule=schedule) as prof:
        for i in range(ITERATIONS):
            time.sleep(WORK_S * i)
            _iteration(model, opt)
            prof.step()
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    profiler_ns = {
        int(e["name"].split("#")[1]): float(e["dur"]) * 1e3
        for e in events
        if e.get("name", "").startswith("ProfilerStep#")
    }
    assert sorted(profiler_ns) == list(range(1, ITERATIONS))
    steps = dict(_steps(s.report()))
    _assert_whole_iterations(sorted(steps.items()), list(range(ITERATIONS)))
    # Step N is the profiler's ProfilerStep#N: the same span, to well under one iteration's
    # difference. The last one is left out: the profiler stops and processes its trace inside the
    # step() that ends it, after ProfilerStep#5 closes and before gpudiag's boundary.
    for n in range(1, ITERATIONS - 1):
        assert abs(steps[n] - profiler_ns[n]) < WORK_S * 0.5e9, (n, steps[n], profiler_ns[n])
