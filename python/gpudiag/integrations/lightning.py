# SPDX-License-Identifier: Apache-2.0
"""PyTorch Lightning: a callback that marks each training step."""

from __future__ import annotations

from typing import Any

from gpudiag._errors import UnavailableError
from gpudiag.integrations._callbacks import framework_step_begin, framework_step_end


def lightning_callback() -> Any:
    """A Lightning ``Callback`` marking each training step from its first batch's start to the
    batch after which the trainer's global step advances (so accumulated micro-batches are one
    step), numbered by the global step."""
    try:
        from lightning.pytorch.callbacks import Callback
    except ImportError:
        try:
            from pytorch_lightning.callbacks import Callback
        except ImportError as e:
            raise UnavailableError("Lightning is not installed") from e
    return _make_lightning_callback(Callback)()


def _make_lightning_callback(base: type) -> type:
    class GpudiagLightningCallback(base):  # type: ignore[misc]
        # Lightning's hook signatures (it passes every argument by position).
        def on_train_batch_start(
            self,
            trainer: Any,
            pl_module: Any,  # noqa: ARG002
            batch: Any,  # noqa: ARG002
            batch_idx: int,  # noqa: ARG002
        ) -> None:
            framework_step_begin(trainer, "Lightning callback")

        def on_train_batch_end(
            self,
            trainer: Any,
            pl_module: Any,  # noqa: ARG002
            outputs: Any,  # noqa: ARG002
            batch: Any,  # noqa: ARG002
            batch_idx: int,  # noqa: ARG002
        ) -> None:
            framework_step_end(trainer, "Lightning callback")

    return GpudiagLightningCallback
