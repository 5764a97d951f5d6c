# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

from _fakes import FakeNative
from gpudiag._steps import StepClock


def _steps(backend: FakeNative) -> list[tuple[str, int]]:
    return [(n, a[0]) for n, _, a in backend.calls if n in ("step_begin", "step_end")]


def test_first_boundary_only_begins_step_zero() -> None:
    backend = FakeNative(None)
    clock = StepClock(backend)
    clock.boundary("optimizer")
    clock.boundary("optimizer")
    assert _steps(backend) == [("step_begin", 0), ("step_end", 0), ("step_begin", 1)]
    assert clock.current_step == 1


def test_higher_priority_source_takes_over_and_lower_is_ignored() -> None:
    backend = FakeNative(None)
    clock = StepClock(backend)
    assert clock.boundary("optimizer")
    assert clock.boundary("profiler")
    assert clock.owner == "profiler"
    assert not clock.boundary("optimizer")
    assert not clock.boundary("grad_scaler")
    assert clock.boundary("explicit", 10)
    assert not clock.boundary("framework")
    assert _steps(backend)[-1] == ("step_begin", 10)
    assert clock.boundaries == 3


def test_only_the_first_optimizer_leads() -> None:
    clock = StepClock(FakeNative(None))
    generator, discriminator = object(), object()
    assert clock.is_leader_optimizer(discriminator)
    assert not clock.is_leader_optimizer(generator)
    assert clock.is_leader_optimizer(discriminator)


def test_boundary_callback_gets_the_new_step() -> None:
    seen: list[int] = []
    clock = StepClock(FakeNative(None), on_boundary=seen.append)
    clock.boundary("explicit")
    clock.boundary("explicit")
    assert seen == [0, 1]
