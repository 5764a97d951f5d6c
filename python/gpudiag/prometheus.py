# SPDX-License-Identifier: Apache-2.0
"""Prometheus exposition of gpudiag's diagnoses (not raw device counters: DCGM does those).

Each report becomes gauges labelled by ``pid``, ``rank``, ``host`` and, where a figure belongs to
one, ``device``: the input-wait share, idle time by cause, fragmentation, leak rate, memory
watermarks and throttling, plus the findings by id and severity and every other figure under
``gpudiag_figure``. Values use Prometheus base units: seconds, bytes, ratios (0..1).

``serve()`` exposes a live session on an HTTP endpoint bound to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import http.server
import math
import re
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from gpudiag._errors import FailedPreconditionError

if TYPE_CHECKING:  # typing.Self is 3.11+; typing_extensions is only needed by type checkers
    from typing_extensions import Self

DEFAULT_PORT = 9808
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_HELP = {
    "gpudiag_input_wait_ratio": "Share of step time the loop waited for input (0..1).",
    "gpudiag_idle_ratio": "Share of time the GPU was idle, by cause (0..1).",
    "gpudiag_fragmentation_ratio": "Allocator fragmentation (0..1).",
    "gpudiag_fragmentation_bytes": "Device memory reserved but unusable because of fragmentation.",
    "gpudiag_leak_rate_bytes_per_step": "Growth of memory held across steps.",
    "gpudiag_leak_rate_bytes_per_second": "Growth of memory held over time.",
    "gpudiag_memory_watermark_bytes": "Memory high-water marks.",
    "gpudiag_throttle_ratio": "Share of time the GPU clocks were throttled, by reason (0..1).",
    "gpudiag_findings": "Number of findings by severity.",
    "gpudiag_finding": "1 for each finding present, by id and severity.",
    "gpudiag_figure": "Every report figure, in its report unit (see the unit label).",
    "gpudiag_events_total": "Events the analysis received.",
    "gpudiag_events_dropped_total": "Events lost to full buffers or skipped on import.",
}

_NAME_RE = re.compile(r"[^a-zA-Z0-9_]")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: dict[str, Any]) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{_escape(str(v))}"' for k, v in sorted(labels.items()))
    return "{" + inner + "}"


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _base_unit(value: float, unit: str) -> float:
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "percent": 0.01}.get(unit, 1.0)
    return value * scale


def _specific_metric(section: str, key: str, unit: str) -> tuple[str, dict[str, str]] | None:
    """The dedicated metric name (and extra labels) for a figure that is one of the diagnoses."""
    k = key.lower()
    ratio = unit in ("fraction", "percent")
    if ratio and "input_wait" in k:
        return "gpudiag_input_wait_ratio", {}
    if ratio and (k.startswith("idle_") or "_idle_" in k):
        cause = k.split("idle_", 1)[1].replace("_share", "").replace("_fraction", "") or "all"
        return "gpudiag_idle_ratio", {"cause": cause}
    if "fragmentation" in k:
        if ratio:
            return "gpudiag_fragmentation_ratio", {"measure": k}
        if unit == "bytes":
            return "gpudiag_fragmentation_bytes", {"measure": k}
    if unit == "bytes/step" and ("leak" in k or "growth" in k):
        return "gpudiag_leak_rate_bytes_per_step", {}
    if unit == "bytes/s" and ("leak" in k or "growth" in k):
        return "gpudiag_leak_rate_bytes_per_second", {}
    if unit == "bytes" and section == "memory" and k == "inactive_split_bytes":
        # Free but stranded in partly used segments: what fragmentation costs.
        return "gpudiag_fragmentation_bytes", {"measure": k}
    if unit == "bytes" and section == "memory" and any(
            w in k for w in ("peak", "watermark", "high_water")):
        return "gpudiag_memory_watermark_bytes", {"watermark": k}
    if ratio and "throttl" in k:
        return "gpudiag_throttle_ratio", {"reason": k}
    return None


def exposition(report: Any, *, extra_labels: dict[str, str] | None = None) -> str:
    """The Prometheus text format (0.0.4) for a Report (or its dict), every rank included."""
    data = report.to_dict() if hasattr(report, "to_dict") else dict(report)
    samples: dict[str, list[str]] = {name: [] for name in _HELP}
    reports = [data, *data.get("ranks", [])] if data.get("ranks") else [data]
    for rep in reports:
        source = rep.get("source", {})
        base = {"pid": source.get("pid", 0), "rank": source.get("rank", -1),
                "host": source.get("hostname", "")}
        base.update(extra_labels or {})
        capture = rep.get("capture", {})
        samples["gpudiag_events_total"].append(
            f"gpudiag_events_total{_labels(base)} {_number(float(capture.get('events', 0)))}")
        samples["gpudiag_events_dropped_total"].append(
            f"gpudiag_events_dropped_total{_labels(base)} "
            f"{_number(float(capture.get('dropped', 0)))}")
        by_severity = {"info": 0, "warning": 0, "critical": 0}
        for f in rep.get("findings", []):
            severity = str(f.get("severity", "info"))
            by_severity[severity] = by_severity.get(severity, 0) + 1
            labels = {**base, "id": f.get("id", ""), "severity": severity}
            if int(f.get("device", -1)) >= 0:
                labels["device"] = f["device"]
            samples["gpudiag_finding"].append(f"gpudiag_finding{_labels(labels)} 1.0")
            for key, fig in f.get("figures", {}).items():
                _add_figure(samples, f"finding.{f.get('id', '')}", key, fig, labels)
        for severity, count in sorted(by_severity.items()):
            samples["gpudiag_findings"].append(
                f"gpudiag_findings{_labels({**base, 'severity': severity})} {_number(count)}")
        for section in rep.get("sections", []):
            for key, fig in section.get("figures", {}).items():
                _add_figure(samples, str(section.get("id", "")), key, fig, base)
    lines = []
    for name, rows in samples.items():
        if not rows:
            continue
        lines.append(f"# HELP {name} {_HELP[name]}")
        kind = "counter" if name.endswith("_total") else "gauge"
        lines.append(f"# TYPE {name} {kind}")
        lines.extend(dict.fromkeys(rows))  # one sample per label set
    return "\n".join(lines) + "\n"


def _add_figure(samples: dict[str, list[str]], section: str, key: str, fig: dict[str, Any],
                base: dict[str, Any]) -> None:
    unit = str(fig.get("unit", ""))
    value = float(fig.get("value", 0.0))
    safe_key = _NAME_RE.sub("_", key)
    samples["gpudiag_figure"].append(
        f"gpudiag_figure{_labels({**base, 'section': section, 'key': safe_key, 'unit': unit})} "
        f"{_number(value)}")
    specific = _specific_metric(section.split(".", maxsplit=1)[0], key, unit)
    if specific is not None and not section.startswith("finding."):
        name, extra = specific
        samples[name].append(f"{name}{_labels({**base, **extra})} "
                             f"{_number(_base_unit(value, unit))}")


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


def serve(source: Any = None, *, port: int = DEFAULT_PORT, addr: str = "127.0.0.1",
          min_interval_s: float = 5.0) -> MetricsServer:
    """Serves ``/metrics`` for ``source`` (a Session, a Report, or a callable returning a Report;
    default: the current session) from a daemon thread.

    It binds to 127.0.0.1 unless ``addr`` says otherwise (``"0.0.0.0"`` exposes it to the network:
    the diagnoses name your code). Reports are recomputed at most every ``min_interval_s``.
    Pass ``port=0`` for any free port (see ``.address``).
    """
    get_report = _report_getter(source)
    cache: dict[str, Any] = {"at": -1e18, "text": ""}
    lock = threading.Lock()

    def metrics_text() -> str:
        with lock:
            now = time.monotonic()
            if now - cache["at"] >= min_interval_s:
                cache["text"] = exposition(get_report())
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
