# SPDX-License-Identifier: Apache-2.0
"""The Python face of a gpudiag report: findings, plain text, JSON, Prometheus and notebook HTML.

A :class:`Report` wraps the C++ report (``gpudiag._core.Report``) and a :class:`Finding` one of
its findings (``gpudiag._core.Finding``); ids, words, numbers and the renderings are read from
them as they are. Every way in goes through C++: a live session or an offline analysis hands over
the C++ report, and a saved ``.json`` file, a dict or the reports gathered from other ranks are
read by ``_core.parse_report_json``.

The views shaped as the JSON document (``sections``, ``source``, a finding's ``figures`` ...) are
parts of that document, which C++ renders the first time one is asked for: Python holds no copy
of the schema.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpudiag import _core

_Document = dict[str, Any]


def _value(figures: list[_core.Figure], key: str) -> float | None:
    """The value of figure ``key``, or None. A value that is not finite reads as NaN, as the JSON
    document has it (null)."""
    for figure in figures:
        if figure.key == key:
            return figure.value if math.isfinite(figure.value) else math.nan
    return None


def _severity(name: str) -> _core.Severity:
    if not hasattr(_core.Severity, name):
        raise ValueError(f"not a severity: {name!r} (info, warning or critical)")
    return getattr(_core.Severity, name)  # type: ignore[no-any-return]


def _document(native: _core.Report) -> _Document:
    """The report's JSON document as Python objects (C++ renders it; a fresh copy each call)."""
    return json.loads(_core.render_json(native, compact=True))  # type: ignore[no-any-return]


class Finding:
    """One diagnosis: ``id``, ``severity``, ``title``, ``summary``, figures, sites, advice."""

    __slots__ = ("_index", "_native", "_report")

    def __init__(
        self,
        native: _core.Finding | dict[str, Any],
        report: Report | None = None,
        index: int = 0,
    ) -> None:
        """Wraps a ``gpudiag._core.Finding`` (or reads a finding of a report's JSON document):
        the ``index``-th of ``report`` when given, whose JSON document its JSON-shaped views are
        then parts of."""
        if isinstance(native, dict):
            document = {"schema_version": _core.Report().schema_version, "findings": [native]}
            native = Report(document).native().findings[0]
        self._native = native
        self._report = report
        self._index = index

    def _view(self) -> _Document:
        """This finding in the report's JSON document."""
        if self._report is not None:
            return self._report._view()["findings"][self._index]  # type: ignore[no-any-return]
        alone = _core.Report()
        alone.findings = [self._native]
        return _document(alone)["findings"][0]  # type: ignore[no-any-return]

    @property
    def id(self) -> str:
        return self._native.id

    @property
    def severity(self) -> str:
        return _core.severity_name(self._native.severity)

    @property
    def title(self) -> str:
        return self._native.title

    @property
    def summary(self) -> str:
        return self._native.summary

    @property
    def confidence(self) -> float:
        return self._native.confidence

    @property
    def rank(self) -> int:
        return self._native.rank

    @property
    def device(self) -> int:
        return self._native.device

    @property
    def figures(self) -> dict[str, dict[str, Any]]:
        return dict(self._view()["figures"])

    @property
    def sites(self) -> list[dict[str, Any]]:
        return list(self._view()["sites"])

    @property
    def evidence(self) -> list[str]:
        return list(self._native.evidence)

    @property
    def advice(self) -> list[str]:
        return list(self._native.advice)

    def figure(self, key: str, default: float | None = None) -> float | None:
        """The value of figure ``key``, or ``default``."""
        value = _value(self._native.figures, key)
        return default if value is None else value

    @property
    def predicted_saving(self) -> dict[str, dict[str, Any]]:
        """What fixing this is worth, when predicted: figures ``saving_ns`` (per step),
        ``share`` (of the step time) and ``step_time_ns`` (predicted); {} otherwise."""
        if not self._native.predicted_saving:
            return {}
        predicted = self._view()["predicted_saving"]
        return {k: v for k, v in predicted.items() if k != "shared_with"}

    @property
    def saving_shared_with(self) -> list[str]:
        """The findings (ids) whose predicted savings come from the same time as this one's:
        fixing both does not save the sum (see ``Report.fix_all_saving``)."""
        return list(self._native.saving_shared_with)

    def at_least(self, severity: str) -> bool:
        """True when this finding is at ``severity`` ("info", "warning", "critical") or above."""
        return int(self._native.severity) >= int(_severity(severity))

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self._view())

    def native(self) -> _core.Finding:
        """The ``gpudiag._core.Finding``."""
        return self._native

    def __repr__(self) -> str:
        return f"Finding(id={self.id!r}, severity={self.severity!r}, title={self.title!r})"


class Report:
    """A diagnosis. ``print(report.summary())`` in a terminal; display it in a notebook.

    It wraps the C++ report without copying it: change the ``native()`` report, and wrap it anew
    (the JSON-shaped views are kept from their first use)."""

    def __init__(self, data: dict[str, Any] | _core.Report) -> None:
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
        self._native: _core.Report = native
        self._document: _Document | None = None

    def _view(self) -> _Document:
        """The JSON document the JSON-shaped views are parts of, rendered at their first use."""
        if self._document is None:
            self._document = _document(self._native)
        return self._document

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def from_native(cls, native: _core.Report) -> Report:
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
        return [Finding(f, self, i) for i, f in enumerate(self._native.findings)]

    def finding(self, finding_id: str) -> Finding | None:
        return next((f for f in self.findings if f.id == finding_id), None)

    @property
    def sections(self) -> list[dict[str, Any]]:
        return list(self._view()["sections"])

    def section(self, section_id: str) -> dict[str, Any] | None:
        return next((s for s in self._view()["sections"] if s["id"] == section_id), None)

    def figure(self, section_id: str, key: str, default: float | None = None) -> float | None:
        """The value of figure ``key`` of section ``section_id``, or ``default``."""
        section = next((s for s in self._native.sections if s.id == section_id), None)
        value = None if section is None else _value(section.figures, key)
        return default if value is None else value

    @property
    def fix_all_saving(self) -> dict[str, dict[str, Any]]:
        """What fixing every cause found together is worth (the critical path replayed with all
        of them removed): figures ``saving_ns``, ``share``, ``step_time_ns``; {} when no finding
        predicted a saving. The findings' own savings may overlap; this does not."""
        if not self._native.fix_all_saving:
            return {}
        return dict(self._view()["fix_all_saving"])

    @property
    def headline(self) -> str:
        """The report's first line, as every renderer opens with it: what was found, and what
        the input could not show ("No problems found in steps and input waits; GPU activity,
        device memory and device health were not observed.")."""
        return _core.headline(self._native)

    @property
    def observed(self) -> list[str] | None:
        """The kinds of evidence the input had (``gpudiag._core.Evidence`` names: "steps",
        "input_waits", "gpu_activity", "device_memory", "device_health"); None for a report
        saved before reports listed them."""
        if not self._native.observed_known:
            return None
        return [e.name for e in self._native.observed]

    @property
    def notes(self) -> list[str]:
        return list(self._native.notes)

    @property
    def source(self) -> dict[str, Any]:
        return dict(self._view()["source"])

    @property
    def input(self) -> dict[str, Any]:
        """What part of its input the report covers: ``complete``, ``events`` (read),
        ``first_ns``/``last_ns`` (their span) and ``missing`` (what could not be read, in plain
        language)."""
        return copy.deepcopy(self._view()["input"])

    @property
    def complete(self) -> bool:
        """False when part of the input could not be read (a file cut short, damaged parts, a
        rank without its trace): findings then cover only the part that was read."""
        return self._native.input.complete

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
        worst = _worst(self._native)
        return None if worst is None else _core.severity_name(worst)

    # ---- renderings ---------------------------------------------------------------------------
    def summary(self) -> str:
        """Plain text for terminals and logs (the C++ renderer's output)."""
        return _core.render_text(self._native)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document as Python objects (a copy)."""
        return _document(self._native)

    def to_json(self, *, compact: bool = False) -> str:
        """The JSON document as C++ writes it (indented, or one line)."""
        return _core.render_json(self._native, compact=compact).rstrip("\n")

    def to_prometheus(self) -> str:
        """Prometheus text exposition (see ``gpudiag.prometheus``)."""
        return _core.render_prometheus(self._native)

    def to_html(self, *, full_page: bool = False) -> str:
        """Self-contained HTML with inline SVG plots (no scripts, no external resources)."""
        from gpudiag.reporters import html

        return html.render_report(self._native, full_page=full_page)

    def _repr_html_(self) -> str:
        return self.to_html()

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        worst = self.worst_severity() or "none"
        return f"<gpudiag.Report: {len(self._native.findings)} findings, worst {worst}>"

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

    def native(self) -> _core.Report:
        """The ``gpudiag._core.Report``."""
        return self._native


def _worst(native: _core.Report) -> _core.Severity | None:
    """The most severe finding of a report and its ranks; None without findings."""
    severities = [f.severity for f in native.findings]
    severities += [s for s in map(_worst, native.ranks) if s is not None]
    return max(severities, key=int, default=None)


__all__ = ["Finding", "Report"]
