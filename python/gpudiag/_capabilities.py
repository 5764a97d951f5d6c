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
from dataclasses import asdict, dataclass, field
from typing import Any

from gpudiag import _core


@dataclass
class StackIssue:
    """A mismatch in the software stack that breaks something, with the fix (C++ ``StackIssue``;
    the ids are listed in docs/findings.md)."""

    id: str
    title: str
    problem: str
    fix: str


@dataclass
class SoftwareStack:
    """Which NVIDIA software this process runs on (C++ ``SoftwareStack``); "" means unknown."""

    driver_version: str = ""
    driver_cuda: str = ""  # the newest CUDA the driver supports
    framework: str = ""  # "torch", "python"
    framework_version: str = ""
    framework_cuda: str = ""  # the CUDA runtime the framework was built for; "" for a CPU build
    cudnn: str = ""
    cuda_wheels_dir: str = ""  # pip's nvidia folder the framework's CUDA libraries come from
    cupti_in_wheels: bool = False
    cupti: str = ""  # "CUPTI 12.4 (API version 22)"; "" when none is in use
    cupti_cuda: str = ""
    cupti_library: str = ""
    cupti_mapped: list[str] = field(default_factory=list)  # every libcupti mapped in the process

    @classmethod
    def from_core(cls, s: Any) -> SoftwareStack:
        f = s.framework
        return cls(
            driver_version=str(s.driver_version),
            driver_cuda=str(s.driver_cuda),
            framework=str(f.name),
            framework_version=str(f.version),
            framework_cuda=str(f.cuda_version),
            cudnn=str(f.cudnn_version),
            cuda_wheels_dir=str(f.cuda_wheels_dir),
            cupti_in_wheels=bool(f.cupti_in_wheels),
            cupti=str(s.cupti),
            cupti_cuda=str(s.cupti_cuda),
            cupti_library=str(s.cupti_library),
            cupti_mapped=[str(p) for p in s.cupti_mapped],
        )

    def lines(self, device_count: int = 0) -> list[str]:
        """The stack in plain words, one part a line."""
        driver = self.driver_version or "none found"
        if self.driver_cuda:
            driver += f" (supports CUDA {self.driver_cuda})"
        out = [f"driver: {driver}"]
        if device_count:
            out.append(f"devices: {device_count}")
        if self.framework == "torch":
            out.append(self._framework_line())
        if self.cupti:
            out.append(f"CUPTI: {self.cupti} at {self.cupti_library}")
        else:
            out.append("CUPTI: none in use")
        out.extend(f"also mapped: {p}" for p in self.cupti_mapped if p != self.cupti_library)
        return out

    def _framework_line(self) -> str:
        built = f"built for CUDA {self.framework_cuda}" if self.framework_cuda else "CPU build"
        cudnn = f", cuDNN {self.cudnn}" if self.cudnn else ""
        wheels = f", CUDA from {self.cuda_wheels_dir}" if self.cuda_wheels_dir else ""
        return f"PyTorch {self.framework_version} ({built}{cudnn}{wheels})"


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
    stack: SoftwareStack = field(default_factory=SoftwareStack)
    stack_issues: list[StackIssue] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"gpudiag {self.version}: capture level {self.level}", "  can:"]
        lines.extend(f"    {a}" for a in self.available)
        if not self.live_sessions:
            lines.append("    (live sessions are not built in this gpudiag._core: analysis only)")
        lines.append("  cannot:")
        lines.extend(f"    {r}" for r in self.reasons)
        lines.append("  stack:")
        lines.extend(f"    {line}" for line in self.stack.lines(self.device_count))
        if self.stack.framework != "torch":  # not imported (or a _core without the verdict)
            torch = f"PyTorch {self.torch_version}" if self.torch_version else "PyTorch:"
            lines.append(f"    {torch} {self.torch_reason}".rstrip())
        for issue in self.stack_issues:
            lines.append(f"  problem: {issue.title}")
            lines.append(f"    {issue.problem}")
            lines.append(f"    fix: {issue.fix}")
        lines.append(f"  session capturing: {'yes' if self.capturing else 'no'}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

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
    stack = getattr(probe, "stack", None)  # absent from a _core older than the stack verdict
    if stack is not None:
        caps.stack = SoftwareStack.from_core(stack)
        caps.stack_issues = [
            StackIssue(id=i.id, title=i.title, problem=i.problem, fix=i.fix)
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
