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
    """What is available. ``print(gpudiag.capabilities())`` explains it in plain words: what
    gpudiag can do here, what it cannot and why, then the stack it found and its mismatches.

    ``level`` and ``capturing`` are named as in C++'s ``CaptureStatus``; ``available``,
    ``reasons``, ``stack`` and ``stack_issues`` come from it unchanged.
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
    available: list[str] = field(default_factory=list)
    stack: dict[str, Any] = field(default_factory=dict)
    stack_issues: list[dict[str, str]] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"gpudiag {self.version}: capture level {self.level}", "  can:"]
        lines.extend(f"    {a}" for a in self.available)
        if not self.live_sessions:
            lines.append("    (live sessions are not built in this gpudiag._core: analysis only)")
        lines.append("  cannot:")
        lines.extend(f"    {r}" for r in self.reasons)
        lines.append("  stack:")
        lines.extend(f"    {line}" for line in self._stack_lines())
        for issue in self.stack_issues:
            lines.append(f"  problem: {issue['title']}")
            lines.append(f"    {issue['problem']}")
            lines.append(f"    fix: {issue['fix']}")
        lines.append(f"  session capturing: {'yes' if self.capturing else 'no'}")
        return "\n".join(lines)

    def _stack_lines(self) -> list[str]:
        s = self.stack
        driver = s.get("driver_version") or "none found"
        if s.get("driver_cuda"):
            driver += f" (supports CUDA {s['driver_cuda']})"
        lines = [f"driver: {driver}"]
        if self.device_count:
            lines.append(f"devices: {self.device_count}")
        if self.torch_version:
            built = f"built for CUDA {s['framework_cuda']}" if s.get("framework_cuda") else "CPU build"
            cudnn = f", cuDNN {s['cudnn']}" if s.get("cudnn") else ""
            lines.append(f"PyTorch {self.torch_version} ({built}{cudnn})")
        else:
            lines.append(f"PyTorch: {self.torch_reason}")
        if s.get("cupti"):
            lines.append(f"CUPTI: {s['cupti']} at {s['cupti_library']}")
        else:
            lines.append("CUPTI: none in use")
        others = [p for p in s.get("cupti_mapped", []) if p != s.get("cupti_library")]
        lines.extend(f"also mapped: {p}" for p in others)
        return lines

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
    from gpudiag import _session, _stack
    from gpudiag._libraries import register_nvidia_library_dirs

    register_nvidia_library_dirs()  # pip's CUDA libraries first, so the probe maps torch's CUPTI
    _stack.publish()  # the framework side, from what is imported (never imports torch)
    probe = _core.probe_capture()
    caps = Capabilities(
        version=str(_core.__version__),
        level=str(_core.capture_level_name(probe.level)),
        reasons=list(probe.reasons),
        live_sessions=_session.native_sessions_available(),
        device_count=int(probe.device_count),
        driver_version=str(probe.driver_version),
        cupti_library=str(probe.cupti_library),
        available=list(getattr(probe, "available", [])),
    )
    stack = getattr(probe, "stack", None)
    if stack is not None:
        caps.stack = {
            "driver_version": stack.driver_version,
            "driver_cuda": stack.driver_cuda,
            "framework_cuda": stack.framework.cuda_version,
            "cudnn": stack.framework.cudnn_version,
            "cupti": stack.cupti,
            "cupti_library": stack.cupti_library,
            "cupti_mapped": list(stack.cupti_mapped),
        }
        caps.stack_issues = [
            {"id": i.id, "title": i.title, "problem": i.problem, "fix": i.fix}
            for i in probe.stack_issues
        ]
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
