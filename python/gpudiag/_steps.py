# SPDX-License-Identifier: Apache-2.0
"""Step boundaries from several sources, one step per iteration whatever mix a program uses.

Sources rank by how much they know: an explicit ``gpudiag.step()`` beats a framework callback
(Lightning, Hugging Face), which beats ``torch.profiler``'s ``step()``, which beats optimizer and
GradScaler hooks. The first boundary from a higher-ranked source takes ownership; lower-ranked ones
are ignored from then on. With several optimizers (a GAN's generator and discriminator), only the
first optimizer seen ("the leader") marks boundaries, so each iteration is one step.

A boundary ends the open step and begins the next. When a source takes over from one that had
only begun its first step (the optimizer hook fires in the first iteration before the
``gpudiag.step()`` that ends it), that open step becomes the new owner's: ending it would count a
step of a fraction of a millisecond. If the new owner gives the step a number of its own, the
begun step is left open instead and a new one begins: the analysis counts only steps that ended.
Framework callbacks mark both ends of a step (batch start and end), so no step is left open when
the loop ends; a boundary-marked loop leaves its last step open (it has no end), and it is not
counted either.

Numbers are the framework's where it has them (the trainer's global step, torch.profiler's
``step_num``). Without one, steps count from 0 at the first boundary, except for the optimizer and
GradScaler hooks: their boundary closes an iteration, so the first one begins step 1 (iteration 0
ended there).
"""

from __future__ import annotations

import threading
from typing import Any, Callable

PRIORITY = {"optimizer": 1, "grad_scaler": 1, "profiler": 2, "framework": 3, "explicit": 4}
# Sources whose boundary is the end of an iteration, not the start of the next.
ENDS_ITERATION = frozenset({"optimizer", "grad_scaler"})


class StepClock:
    """Turns boundary notifications into step_begin/step_end calls on a session backend."""

    def __init__(self, backend: Any, on_boundary: Callable[[int], None] | None = None) -> None:
        self._backend = backend
        self._on_boundary = on_boundary
        self._lock = threading.Lock()
        self._owner_priority = 0
        self._owner: str | None = None
        self._owner_marks = 0  # boundaries (or step begins) from the current owner
        self._open: int | None = None
        self._next: int | None = None
        self._leader_optimizer: int | None = None
        self.boundaries = 0

    @property
    def owner(self) -> str | None:
        """The source that marks steps now (None before the first boundary)."""
        return self._owner

    @property
    def current_step(self) -> int | None:
        """The number of the open step, None when no step is open."""
        return self._open

    def is_leader_optimizer(self, optimizer: object) -> bool:
        """True for the first optimizer seen; it alone marks optimizer boundaries."""
        with self._lock:
            if self._leader_optimizer is None:
                self._leader_optimizer = id(optimizer)
            return self._leader_optimizer == id(optimizer)

    def _take(self, source: str) -> tuple[bool, bool]:
        """(accepted, adopt): whether ``source`` may mark steps, and whether the open step is
        one the previous owner had only begun (its first mark), which ``source`` then adopts."""
        priority = PRIORITY[source]
        if priority < self._owner_priority:
            return False, False
        # Sources of one rank (the optimizer hook and GradScaler) are one source taking turns.
        takeover = self._owner is not None and priority > self._owner_priority
        adopt = takeover and self._open is not None and self._owner_marks == 1
        if takeover:
            self._owner_marks = 0
        self._owner_priority = priority
        self._owner = source
        self._owner_marks += 1
        self.boundaries += 1
        return True, adopt

    def _begin(self, number: int) -> None:
        self._open = number
        self._next = number + 1
        self._backend.step_begin(number)

    def _end_open(self) -> None:
        if self._open is not None:
            self._backend.step_end(self._open)
            self._open = None

    def boundary(self, source: str, step: int | None = None) -> bool:
        """A step boundary seen by ``source``; returns False when it was ignored."""
        with self._lock:
            accepted, adopt = self._take(source)
            if not accepted:
                return False
            if adopt and (step is None or int(step) == self._open):
                number = self._open  # the open step goes on under its new owner
            elif adopt and step is not None:
                # The caller numbers the step that begins now: the one the previous owner had
                # begun is left open, and an open step counts for nothing (no duration).
                number = int(step)
                self._begin(number)
            else:
                self._end_open()
                if step is not None:
                    number = int(step)
                elif self._next is not None:
                    number = self._next
                else:
                    number = 1 if source in ENDS_ITERATION else 0
                self._begin(number)
        if self._on_boundary is not None and number is not None:
            self._on_boundary(number)
        return True

    def begin(self, source: str, step: int) -> bool:
        """``source`` says step ``step`` starts now (a framework's batch start); a step already
        open with that number goes on (a further micro-batch of the same optimizer step)."""
        with self._lock:
            if self._open == int(step) and self._owner == source:
                return False
            accepted, _ = self._take(source)  # a step that starts now adopts nothing
            if not accepted:
                return False
            self._end_open()
            self._begin(int(step))
            number = self._open
        if self._on_boundary is not None and number is not None:
            self._on_boundary(number)
        return True

    def end(self, source: str, done: int) -> bool:
        """``source`` says ``done`` steps are complete (a framework's global step after a batch):
        the open step ends if its number is below ``done``."""
        with self._lock:
            if self._owner != source or self._open is None or self._open >= int(done):
                return False
            self._end_open()
        return True
