# SPDX-License-Identifier: Apache-2.0
"""What the framework side of the stack is, told to the native library (the stack verdict).

The native library knows the driver and CUPTI; only Python knows which PyTorch runs, which CUDA
runtime it was built for, its cuDNN, and whether its CUDA libraries come from pip's ``nvidia``
wheels (and whether the CUPTI wheel is among them). :func:`publish` hands these facts over;
every rule about them lives in C++ (``check_stack``). Nothing here imports torch or touches CUDA.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from gpudiag import _core

# Where pip's CUDA wheels put the runtime and CUPTI, per CUDA major version.
_WHEEL_FILES = {
    12: ("cuda_runtime/lib/libcudart.so.12", "cuda_cupti/lib/libcupti.so.12"),
    13: ("cu13/lib/libcudart.so.13", "cu13/lib/libcupti.so.13"),
}


def _cudnn_text(version: int) -> str:
    """cuDNN's integer (90100 for 9.1.0 from cuDNN 9 on, 8902 for 8.9.2 before) as text."""
    if version >= 90000:
        return f"{version // 10000}.{version % 10000 // 100}.{version % 100}"
    return f"{version // 1000}.{version % 1000 // 100}.{version % 100}"


def _wheel_dirs() -> list[Path]:
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    if spec is None or spec.submodule_search_locations is None:
        return []
    return [Path(p) for p in spec.submodule_search_locations]


def framework_info(torch: Any = None) -> Any:
    """The FrameworkInfo of this process: PyTorch's when it is imported, else plain Python."""
    info = _core.FrameworkInfo()
    torch = torch if torch is not None else sys.modules.get("torch")
    if torch is None:
        info.name = "python"
        return info
    info.name = "torch"
    info.version = str(getattr(torch, "__version__", ""))
    info.cuda_version = str(getattr(getattr(torch, "version", None), "cuda", None) or "")
    # cuDNN's version is a nicety, never a failure.
    with contextlib.suppress(Exception):
        cudnn = torch.backends.cudnn
        if cudnn.is_available():
            info.cudnn_version = _cudnn_text(int(cudnn.version()))
    major = int(info.cuda_version.split(".")[0]) if info.cuda_version[:2].isdigit() else 0
    runtime_and_cupti = _WHEEL_FILES.get(major)
    if runtime_and_cupti is not None:
        runtime, cupti = runtime_and_cupti
        for folder in _wheel_dirs():
            if (folder / runtime).is_file():
                info.cuda_wheels_dir = str(folder)
                info.cupti_in_wheels = (folder / cupti).is_file()
                break
    return info


def publish(torch: Any = None) -> None:
    """Tells the native library which framework runs here (no-op on an older _core)."""
    setter = getattr(_core, "set_framework_info", None)
    if setter is not None:
        setter(framework_info(torch))
