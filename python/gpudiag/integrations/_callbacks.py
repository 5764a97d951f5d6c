# SPDX-License-Identifier: Apache-2.0
"""What the trainer callbacks (Lightning's, Hugging Face's) share: steps marked from the trainer's
own count, in the session the PyTorch instrumentation runs for."""

from __future__ import annotations

import warnings
from typing import Any

from gpudiag.integrations import torch as torch_integration

_callbacks_warned: set[str] = set()  # the callbacks that said they had no session (once each)


def _callback_session(callback: str) -> Any:
    """The running session, for a trainer callback; None, said once per callback kind, without
    one: a callback that marks nothing must not look as if it worked."""
    active = torch_integration._active
    s = active.session if active is not None else None
    if s is None and callback not in _callbacks_warned:
        _callbacks_warned.add(callback)
        warnings.warn(
            f"gpudiag: the {callback} has no gpudiag session to mark steps in, so it marks "
            "nothing; start one around training (gpudiag.start(), or "
            "`with gpudiag.session():`)",
            RuntimeWarning,
            stacklevel=3,
        )
    return s


def framework_step_begin(progress: Any, callback: str) -> None:
    """A trainer callback at the start of a step: step ``global_step`` begins (a micro-batch of a
    step already open continues it)."""
    s = _callback_session(callback)
    number = getattr(progress, "global_step", None)
    if s is not None and isinstance(number, int):
        s.step_begin_from("framework", number)


def framework_step_end(progress: Any, callback: str) -> None:
    """A trainer callback after a batch: the open step ends once the trainer's ``global_step``
    has passed it (after the optimizer step, not after each accumulated micro-batch)."""
    s = _callback_session(callback)
    number = getattr(progress, "global_step", None)
    if s is not None and isinstance(number, int):
        s.step_end_from("framework", number)
