# SPDX-License-Identifier: Apache-2.0
"""Prometheus exposition of gpudiag's diagnoses (not raw device counters: DCGM does those).

The exposition is written by C++ (``gpudiag._core.render_prometheus``): one metric per figure of
the report, named after its section and key with the base unit of its declared unit
(``gpudiag_timeline_idle_ratio``, ``gpudiag_memory_reserved_bytes``,
``gpudiag_timeline_step_time_seconds``), findings as ``gpudiag_finding{id,severity}`` and
``gpudiag_findings{severity}``, capture counts as counters; labels ``hostname`` and
``Hostname`` (dcgm-exporter's host label since 4.8.3 and before it: both by default, see
``host_labels``), ``rank`` (in a multi-rank job) and, for figures about one GPU, dcgm-exporter's
``gpu``, ``UUID``, ``pci_bus_id`` and ``modelName``. This module only serves it.

``serve()`` exposes a live session on an HTTP endpoint bound to 127.0.0.1 unless told otherwise
(a session started with ``http=`` serves ``/metrics`` itself, from C++: docs/http.md).
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Callable

from gpudiag import _core
from gpudiag._errors import FailedPreconditionError
from gpudiag._report import Report

if TYPE_CHECKING:  # typing.Self is 3.11+; typing_extensions is only needed by type checkers
    from typing_extensions import Self

DEFAULT_PORT = 9808
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


# Which host label(s) to write: dcgm-exporter >= 4.8.3 writes `hostname`, older ones `Hostname`.
HOST_LABELS = {"both": (True, True), "hostname": (True, False), "Hostname": (False, True)}


def exposition(report: Report | Sequence[Report], *, host_labels: str = "both") -> str:
    """The Prometheus text format (0.0.4) for a Report (every rank included), or for several
    reports at once without duplicate series. ``host_labels``: ``"both"`` (default),
    ``"hostname"`` (dcgm-exporter >= 4.8.3 only) or ``"Hostname"`` (older ones only)."""
    if host_labels not in HOST_LABELS:
        raise ValueError(f"host_labels must be one of {sorted(HOST_LABELS)}, got {host_labels!r}")
    new, legacy = HOST_LABELS[host_labels]
    if isinstance(report, Report):
        return str(
            _core.render_prometheus(
                report.native(), hostname_label=new, legacy_hostname_label=legacy
            )
        )
    return str(
        _core.render_prometheus(
            [r.native() for r in report], hostname_label=new, legacy_hostname_label=legacy
        )
    )


class MetricsServer:
    """A running /metrics endpoint; ``close()`` stops it."""

    def __init__(self, server: http.server.ThreadingHTTPServer, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{host}:{port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(
    source: Any = None,
    *,
    port: int = DEFAULT_PORT,
    addr: str = "127.0.0.1",
    min_interval_s: float = 5.0,
    host_labels: str = "both",
) -> MetricsServer:
    """Serves ``/metrics`` for ``source`` (a Session, a Report, or a callable returning a Report;
    default: the current session) from a daemon thread.

    It binds to 127.0.0.1 unless ``addr`` says otherwise (``"0.0.0.0"`` exposes it to the network:
    the diagnoses name your code). Reports are recomputed at most every ``min_interval_s``.
    Pass ``port=0`` for any free port (see ``.address``). ``host_labels`` as for
    ``exposition``.
    """
    if host_labels not in HOST_LABELS:
        raise ValueError(f"host_labels must be one of {sorted(HOST_LABELS)}, got {host_labels!r}")
    get_report = _report_getter(source)
    cache: dict[str, Any] = {"at": -1e18, "text": ""}
    lock = threading.Lock()

    def metrics_text() -> str:
        with lock:
            now = time.monotonic()
            if now - cache["at"] >= min_interval_s:
                cache["text"] = exposition(get_report(), host_labels=host_labels)
                cache["at"] = now
            return str(cache["text"])

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] not in ("/metrics", "/"):
                self.send_error(404, "only /metrics is served")
                return
            try:
                body = metrics_text().encode("utf-8")
                status = 200
            except Exception as e:  # noqa: BLE001 - report the failure to the scraper, keep serving
                body = f"# gpudiag: report failed: {e}\n".encode()
                status = 500
            self.send_response(status)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, _format: str, *_args: Any) -> None:
            return  # scrapes every few seconds would flood the program's stderr

    server = http.server.ThreadingHTTPServer((addr, port), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="gpudiag-metrics", daemon=True)
    thread.start()
    return MetricsServer(server, thread)


def _report_getter(source: Any) -> Callable[[], Any]:
    if source is None:
        from gpudiag import _session

        def current() -> Any:
            s = _session.current_session()
            if s is None:
                raise FailedPreconditionError("no gpudiag session is running")
            return s.report()

        return current
    if callable(source) and not hasattr(source, "report") and not hasattr(source, "to_dict"):
        return source  # type: ignore[no-any-return]
    if hasattr(source, "report"):
        return source.report  # type: ignore[no-any-return]
    return lambda: source
