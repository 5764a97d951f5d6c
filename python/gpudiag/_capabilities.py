# SPDX-License-Identifier: Apache-2.0
"""``gpudiag.capabilities()``: what gpudiag can do in this process, and why not more.

"Status" means an error result everywhere else in gpudiag (C++ ``Status``, C
``gpudiag_status_t``); the capability report is called Capabilities. ``gpudiag.status()`` and
``gpudiag.Status`` remain as deprecated aliases.
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any

from gpudiag import _core


@dataclass
class Capabilities:
    """What is available. ``print(gpudiag.capabilities())`` explains it in plain words.

    ``level`` and ``capturing`` are named as in C++'s ``CaptureStatus``.
    """

    version: str
    level: str
    reasons: list[str] = field(default_factory=list)
    live_sessions: bool = False
    device_count: int = 0
    driver_version: str = ""
    cupti_library: str = ""
    torch_version: str | None = None
    torch_cuda: bool | None = None
    torch_reason: str = ""
    capturing: bool = False

    def __str__(self) -> str:
        lines = [f"gpudiag {self.version}: capture level {self.level}"]
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
        lines.append(f"  session capturing: {'yes' if self.capturing else 'no'}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @property
    def capture_level(self) -> str:
        """Deprecated name of :attr:`level`."""
        warnings.warn(
            "Capabilities.capture_level is deprecated: use .level", DeprecationWarning, stacklevel=2
        )
        return self.level

    @property
    def session_running(self) -> bool:
        """Deprecated name of :attr:`capturing`."""
        warnings.warn(
            "Capabilities.session_running is deprecated: use .capturing",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.capturing


def capabilities() -> Capabilities:
    """Probes capture without starting it; never creates a CUDA context.

    PyTorch is described only from what is importable and already imported: this does not import
    torch (slow) and does not initialise CUDA.
    """
    from gpudiag import _session
    from gpudiag._libraries import register_nvidia_library_dirs

    register_nvidia_library_dirs()  # pip's CUDA libraries first, so the probe maps torch's CUPTI
    probe = _core.probe_capture()
    caps = Capabilities(
        version=str(_core.__version__),
        level=str(_core.capture_level_name(probe.level)),
        reasons=list(probe.reasons),
        live_sessions=_session.native_sessions_available(),
        device_count=int(probe.device_count),
        driver_version=str(probe.driver_version),
        cupti_library=str(probe.cupti_library),
    )
    torch = sys.modules.get("torch")
    if torch is not None:
        caps.torch_version = str(getattr(torch, "__version__", "?"))
        caps.torch_cuda = bool(getattr(getattr(torch, "version", None), "cuda", None))
    elif importlib.util.find_spec("torch") is not None:
        caps.torch_reason = "installed, not imported yet (gpudiag instruments it once it is)"
    else:
        caps.torch_reason = "not installed (pip install 'gpudiag[torch]' for step/memory details)"
    current = _session.current_session()
    caps.capturing = current is not None and current.running
    return caps


def status() -> Capabilities:
    """Deprecated name of :func:`capabilities`."""
    warnings.warn(
        "gpudiag.status() is deprecated: use gpudiag.capabilities()",
        DeprecationWarning,
        stacklevel=2,
    )
    return capabilities()


class Status(Capabilities):
    """Deprecated name of :class:`Capabilities`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        warnings.warn(
            "gpudiag.Status is deprecated: use gpudiag.Capabilities",
            DeprecationWarning,
            stacklevel=2,
        )
        super().__init__(*args, **kwargs)
