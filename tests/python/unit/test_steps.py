# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

from _fakes import FakeNative
from gpudiag._steps import StepClock


def _steps(backend: FakeNative) -> list[tuple[str, int]]:
    return [(n, a[0]) for n, _, a in backend.calls if n in ("step_begin", "step_end")]


def test_first_explicit_boundary_begins_step_zero() -> None:
    backend = FakeNative(None)
    clock = StepClock(backend)
    clock.boundary("explicit")
    clock.boundary("explicit")
    assert _steps(backend) == [("step_begin", 0), ("step_end", 0), ("step_begin", 1)]
    assert clock.current_step == 1


def test_optimizer_boundaries_end_iterations_so_the_first_begins_step_one() -> None:
    # The first optimizer step ends iteration 0: the step it begins is iteration 1.
    backend = FakeNative(None)
    clock = StepClock(backend)
    clock.boundary("optimizer")
    clock.boundary("optimizer")
    assert _steps(backend) == [("step_begin", 1), ("step_end", 1), ("step_begin", 2)]


def test_higher_priority_source_takes_over_and_lower_is_ignored() -> None:
    backend = FakeNative(None)
    clock = StepClock(backend)
    assert clock.boundary("optimizer")
    assert clock.boundary("profiler")  # adopts the step the optimizer had just begun
    assert clock.owner == "profiler"
    assert not clock.boundary("optimizer")
    assert not clock.boundary("grad_scaler")
    assert clock.boundary("explicit", 10)
    assert not clock.boundary("framework")
    assert _steps(backend)[-1] == ("step_begin", 10)
    assert clock.boundaries == 3


def test_explicit_steps_after_the_optimizer_hook_add_no_fake_step() -> None:
    # Each iteration: optimizer.step() (hooked), then gpudiag.step(). The hook's first boundary
    # begins a step that gpudiag.step() adopts instead of ending it a fraction of a ms later.
    backend = FakeNative(None)
    clock = StepClock(backend)
    for _ in range(4):
        clock.boundary("optimizer")
        clock.boundary("explicit")
    assert _steps(backend) == [
        ("step_begin", 1),
        ("step_end", 1),
        ("step_begin", 2),
        ("step_end", 2),
        ("step_begin", 3),
        ("step_end", 3),
        ("step_begin", 4),
    ]
    assert clock.owner == "explicit"


def test_a_numbered_takeover_leaves_the_adopted_step_open() -> None:
    # An open step counts for nothing, so the one the optimizer began is simply not ended.
    backend = FakeNative(None)
    clock = StepClock(backend)
    clock.boundary("optimizer")
    clock.boundary("explicit", 100)
    clock.boundary("explicit", 101)
    assert _steps(backend) == [
        ("step_begin", 1),
        ("step_begin", 100),
        ("step_end", 100),
        ("step_begin", 101),
    ]


def test_a_source_that_marked_steps_before_is_ended_at_a_takeover() -> None:
    backend = FakeNative(None)
    clock = StepClock(backend)
    for _ in range(3):
        clock.boundary("optimizer")
    clock.boundary("explicit")
    assert _steps(backend)[-2:] == [("step_end", 3), ("step_begin", 4)]


def test_framework_steps_have_both_ends_and_count_optimizer_steps() -> None:
    # Two micro-batches per optimizer step: begin at each batch start, end once the trainer's
    # global step has passed the open step. The optimizer hook inside is ignored.
    backend = FakeNative(None)
    clock = StepClock(backend)
    global_step = 0
    for batch in range(6):
        clock.begin("framework", global_step)
        clock.boundary("optimizer")
        if batch % 2 == 1:
            global_step += 1
        clock.end("framework", global_step)
    assert _steps(backend) == [
        ("step_begin", 0),
        ("step_end", 0),
        ("step_begin", 1),
        ("step_end", 1),
        ("step_begin", 2),
        ("step_end", 2),
    ]
    assert clock.current_step is None  # nothing left open when the loop ends


def test_optimizer_and_grad_scaler_take_turns_as_one_source() -> None:
    # GradScaler marks the iterations whose optimizer.step() it skipped: no step is adopted or
    # merged when the two alternate.
    backend = FakeNative(None)
    clock = StepClock(backend)
    for source in ("optimizer", "grad_scaler", "optimizer", "grad_scaler"):
        assert clock.boundary(source)
    assert [n for n, _ in _steps(backend)].count("step_end") == 3
    assert clock.current_step == 4


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
