# SPDX-License-Identifier: Apache-2.0
"""Hugging Face transformers: a ``TrainerCallback`` that marks each optimizer step."""

from __future__ import annotations

from typing import Any

from gpudiag._errors import UnavailableError
from gpudiag.integrations._callbacks import framework_step_begin, framework_step_end


def hf_callback() -> Any:
    """A Hugging Face ``TrainerCallback`` marking each optimizer step from its start to its end,
    numbered by the trainer's global step."""
    try:
        from transformers import TrainerCallback
    except ImportError as e:
        raise UnavailableError("transformers is not installed") from e
    return _make_hf_callback(TrainerCallback)()


def _make_hf_callback(base: type) -> type:
    class GpudiagTrainerCallback(base):  # type: ignore[misc]
        # transformers' TrainerCallback signatures.
        def on_step_begin(
            self,
            args: Any,  # noqa: ARG002
            state: Any,
            control: Any,  # noqa: ARG002
            **kwargs: Any,  # noqa: ARG002
        ) -> None:
            framework_step_begin(state, "Hugging Face Trainer callback")

        def on_step_end(
            self,
            args: Any,  # noqa: ARG002
            state: Any,
            control: Any,  # noqa: ARG002
            **kwargs: Any,  # noqa: ARG002
        ) -> None:
            framework_step_end(state, "Hugging Face Trainer callback")

    return GpudiagTrainerCallback
