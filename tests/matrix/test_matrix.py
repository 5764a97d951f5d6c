# SPDX-License-Identifier: Apache-2.0
"""The entry-point matrix (cells.py): every documented entry point against every planted problem
that runs on CPU, each cell a real run judged on its report's JSON, exit code and headline.

The cells run GPUDIAG_MATRIX_JOBS at a time (default 2: one per core of the CI machine), started
together at the first cell's test; each test waits for its own. PENDING cells (cells.py) are
strict xfails. The GPU cells run on the device check (tests/gpu/device_check.sh).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tools"))

import gen_entry_matrix
from cells import CELLS, COLUMNS, PENDING, ROWS, Cell, cell
from matrix import Outcome, explain, judge, run_cell

CPU_CELLS = [c for c in CELLS if not c.gpu and c.expect is not None]


@pytest.fixture(scope="session")
def matrix_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[Outcome]]]:
    """Starts every selected cell at once, GPUDIAG_MATRIX_JOBS at a time."""
    selected = [
        item.callspec.params["matrix_cell"].id
        for item in request.session.items
        if getattr(item, "originalname", "") == "test_cell"
    ]
    base = tmp_path_factory.mktemp("matrix")
    pool = ThreadPoolExecutor(max_workers=int(os.environ.get("GPUDIAG_MATRIX_JOBS", "2")))
    futures = {cid: pool.submit(run_cell, cell(cid), base / cid) for cid in selected}
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize("matrix_cell", CPU_CELLS, ids=lambda c: c.id)
def test_cell(
    matrix_cell: Cell,
    matrix_runs: dict[str, Future[Outcome]],
    request: pytest.FixtureRequest,
) -> None:
    if matrix_cell.pending is not None:
        request.applymarker(pytest.mark.xfail(reason=matrix_cell.pending, strict=True))
    out = matrix_runs[matrix_cell.id].result()
    if out.skip is not None:
        pytest.skip(out.skip)
    problems = judge(matrix_cell, out)
    assert not problems, explain(matrix_cell, out, problems)


def test_every_cell_has_a_verdict_or_a_reason() -> None:
    for row in ROWS:
        for column in COLUMNS:
            cpu = [c for c in CELLS if (c.row, c.column, c.gpu) == (row.id, column.id, False)]
            assert len(cpu) == 1, f"{row.id} x {column.id}: {len(cpu)} CPU cells"
            (only,) = cpu
            assert (only.expect is None) != (only.na is None), only.id
    for c in CELLS:
        assert c.row in {r.id for r in ROWS}, c.id
        assert c.column in {k.id for k in COLUMNS}, c.id
        assert c.expect is None or c.expect.describe(), f"{c.id}: a verdict that checks nothing"
    assert set(PENDING) <= {c.id.removesuffix("-gpu") for c in CELLS}, "PENDING names no cell"


def test_gpu_cells_run_on_the_device_check() -> None:
    gpu = [c for c in CELLS if c.gpu]
    assert gpu
    assert all(c.expect is not None for c in gpu)
    stage = (ROOT / "tests/gpu/device_check.sh").read_text()
    assert re.search(r"tests/matrix/matrix\.py --gpu", stage), "no device-check stage runs them"


def test_the_docs_table_is_current() -> None:
    doc = ROOT / "docs/entry_matrix.md"
    assert doc.read_text() == gen_entry_matrix.render(), (
        "docs/entry_matrix.md is stale: python3 tools/gen_entry_matrix.py --write"
    )
