# SPDX-License-Identifier: Apache-2.0
"""Partial input said plainly at the command line: a trace cut short gets a report that opens with
what is missing, and exit code 3 (the input-error code) unless --allow-partial accepts it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import gpudiag
from gpudiag import cli
from gpudiag._errors import EXIT_FINDINGS, EXIT_INPUT, EXIT_OK


def _trace(events: int) -> bytes:
    rows = []
    for i in range(events):
        ts = 1000 + i * 50
        rows.append(
            json.dumps(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": f"aten::op{i % 7}",
                    "pid": 1,
                    "tid": 1,
                    "ts": ts,
                    "dur": 20,
                }
            )
        )
        rows.append(
            json.dumps(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": f"kernel_{i % 5}",
                    "pid": 0,
                    "tid": 7,
                    "ts": ts + 5,
                    "dur": 10,
                    "args": {"device": 0, "stream": 7, "correlation": i},
                }
            )
        )
    return ('{"traceEvents": [\n' + ",\n".join(rows) + "\n]}\n").encode()


@pytest.fixture
def cut_trace(tmp_path: Path) -> Path:
    whole = gzip.compress(_trace(4000), mtime=0)
    path = tmp_path / "cut.json.gz"
    path.write_bytes(whole[: len(whole) // 2])
    return path


def test_cut_trace_exits_with_the_input_error_code(cut_trace: Path, capsys) -> None:
    assert cli.main(["analyze", str(cut_trace)]) == EXIT_INPUT
    captured = capsys.readouterr()
    # The report is still printed, and it opens with what is missing, before any headline (this
    # trace's GPU sits idle between kernels, so there is a finding).
    headline = (
        "Findings ("
        if "Findings (" in captured.out
        else "No problems found in the part that could be read"
    )
    assert captured.out.index("PARTIAL INPUT") < captured.out.index(headline)
    assert "No problems found.\n" not in captured.out
    assert "Missing: the gzip stream ends early" in captured.out
    assert "--allow-partial" in captured.err


def test_allow_partial_accepts_it(cut_trace: Path, tmp_path: Path, capsys) -> None:
    out_json = tmp_path / "r.json"
    out_html = tmp_path / "r.html"
    code = cli.main(
        [
            "analyze",
            str(cut_trace),
            "--allow-partial",
            "--json",
            str(out_json),
            "--html",
            str(out_html),
        ]
    )
    assert code == EXIT_OK
    capsys.readouterr()
    document = json.loads(out_json.read_text())
    assert document["input"]["complete"] is False
    assert document["input"]["events"] > 0
    assert any("gzip stream ends early" in m for m in document["input"]["missing"])
    html = out_html.read_text()
    assert "Partial input" in html
    assert "No problems found.</p>" not in html
    # --fail-on still applies to the part that was read.
    assert cli.main(["analyze", str(cut_trace), "--allow-partial", "--fail-on", "info"]) in (
        EXIT_OK,
        EXIT_FINDINGS,
    )
    capsys.readouterr()


def test_report_says_complete_or_not(cut_trace: Path, tmp_path: Path) -> None:
    partial = gpudiag.analyze(cut_trace)
    assert not partial.complete
    assert partial.input["missing"]
    whole = tmp_path / "whole.json.gz"
    whole.write_bytes(gzip.compress(_trace(100), mtime=0))
    full = gpudiag.analyze(whole)
    assert full.complete
    assert full.input["missing"] == []
    assert full.input["events"] == 200
    # A saved partial report reads back partial.
    saved = partial.save(tmp_path / "partial.json")
    assert not gpudiag.Report.load(saved).complete


def test_huge_pickle_length_is_an_input_error(tmp_path: Path, capsys) -> None:
    path = tmp_path / "huge.pickle"
    path.write_bytes(b"\x80\x04\x8d" + (1 << 60).to_bytes(8, "little") + b"abc.")
    assert cli.main(["analyze", str(path)]) == EXIT_INPUT
    assert "declares 1152921504606846976 bytes, but only 4 follow" in capsys.readouterr().err
