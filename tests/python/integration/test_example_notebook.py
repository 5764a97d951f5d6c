# SPDX-License-Identifier: Apache-2.0
"""Runs the code cells of examples/notebooks/report.ipynb and checks the report it shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[3] / "examples" / "notebooks" / "report.ipynb"


def test_notebook_cells_run_and_show_the_report() -> None:
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    namespace: dict[str, object] = {}
    shown = None
    for source in code:
        if source.lstrip().startswith("%"):
            continue  # IPython magics need a kernel; test_notebook covers the extension itself
        *body, last = source.strip().splitlines()
        exec("\n".join(body), namespace)  # noqa: S102 - our own example notebook
        shown = eval(last.split("#")[0], namespace)
    html = shown._repr_html_()  # type: ignore[union-attr]
    assert "<svg" in html
    ids = [f.id for f in namespace["report"].findings]  # type: ignore[attr-defined]
    assert "input_bound" in ids
    assert "memory_leak" in ids
    assert namespace["report"].source.get("simulated") is True  # type: ignore[attr-defined]


def test_notebook_is_valid_nbformat_4() -> None:
    nb = json.loads(NOTEBOOK.read_text())
    assert nb["nbformat"] == 4
    if not any(c["cell_type"] == "markdown" for c in nb["cells"]):
        pytest.fail("the notebook should explain itself")
