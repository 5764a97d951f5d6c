# SPDX-License-Identifier: Apache-2.0
"""``gpudiag.compare()``: did a change help? Two runs in, one verdict out.

Each side is a :class:`Report`, anything ``gpudiag.analyze`` reads (a trace, rank files, a
folder, a snapshot, a recording, a saved report) or the name of a kept baseline. The comparison
itself, its verdict, what decided it and why two runs cannot be compared, is C++'s
(``gpudiag._core.compare_reports``, rules in docs/compare.md); so are its text and JSON. The
views shaped as the JSON document (``reasons``, ``deltas`` ...) are parts of that document.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Union

from gpudiag import _core
from gpudiag._analyze import analyze
from gpudiag._baseline import baseline_dir, baseline_exists, is_name, load_baseline
from gpudiag._errors import NotFoundError
from gpudiag._report import Report

PathLike = Union[str, Path]
Side = Union[Report, _core.Report, PathLike, Sequence[PathLike]]


def verdict_names() -> list[str]:
    """The verdicts a comparison can end in, as C++ names them."""
    return list(_core.CompareVerdict.__members__)


class Comparison:
    """Two runs compared: ``verdict`` ("improvement", "regression", "mixed", "unchanged",
    "inconclusive"), ``comparable`` and its ``reasons``, the ``deltas`` and the ``deciding``
    ones, and the findings that appeared or were resolved. ``print(comparison)`` in a terminal;
    in a notebook it displays itself."""

    def __init__(self, native: _core.Comparison) -> None:
        self._native = native
        self._document: dict[str, Any] | None = None

    def _view(self) -> dict[str, Any]:
        if self._document is None:
            self._document = json.loads(_core.render_comparison_json(self._native, compact=True))
        return self._document

    @property
    def verdict(self) -> str:
        return str(_core.compare_verdict_name(self._native.verdict))

    @property
    def comparable(self) -> bool:
        """False when a reason (another GPU, another software stack, too few steps ...) keeps
        the runs from being compared one to one."""
        return bool(self._native.comparable)

    @property
    def headline(self) -> str:
        """One sentence: the verdict, what decided it, and why not comparable where not."""
        return str(self._native.headline)

    @property
    def reasons(self) -> list[dict[str, Any]]:
        """Why the runs cannot be compared one to one: each ``id``, ``text`` and the areas it
        ``explains``."""
        return copy.deepcopy(self._view()["reasons"])

    @property
    def deltas(self) -> list[dict[str, Any]]:
        """Every figure compared: ``key``, ``label``, ``before``, ``after``, ``change``,
        ``noise``, ``judgement``, ``deciding`` ... (docs/compare.md)."""
        return copy.deepcopy(self._view()["deltas"])

    @property
    def deciding(self) -> list[dict[str, Any]]:
        """The few deltas that decided the verdict."""
        return [d for d in self.deltas if d["deciding"]]

    @property
    def findings(self) -> list[dict[str, Any]]:
        """Findings by id: ``change`` ("appeared", "resolved", "persisted"), severities, titles
        and predicted savings on each side."""
        return copy.deepcopy(self._view()["findings"])

    @property
    def not_compared(self) -> list[str]:
        """What could not be compared, in plain language."""
        return list(self._native.not_compared)

    @property
    def notes(self) -> list[str]:
        return list(self._native.notes)

    # ---- renderings ---------------------------------------------------------------------------
    @property
    def text(self) -> str:
        """Plain text for terminals, logs and test failures (C++'s rendering)."""
        return str(_core.render_comparison_text(self._native))

    def summary(self) -> str:
        return self.text

    def to_dict(self) -> dict[str, Any]:
        """The JSON document as Python objects (a copy)."""
        return copy.deepcopy(self._view())

    def to_json(self, *, compact: bool = False) -> str:
        """The JSON document as C++ writes it (indented, or one line)."""
        return str(_core.render_comparison_json(self._native, compact=compact)).rstrip("\n")

    def to_html(self, *, full_page: bool = False) -> str:
        """Self-contained HTML in the report's style (no scripts, no external resources)."""
        from gpudiag.reporters import compare_html

        return compare_html.render_comparison(self._view(), full_page=full_page)

    def _repr_html_(self) -> str:
        return self.to_html()

    def save_html(self, path: str | Path) -> Path:
        p = Path(path)
        p.write_text(self.to_html(full_page=True), encoding="utf-8")
        return p

    def save(self, path: str | Path) -> Path:
        """Writes the comparison; the suffix picks the format: .json, .html or text."""
        p = Path(path)
        if p.suffix in (".html", ".htm"):
            return self.save_html(p)
        text = self.to_json() + "\n" if p.suffix == ".json" else self.text
        p.write_text(text, encoding="utf-8")
        return p

    def native(self) -> _core.Comparison:
        """The ``gpudiag._core.Comparison``."""
        return self._native

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        deciding = ", ".join(d["key"] for d in self.deciding) or "none"
        return f"<gpudiag.Comparison: {self.verdict}, deciding: {deciding}>"


def report_of(side: Side, *, window: str = "steps", directory: PathLike | None = None) -> Report:
    """The report one side stands for. A ``str`` that names a kept baseline is that baseline
    (``./NAME`` is the file); a ``Path`` is always a path."""
    if isinstance(side, Report):
        return side
    if isinstance(side, _core.Report):
        return Report(side)
    if isinstance(side, str) and baseline_exists(side, directory):
        return load_baseline(side, directory)
    if isinstance(side, str) and is_name(side) and not Path(side).exists():
        raise NotFoundError(
            f"{side!r} is neither a file nor a baseline kept in {baseline_dir(directory)}"
        )
    return analyze(side, window=window)


def compare(
    before: Side,
    after: Side,
    *,
    window: str = "steps",
    baseline_dir: PathLike | None = None,
    noise_multiplier: float | None = None,
    min_steps: int | None = None,
    min_relative_change: float | None = None,
) -> Comparison:
    """Compares two runs: one verdict for time, memory and health, the deltas that decided it,
    and why the runs cannot be compared where they cannot.

    Args:
        before, after: each a :class:`Report`, a path (or paths) ``gpudiag.analyze`` reads, or
            the name of a baseline kept with ``gpudiag baseline save``.
        window: the analysis window for sides given as paths (see ``gpudiag.analyze``).
        baseline_dir: where baselines are kept (default: $GPUDIAG_BASELINE_DIR, else
            ./.gpudiag-baselines).
        noise_multiplier, min_steps, min_relative_change: the judgement's settings
            (``gpudiag._core.CompareOptions``; C++'s defaults when None).

    Raises:
        NotFoundError, CorruptDataError, UnsupportedError, IoError: for an unusable side; the
        message says which.
    """
    options = _core.CompareOptions()
    if noise_multiplier is not None:
        options.noise_multiplier = float(noise_multiplier)
    if min_steps is not None:
        options.min_steps = int(min_steps)
    if min_relative_change is not None:
        options.min_relative_change = float(min_relative_change)
    reports = [report_of(s, window=window, directory=baseline_dir) for s in (before, after)]
    return Comparison(_core.compare_reports(reports[0].native(), reports[1].native(), options))


__all__ = ["Comparison", "compare", "report_of", "verdict_names"]
