# SPDX-License-Identifier: Apache-2.0
"""The Python face of a gpudiag report: findings, plain text, JSON and notebook HTML.

A :class:`Report` wraps the report's JSON document (the schema ``render_json`` writes, documented in
README.md), so it can be built from a live session, an offline analysis, a saved ``.json`` file or
the reports gathered from other ranks alike. The C++ report it came from is kept when there is one;
otherwise it is rebuilt on demand for the text rendering, which stays in C++.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpudiag import _core

_SEVERITY_ORDER = {"info": 0, "warning": 1, "critical": 2}


class Finding:
    """One diagnosis: ``id``, ``severity``, ``title``, ``summary``, figures, sites, advice."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    @property
    def id(self) -> str:
        return str(self._data.get("id", ""))

    @property
    def severity(self) -> str:
        return str(self._data.get("severity", "info"))

    @property
    def title(self) -> str:
        return str(self._data.get("title", ""))

    @property
    def summary(self) -> str:
        return str(self._data.get("summary", ""))

    @property
    def confidence(self) -> float:
        return float(self._data.get("confidence", 1.0))

    @property
    def rank(self) -> int:
        return int(self._data.get("rank", -1))

    @property
    def device(self) -> int:
        return int(self._data.get("device", -1))

    @property
    def figures(self) -> dict[str, dict[str, Any]]:
        return dict(self._data.get("figures", {}))

    @property
    def sites(self) -> list[dict[str, Any]]:
        return list(self._data.get("sites", []))

    @property
    def evidence(self) -> list[str]:
        return list(self._data.get("evidence", []))

    @property
    def advice(self) -> list[str]:
        return list(self._data.get("advice", []))

    def figure(self, key: str, default: float | None = None) -> float | None:
        """The value of figure ``key``, or ``default``."""
        entry = self._data.get("figures", {}).get(key)
        return float(entry["value"]) if entry is not None else default

    def at_least(self, severity: str) -> bool:
        """True when this finding is at ``severity`` ("info", "warning", "critical") or above."""
        return _SEVERITY_ORDER.get(self.severity, 0) >= _SEVERITY_ORDER[severity]

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self._data)

    def __repr__(self) -> str:
        return f"Finding(id={self.id!r}, severity={self.severity!r}, title={self.title!r})"


class Report:
    """A diagnosis. ``print(report.summary())`` in a terminal; display it in a notebook."""

    def __init__(self, data: dict[str, Any], native: Any = None) -> None:
        if not isinstance(data, dict):
            raise TypeError(f"a report is a dict (the JSON document), not {type(data).__name__}")
        self._data = data
        self._native = native

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def from_native(cls, native: Any) -> Report:
        """Wraps a ``gpudiag._core.Report``."""
        return cls(json.loads(_core.render_json(native)), native)

    @classmethod
    def from_json(cls, text: str) -> Report:
        return cls(json.loads(text))

    @classmethod
    def load(cls, path: str | Path) -> Report:
        """Reads a report saved with :meth:`save` as JSON."""
        return cls.from_json(Path(path).read_text(encoding="utf-8"))

    # ---- content ------------------------------------------------------------------------------
    @property
    def findings(self) -> list[Finding]:
        """Findings, most severe first."""
        return [Finding(f) for f in self._data.get("findings", [])]

    def finding(self, finding_id: str) -> Finding | None:
        return next((f for f in self.findings if f.id == finding_id), None)

    @property
    def sections(self) -> list[dict[str, Any]]:
        return list(self._data.get("sections", []))

    def section(self, section_id: str) -> dict[str, Any] | None:
        return next((s for s in self._data.get("sections", []) if s.get("id") == section_id), None)

    def figure(self, section_id: str, key: str, default: float | None = None) -> float | None:
        """The value of figure ``key`` of section ``section_id``, or ``default``."""
        section = self.section(section_id)
        entry = (section or {}).get("figures", {}).get(key)
        return float(entry["value"]) if entry is not None else default

    @property
    def notes(self) -> list[str]:
        return list(self._data.get("notes", []))

    @property
    def source(self) -> dict[str, Any]:
        return dict(self._data.get("source", {}))

    @property
    def ranks(self) -> list[Report]:
        """Per-rank reports of a multi-rank job (empty for one process)."""
        return [Report(r) for r in self._data.get("ranks", [])]

    def all_findings(self) -> Iterator[Finding]:
        """The job's findings, then every rank's."""
        yield from self.findings
        for rank in self.ranks:
            yield from rank.all_findings()

    def worst_severity(self) -> str | None:
        """The most severe finding's severity, over all ranks; None without findings."""
        worst = None
        for f in self.all_findings():
            if worst is None or _SEVERITY_ORDER.get(f.severity, 0) > _SEVERITY_ORDER[worst]:
                worst = f.severity
        return worst

    # ---- renderings ---------------------------------------------------------------------------
    def summary(self) -> str:
        """Plain text for terminals and logs (the C++ renderer's output)."""
        return str(_core.render_text(self.native()))

    def to_dict(self) -> dict[str, Any]:
        """The JSON document as Python objects (a copy)."""
        return copy.deepcopy(self._data)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self._data, indent=indent)

    def to_html(self, *, full_page: bool = False) -> str:
        """Self-contained HTML with inline SVG plots (no scripts, no external resources)."""
        from gpudiag import _html

        return _html.render_report(self._data, full_page=full_page)

    def _repr_html_(self) -> str:
        return self.to_html()

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        worst = self.worst_severity() or "none"
        return f"<gpudiag.Report: {len(self._data.get('findings', []))} findings, worst {worst}>"

    def save(self, path: str | Path) -> Path:
        """Writes the report; the suffix picks the format: .json, .html or text (anything else)."""
        p = Path(path)
        if p.suffix == ".json":
            p.write_text(self.to_json() + "\n", encoding="utf-8")
        elif p.suffix in (".html", ".htm"):
            p.write_text(self.to_html(full_page=True), encoding="utf-8")
        else:
            p.write_text(self.summary(), encoding="utf-8")
        return p

    def native(self) -> Any:
        """The ``gpudiag._core.Report`` (rebuilt from the JSON document when needed)."""
        if self._native is None:
            self._native = to_native(self._data)
        return self._native


def _figures(obj: dict[str, Any]) -> list[Any]:
    out = []
    for key, entry in obj.get("figures", {}).items():
        f = _core.Figure()
        f.key = key
        f.value = float(entry.get("value", 0.0))
        f.unit = str(entry.get("unit", ""))
        f.label = str(entry.get("label", ""))
        out.append(f)
    return out


def to_native(data: dict[str, Any]) -> Any:
    """Builds a ``gpudiag._core.Report`` from a report's JSON document (inverse of render_json)."""
    r = _core.Report()
    r.schema_version = int(data.get("schema_version", 1))
    src = data.get("source", {})
    s = _core.SourceInfo()
    s.producer = str(src.get("producer", ""))
    s.description = str(src.get("description", ""))
    s.simulated = bool(src.get("simulated", False))
    s.rank = int(src.get("rank", -1))
    s.world_size = int(src.get("world_size", 0))
    s.pid = int(src.get("pid", 0))
    s.hostname = str(src.get("hostname", ""))
    devices = []
    for d in src.get("devices", []):
        dev = _core.DeviceInfo()
        dev.ordinal = int(d.get("ordinal", 0))
        dev.name = str(d.get("name", ""))
        dev.total_memory_bytes = int(d.get("total_memory_bytes", 0))
        dev.uuid = str(d.get("uuid", ""))
        devices.append(dev)
    s.devices = devices
    s.properties = [(str(k), str(v)) for k, v in src.get("properties", {}).items()]
    r.source = s
    cap = data.get("capture", {})
    c = _core.SourceSummary()
    c.events = int(cap.get("events", 0))
    c.dropped = int(cap.get("dropped", 0))
    c.truncated = bool(cap.get("truncated", False))
    c.notes = [str(n) for n in cap.get("notes", [])]
    r.capture = c
    findings = []
    for fd in data.get("findings", []):
        f = _core.Finding()
        f.id = str(fd.get("id", ""))
        f.severity = getattr(_core.Severity, str(fd.get("severity", "info")), _core.Severity.info)
        f.title = str(fd.get("title", ""))
        f.summary = str(fd.get("summary", ""))
        f.confidence = float(fd.get("confidence", 1.0))
        f.rank = int(fd.get("rank", -1))
        f.device = int(fd.get("device", -1))
        f.figures = _figures(fd)
        f.site_unit = str(fd.get("site_unit", ""))
        sites = []
        for sd in fd.get("sites", []):
            site = _core.CallSite()
            site.location = str(sd.get("location", ""))
            site.value = float(sd.get("value", 0.0))
            site.share = float(sd.get("share", 0.0))
            site.detail = str(sd.get("detail", ""))
            sites.append(site)
        f.sites = sites
        f.evidence = [str(e) for e in fd.get("evidence", [])]
        f.advice = [str(a) for a in fd.get("advice", [])]
        findings.append(f)
    r.findings = findings
    sections = []
    for sd in data.get("sections", []):
        sec = _core.Section()
        sec.id = str(sd.get("id", ""))
        sec.title = str(sd.get("title", ""))
        sec.figures = _figures(sd)
        tables = []
        for td in sd.get("tables", []):
            t = _core.Table()
            t.id = str(td.get("id", ""))
            t.title = str(td.get("title", ""))
            t.columns = [str(col) for col in td.get("columns", [])]
            t.rows = [
                [float(v) if isinstance(v, (int, float)) and v is not None else str(v) for v in row]
                for row in td.get("rows", [])
            ]
            tables.append(t)
        sec.tables = tables
        series = []
        for ser in sd.get("series", []):
            one = _core.Series()
            one.id = str(ser.get("id", ""))
            one.title = str(ser.get("title", ""))
            one.unit = str(ser.get("unit", ""))
            one.points = [(float(x), float(y)) for x, y in ser.get("points", [])]
            series.append(one)
        sec.series = series
        sections.append(sec)
    r.sections = sections
    r.notes = [str(n) for n in data.get("notes", [])]
    r.ranks = [to_native(rank) for rank in data.get("ranks", [])]
    return r


__all__ = ["Finding", "Report", "to_native"]
