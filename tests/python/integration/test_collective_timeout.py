# SPDX-License-Identifier: Apache-2.0
"""A live session in a real two-rank gloo job (tests/python/live_collective_job.py): rank 1
sleeps before its second all_reduce; rank 0's session (collective_timeout_s=2) reads its own
Flight Recorder, writes its window once the all_reduce is 2 s in flight, and its live report (and
HTTP GET /report) names the collective in flight (docs/hangs.md, "Live")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import gpudiag

pytestmark = [pytest.mark.torch, pytest.mark.slow]

JOB = Path(__file__).resolve().parents[1] / "live_collective_job.py"


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    pytest.importorskip("torch.distributed")
    out = tmp_path_factory.mktemp("live")
    subprocess.run(
        [sys.executable, "-W", "ignore", str(JOB), str(out)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    return out, report


def _in_flight(report: dict[str, Any]) -> list[dict[str, Any]]:
    section = next(s for s in report["sections"] if s["id"] == "collectives_in_flight")
    table = section["tables"][0]
    return [dict(zip(table["columns"], row)) for row in table["rows"]]


def test_the_collective_in_flight_is_named(job: tuple[Path, dict[str, Any]]) -> None:
    _, report = job
    rows = _in_flight(report)
    assert len(rows) == 1, rows
    row = rows[0]
    assert (row["group"], row["op"], row["seq"], row["rank"]) == ("0", "all_reduce", 2, 0)
    assert row["age_s"] >= 2.0
    assert row["overdue"] == "yes"


def test_http_report_shows_it_too(job: tuple[Path, dict[str, Any]]) -> None:
    out, _ = job
    if not (out / "http_report.json").exists():
        pytest.skip("this build serves no HTTP (cpp-httplib was not found)")
    rows = _in_flight(json.loads((out / "http_report.json").read_text()))
    assert [(r["group"], r["op"], r["seq"]) for r in rows] == [("0", "all_reduce", 2)]


def test_one_window_dump_is_written_and_said(job: tuple[Path, dict[str, Any]]) -> None:
    out, report = job
    dumps = sorted(out.glob("run-dump-*-collective.gpudiag"))
    assert len(dumps) == 1, dumps
    notes = [n for n in report["notes"] if "past collective_timeout_s" in n]
    assert len(notes) == 1, report["notes"]
    assert "process group 0 all_reduce #2: rank 0" in notes[0]
    assert str(dumps[0]) in notes[0]


def test_the_dump_analyses(job: tuple[Path, dict[str, Any]]) -> None:
    out, _ = job
    dump = next(out.glob("run-dump-*-collective.gpudiag"))
    report = gpudiag.analyze(str(dump))
    section = report.section("collectives")
    assert section is not None
    records = next(t for t in section["tables"] if t["id"] == "collective_records")
    states = {(row[1], row[4]) for row in records["rows"]}
    assert (2, "scheduled") in states, records["rows"]
