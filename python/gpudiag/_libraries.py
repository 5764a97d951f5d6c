# SPDX-License-Identifier: Apache-2.0
"""Where pip-installed CUDA libraries live, so live capture loads the libcupti PyTorch loads.

A process must hold one CUPTI. PyTorch's wheels bring their own in the ``nvidia`` namespace
package: ``site-packages/nvidia/cu13/lib/libcupti.so.13`` for CUDA 13 builds,
``site-packages/nvidia/cuda_cupti/lib/libcupti.so.12`` (the nvidia-cuda-cupti-cu12 wheel) for
CUDA 12 ones. When a session starts before ``import torch``, gpudiag loading the toolkit's copy
would leave PyTorch to map a second one; naming the wheel's directory first makes gpudiag load
that very file. Nothing is imported: the directories are found with importlib's finders only.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from gpudiag import _core

# (directory under nvidia/, library file): the CUDA 13 layout first, as the native search does.
CUPTI_LOCATIONS = (("cu13/lib", "libcupti.so.13"), ("cuda_cupti/lib", "libcupti.so.12"))
CUPTI = CUPTI_LOCATIONS[0][1]


def nvidia_library_dirs() -> list[str]:
    """The pip CUDA directories on sys.path that hold a libcupti, in path order."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    if spec is None or spec.submodule_search_locations is None:
        return []
    found = []
    for location in spec.submodule_search_locations:
        for sub, name in CUPTI_LOCATIONS:
            lib = Path(location) / sub
            if (lib / name).is_file() and str(lib) not in found:
                found.append(str(lib))
    return found


def register_nvidia_library_dirs() -> list[str]:
    """Tells the native library about :func:`nvidia_library_dirs`; returns them."""
    add = getattr(_core, "add_library_search_dir", None)
    if add is None:
        return []
    dirs = nvidia_library_dirs()
    for directory in dirs:
        add(directory)
    return dirs
