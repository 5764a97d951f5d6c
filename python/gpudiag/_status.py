# SPDX-License-Identifier: Apache-2.0
"""``gpudiag.status()``: what gpudiag can do in this process, and why not more."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass, field
from typing import Any

from gpudiag import _core
from gpudiag._libraries import register_nvidia_library_dirs


@dataclass
class Status:
    """What is available. ``print(gpudiag.status())`` explains it in plain words."""

    version: str
    capture_level: str
    reasons: list[str] = field(default_factory=list)
    live_sessions: bool = False
    device_count: int = 0
    driver_version: str = ""
    cupti_library: str = ""
    torch_version: str | None = None
    torch_cuda: bool | None = None
    torch_reason: str = ""
    session_running: bool = False

    def __str__(self) -> str:
        lines = [f"gpudiag {self.version}: capture level {self.capture_level}"]
        if self.device_count:
            lines.append(f"  devices: {self.device_count} (driver {self.driver_version or '?'})")
        if self.cupti_library:
            lines.append(f"  CUPTI: {self.cupti_library}")
        lines.extend(f"  not available: {r}" for r in self.reasons)
        if not self.live_sessions:
            lines.append("  live sessions: not built in this gpudiag._core (analysis only)")
        if self.torch_version:
            cuda = "with CUDA" if self.torch_cuda else "without CUDA"
            lines.append(f"  PyTorch {self.torch_version} ({cuda})")
        else:
            lines.append(f"  PyTorch: {self.torch_reason}")
        lines.append(f"  session running: {'yes' if self.session_running else 'no'}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def status() -> Status:
    """Probes capture without starting it; never creates a CUDA context.

    PyTorch is described only from what is importable and already imported: this does not import
    torch (slow) and does not initialise CUDA.
    """
    from gpudiag import _session

    live = _session.native_sessions_available()
    st = Status(version=str(_core.__version__), capture_level="no_gpu", live_sessions=live)
    if hasattr(_core, "probe_capture"):
        register_nvidia_library_dirs()
        probe = _core.probe_capture()
        st.capture_level = str(_core.capture_level_name(probe.level))
        st.reasons = list(probe.reasons)
        st.device_count = int(probe.device_count)
        st.driver_version = str(probe.driver_version)
        st.cupti_library = str(probe.cupti_library)
    else:
        st.reasons = ["live capture is not built into this gpudiag._core (probe_capture missing)"]
    torch = sys.modules.get("torch")
    if torch is not None:
        st.torch_version = str(getattr(torch, "__version__", "?"))
        st.torch_cuda = bool(getattr(getattr(torch, "version", None), "cuda", None))
    elif importlib.util.find_spec("torch") is not None:
        st.torch_reason = "installed, not imported yet (gpudiag instruments it once it is)"
    else:
        st.torch_reason = "not installed (pip install 'gpudiag[torch]' for step/memory details)"
    current = _session.current_session()
    st.session_running = current is not None and current.running
    return st
