# SPDX-License-Identifier: Apache-2.0
"""The Python face of a gpudiag report: findings, plain text, JSON, Prometheus and notebook HTML.

A :class:`Report` holds the C++ report (``gpudiag._core.Report``) and reads it through its JSON
document (the schema ``render_json`` writes, documented in README.md). Every way in goes through
C++: a live session or an offline analysis hands over the C++ report, and a saved ``.json`` file,
a dict or the reports gathered from other ranks are read by ``_core.parse_report_json``. Python
holds no copy of the schema.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpudiag import _core


def _value(figure: dict[str, Any]) -> float:
    """A figure's value; JSON has no NaN, so a number that was not one is written as null."""
    value = figure.get("value")
    return math.nan if value is None else float(value)


def _severity_rank(name: str) -> int:
    """The order of severities is the C++ enum's (info < warning < critical)."""
    return int(getattr(_core.Severity, name, _core.Severity.info))


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
        return _value(entry) if entry is not None else default

    @property
    def predicted_saving(self) -> dict[str, dict[str, Any]]:
        """What fixing this is worth, when predicted: figures ``saving_ns`` (per step),
        ``share`` (of the step time) and ``step_time_ns`` (predicted); {} otherwise."""
        predicted = self._data.get("predicted_saving", {})
        return {k: v for k, v in predicted.items() if k != "shared_with"}

    @property
    def saving_shared_with(self) -> list[str]:
        """The findings (ids) whose predicted savings come from the same time as this one's:
        fixing both does not save the sum (see ``Report.fix_all_saving``)."""
        return [str(i) for i in self._data.get("predicted_saving", {}).get("shared_with", [])]

    def at_least(self, severity: str) -> bool:
        """True when this finding is at ``severity`` ("info", "warning", "critical") or above."""
        if not hasattr(_core.Severity, severity):
            raise ValueError(f"not a severity: {severity!r} (info, warning or critical)")
        return _severity_rank(self.severity) >= _severity_rank(severity)

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self._data)

    def __repr__(self) -> str:
        return f"Finding(id={self.id!r}, severity={self.severity!r}, title={self.title!r})"


class Report:
    """A diagnosis. ``print(report.summary())`` in a terminal; display it in a notebook."""

    def __init__(self, data: dict[str, Any] | Any) -> None:
        """From a report's JSON document as a dict, or a ``gpudiag._core.Report``."""
        if isinstance(data, dict):
            native = _core.parse_report_json(json.dumps(data, allow_nan=False))
        elif isinstance(data, _core.Report):
            native = data
        else:
            raise TypeError(
                "a report is a dict (the JSON document) or a gpudiag._core.Report, "
                f"not {type(data).__name__}"
            )
        self._native = native
        self._data: dict[str, Any] = json.loads(_core.render_json(native, compact=True))

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def from_native(cls, native: Any) -> Report:
        """Wraps a ``gpudiag._core.Report``."""
        return cls(native)

    @classmethod
    def from_json(cls, text: str) -> Report:
        """Reads a report's JSON document (raises CorruptDataError for anything else)."""
        return cls(_core.parse_report_json(text))

    @classmethod
    def load(cls, path: str | Path) -> Report:
        """Reads a report saved with :meth:`save` as JSON."""
        return cls.from_json(Path(path).read_text(encoding="utf-8"))

    # ---- content ------------------------------------------------------------------------------
    @property
    def findings(self) -> list[Finding]:
        """Findings, what to fix first on top (failures, then by predicted saving, then severity)."""
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
        return _value(entry) if entry is not None else default

    @property
    def fix_all_saving(self) -> dict[str, dict[str, Any]]:
        """What fixing every cause found together is worth (the critical path replayed with all
        of them removed): figures ``saving_ns``, ``share``, ``step_time_ns``; {} when no finding
        predicted a saving. The findings' own savings may overlap; this does not."""
        return dict(self._data.get("fix_all_saving", {}))

    @property
    def headline(self) -> str:
        """The report's first line, as every renderer opens with it: what was found, and what
        the input could not show ("No problems found in steps and input waits; GPU activity,
        device memory and device health were not observed.")."""
        return str(self._data.get("headline", ""))

    @property
    def observed(self) -> list[str] | None:
        """The kinds of evidence the input had (``gpudiag._core.Evidence`` names: "steps",
        "input_waits", "gpu_activity", "device_memory", "device_health"); None for a report
        saved before reports listed them."""
        observed = self._data.get("observed")
        return None if observed is None else [str(o) for o in observed]

    @property
    def notes(self) -> list[str]:
        return list(self._data.get("notes", []))

    @property
    def source(self) -> dict[str, Any]:
        return dict(self._data.get("source", {}))

    @property
    def input(self) -> dict[str, Any]:
        """What part of its input the report covers: ``complete``, ``events`` (read),
        ``first_ns``/``last_ns`` (their span) and ``missing`` (what could not be read, in plain
        language)."""
        return copy.deepcopy(self._data.get("input", {}))

    @property
    def complete(self) -> bool:
        """False when part of the input could not be read (a file cut short, damaged parts, a
        rank without its trace): findings then cover only the part that was read."""
        return bool(self._data.get("input", {}).get("complete", True))

    @property
    def ranks(self) -> list[Report]:
        """Per-rank reports of a multi-rank job (empty for one process)."""
        return [Report(r) for r in self._native.ranks]

    def all_findings(self) -> Iterator[Finding]:
        """The job's findings, then every rank's."""
        yield from self.findings
        for rank in self.ranks:
            yield from rank.all_findings()

    def worst_severity(self) -> str | None:
        """The most severe finding's severity, over all ranks; None without findings."""
        worst = None
        for f in self.all_findings():
            if worst is None or _severity_rank(f.severity) > _severity_rank(worst):
                worst = f.severity
        return worst

    # ---- renderings ---------------------------------------------------------------------------
    def summary(self) -> str:
        """Plain text for terminals and logs (the C++ renderer's output)."""
        return str(_core.render_text(self.native()))

    def to_dict(self) -> dict[str, Any]:
        """The JSON document as Python objects (a copy)."""
        return copy.deepcopy(self._data)

    def to_json(self, *, compact: bool = False) -> str:
        """The JSON document as C++ writes it (indented, or one line)."""
        return str(_core.render_json(self._native, compact=compact)).rstrip("\n")

    def to_prometheus(self) -> str:
        """Prometheus text exposition (see ``gpudiag.prometheus``)."""
        return str(_core.render_prometheus(self._native))

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
        """The ``gpudiag._core.Report``."""
        return self._native


__all__ = ["Finding", "Report"]
