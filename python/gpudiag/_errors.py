# SPDX-License-Identifier: Apache-2.0
"""The gpudiag exception family: the one place C++ status codes map to Python exceptions.

Every error gpudiag raises is a :class:`GpudiagError`. Subclasses also derive from the builtin
exception a Python programmer would expect (``ValueError`` for bad arguments, ``OSError`` for I/O),
so ordinary ``except`` clauses keep working. Each carries the C++ ``code`` name and the
``exit_code`` the ``gpudiag`` command line uses for it.
"""

from __future__ import annotations

#: Exit codes of the ``gpudiag`` command (documented in ``gpudiag --help``).
EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_INPUT = 3
EXIT_UNAVAILABLE = 4
#: ``gpudiag run``: the program it ran failed (exited non-zero or raised); a program ended by
#: signal N gives 128 + N instead, as a shell would.
EXIT_PROGRAM_FAILED = 5
#: ``gpudiag compare --fail-on``: the comparison's verdict is one --fail-on names (a regression).
EXIT_VERDICT = 6
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130


class GpudiagError(Exception):
    """Base class of every gpudiag error."""

    code = "unknown"
    exit_code = EXIT_INTERNAL


class InvalidArgumentError(GpudiagError, ValueError):
    """The caller passed something unusable (null, out of range, bad state)."""

    code = "invalid_argument"
    exit_code = EXIT_USAGE


class NotFoundError(GpudiagError, FileNotFoundError):
    """A file, device or name does not exist."""

    code = "not_found"
    exit_code = EXIT_INPUT


class UnavailableError(GpudiagError, RuntimeError):
    """A capability is absent here (no GPU, CUPTI held by another tool, feature not built)."""

    code = "unavailable"
    exit_code = EXIT_UNAVAILABLE


class CorruptDataError(GpudiagError, ValueError):
    """Input that is not what it claims to be (bad trace, hostile pickle)."""

    code = "corrupt_data"
    exit_code = EXIT_INPUT


class UnsupportedError(GpudiagError, ValueError):
    """Valid input of a kind or version gpudiag does not handle."""

    code = "unsupported"
    exit_code = EXIT_INPUT


class IoError(GpudiagError, OSError):
    """The operating system refused a read or write."""

    code = "io_error"
    exit_code = EXIT_INPUT


class ResourceExhaustedError(GpudiagError, RuntimeError):
    """A configured bound was reached (buffer cap, memory cap).

    On the command line this is an input error: an input needs more memory than gpudiag allows
    itself (a snapshot past the decoding budget), which is no bug to report."""

    code = "resource_exhausted"
    exit_code = EXIT_INPUT


class FailedPreconditionError(GpudiagError, RuntimeError):
    """The call is fine but not now (stop before start)."""

    code = "failed_precondition"
    exit_code = EXIT_USAGE


class InternalError(GpudiagError, RuntimeError):
    """A bug in gpudiag: please report it."""

    code = "internal"
    exit_code = EXIT_INTERNAL


_BY_CODE: dict[str, type[GpudiagError]] = {
    cls.code: cls
    for cls in (
        InvalidArgumentError,
        NotFoundError,
        UnavailableError,
        CorruptDataError,
        UnsupportedError,
        IoError,
        ResourceExhaustedError,
        FailedPreconditionError,
        InternalError,
    )
}


def error_from_status(code: str, message: str) -> GpudiagError:
    """The exception for a C++ status ``code`` name (called by the bindings)."""
    return _BY_CODE.get(code, InternalError)(message)


__all__ = [
    "EXIT_FINDINGS",
    "EXIT_INPUT",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_PROGRAM_FAILED",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "EXIT_VERDICT",
    "CorruptDataError",
    "FailedPreconditionError",
    "GpudiagError",
    "InternalError",
    "InvalidArgumentError",
    "IoError",
    "NotFoundError",
    "ResourceExhaustedError",
    "UnavailableError",
    "UnsupportedError",
    "error_from_status",
]
