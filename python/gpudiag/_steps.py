# SPDX-License-Identifier: Apache-2.0
"""Step boundaries from several sources, without counting any step twice.

Sources rank by how much they know: an explicit ``gpudiag.step()`` beats a framework callback
(Lightning, Hugging Face), which beats ``torch.profiler``'s ``step()``, which beats optimizer and
GradScaler hooks. The first boundary from a higher-ranked source takes ownership; lower-ranked ones
are ignored from then on. With several optimizers (a GAN's generator and discriminator), only the
first optimizer seen ("the leader") marks boundaries, so each iteration is one step.

A boundary ends the open step and begins the next. The first boundary only begins step 0: the
iteration before it (CUDA initialisation, autotuning, worker start-up) is warm-up, as it is for
torch.profiler.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

PRIORITY = {"optimizer": 1, "grad_scaler": 1, "profiler": 2, "framework": 3, "explicit": 4}


class StepClock:
    """Turns boundary notifications into step_begin/step_end calls on a session backend."""

    def __init__(self, backend: Any, on_boundary: Callable[[int], None] | None = None) -> None:
        self._backend = backend
        self._on_boundary = on_boundary
        self._lock = threading.Lock()
        self._owner_priority = 0
        self._owner: str | None = None
        self._open: int | None = None
        self._next = 0
        self._leader_optimizer: int | None = None
        self.boundaries = 0

    @property
    def owner(self) -> str | None:
        """The source that marks steps now (None before the first boundary)."""
        return self._owner

    @property
    def current_step(self) -> int | None:
        """The number of the open step, None before the first boundary."""
        return self._open

    def is_leader_optimizer(self, optimizer: object) -> bool:
        """True for the first optimizer seen; it alone marks optimizer boundaries."""
        with self._lock:
            if self._leader_optimizer is None:
                self._leader_optimizer = id(optimizer)
            return self._leader_optimizer == id(optimizer)

    def boundary(self, source: str, step: int | None = None) -> bool:
        """A step boundary seen by ``source``; returns False when it was ignored."""
        priority = PRIORITY[source]
        with self._lock:
            if priority < self._owner_priority:
                return False
            self._owner_priority = priority
            self._owner = source
            if self._open is not None:
                self._backend.step_end(self._open)
            number = self._next if step is None else int(step)
            self._open = number
            self._next = number + 1
            self.boundaries += 1
            self._backend.step_begin(number)
        if self._on_boundary is not None:
            self._on_boundary(number)
        return True
