# SPDX-License-Identifier: Apache-2.0
"""``gpudiag.whatif()``: a program's allocations replayed under other caching-allocator settings."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Union

from gpudiag import _core
from gpudiag._errors import InvalidArgumentError
from gpudiag._format import parse_size

PathLike = Union[str, Path]
Size = Union[int, float, str]


def _bytes(value: Size | None, what: str) -> int:
    if value is None:
        return 0
    try:
        return parse_size(value)
    except ValueError as e:
        raise InvalidArgumentError(f"{what}: {e}") from None


def whatif(
    path: PathLike,
    *,
    settings: str | Sequence[str] = (),
    capacity: Size | None = None,
    device_total: Size | None = None,
    sweep: bool = True,
    device: int | None = None,
    torch_version: str | None = None,
) -> _core.WhatIfResult:
    """Replays the allocation history in ``path`` through a model of PyTorch's CUDA caching
    allocator and predicts, per setting, the peak reserved memory, the memory stranded in split
    segments, the cudaMalloc/cudaFree calls and whether an out-of-memory failure recurs.

    The first outcome reproduces the recording under its own settings; ``result.reproduction``
    says how exactly (segment by segment, block by block).

    Args:
        path: a torch memory snapshot taken with its history
            (``torch.cuda.memory._record_memory_history()``), or a gpudiag recording holding the
            caching allocator's events (``Session.whatif`` answers for a live session).
        settings: settings to try over the recorded ones, in PYTORCH_CUDA_ALLOC_CONF form
            (``"expandable_segments:True"``) or as ``key=value``.
        capacity: memory the allocator can obtain in total, e.g. ``"79GiB"`` (device memory
            minus the CUDA context and other processes); None: unlimited, except where the
            recording's own OOM failures tell what was reachable.
        device_total: the device's memory, which a per_process_memory_fraction is taken of.
        sweep: also try the usual settings one at a time.
        device: the device to replay (default: the one with the most allocations).
        torch_version: the torch release whose allocator to follow, e.g. ``"2.13"`` (default:
            the one the input records, else the newest the model covers; the result's
            ``torch_version`` and ``torch_version_origin`` say which was followed).

    Returns:
        A result with ``outcomes``, ``reproduction``, ``advice`` and ``notes``; ``text()`` and
        ``to_json()`` render it.

    Raises:
        InvalidArgumentError: for unknown or out-of-range settings.
        FailedPreconditionError: when the input holds no allocation history (a recording with
            only cudaMalloc-level events: the message says what to record).
        NotFoundError, CorruptDataError, UnsupportedError, IoError: for unusable input.
    """
    options = whatif_options(
        settings=settings,
        capacity=capacity,
        device_total=device_total,
        sweep=sweep,
        device=device,
        torch_version=torch_version,
    )
    return _core.whatif_file(str(path), options)


def whatif_options(
    *,
    settings: str | Sequence[str] = (),
    capacity: Size | None = None,
    device_total: Size | None = None,
    sweep: bool = True,
    device: int | None = None,
    torch_version: str | None = None,
) -> _core.WhatIfOptions:
    """The native options for :func:`whatif` and ``Session.whatif`` (the arguments as there)."""
    options = _core.WhatIfOptions()
    options.settings = [settings] if isinstance(settings, str) else [str(s) for s in settings]
    options.capacity_bytes = _bytes(capacity, "capacity")
    options.device_total_bytes = _bytes(device_total, "device_total")
    options.sweep = bool(sweep)
    options.device = -1 if device is None else int(device)
    options.torch_version = "" if torch_version is None else str(torch_version)
    return options
