# SPDX-License-Identifier: Apache-2.0
"""Where pip-installed CUDA libraries live, so live capture loads the libcupti PyTorch loads.

A process must hold one CUPTI. PyTorch's CUDA 13 wheels bring libcupti.so.13 in the ``nvidia``
namespace package (``site-packages/nvidia/cu13/lib``); when a session starts before
``import torch``, gpudiag loading the toolkit's copy would leave PyTorch to map a second one.
Naming the wheel's directory first makes gpudiag load that very file. Nothing is imported:
the directories are found with importlib's finders only.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from gpudiag import _core

CUPTI = "libcupti.so.13"


def nvidia_library_dirs() -> list[str]:
    """The ``nvidia/cu13/lib`` directories on sys.path that hold libcupti.so.13, in path order."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    if spec is None or spec.submodule_search_locations is None:
        return []
    found = []
    for location in spec.submodule_search_locations:
        lib = Path(location) / "cu13" / "lib"
        if (lib / CUPTI).is_file() and str(lib) not in found:
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
