# SPDX-License-Identifier: Apache-2.0
"""Offline analysis of the small committed inputs: a recording, torch snapshots; the CLI's
analyze and export on them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gpudiag
from gpudiag import cli

ROOT = Path(__file__).resolve().parents[3]
RECORDING = ROOT / "tests" / "fuzz" / "corpus" / "recording_reader_fuzz" / "valid.gpudiag"
SNAPSHOT = ROOT / "tests" / "data" / "memory" / "snapshot_modern_expandable.pickle"
MALICIOUS = ROOT / "tests" / "data" / "memory" / "malicious.pickle"


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path.name} is not in this checkout")
    return path


def test_recording_is_analysed() -> None:
    report = gpudiag.analyze(_need(RECORDING))
    assert gpudiag.detect_format(RECORDING) == "recording"
    assert report.section("timeline") is not None
    assert report.to_dict()["capture"]["events"] > 0


def test_snapshot_gives_a_memory_plot() -> None:
    report = gpudiag.analyze(_need(SNAPSHOT))
    assert gpudiag.detect_format(SNAPSHOT) == "torch_snapshot"
    assert report.section("memory") is not None
    html = report._repr_html_()
    assert 'class="series"' in html
    assert "<script" not in html


def test_hostile_pickle_is_refused_by_the_cpp_reader() -> None:
    with pytest.raises(gpudiag.GpudiagError) as e:
        gpudiag.analyze(_need(MALICIOUS))
    assert e.value.exit_code == 3


def test_cli_analyze_json_and_fail_on(capsys) -> None:
    assert cli.main(["analyze", str(_need(RECORDING)), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema_version"] >= 1
    severities = {f["severity"] for f in doc["findings"]}
    expected = 1 if severities & {"warning", "critical"} else 0
    assert cli.main(["analyze", str(RECORDING), "--fail-on", "warning"]) == expected


def test_cli_export_chrome_and_prometheus(tmp_path: Path, capsys) -> None:
    parser = pytest.importorskip("prometheus_client.parser")
    out = tmp_path / "trace.json"
    assert cli.main(["export", str(_need(RECORDING)), "--chrome", str(out)]) == 0
    assert json.loads(out.read_text())["traceEvents"]
    assert cli.main(["export", str(RECORDING), "--prometheus", "-"]) == 0
    names = {f.name for f in parser.text_string_to_metric_families(capsys.readouterr().out)}
    # prometheus_client names a counter's family without its _total
    assert {"gpudiag_findings", "gpudiag_capture_events", "gpudiag_timeline_idle_ratio"} <= names
    assert "gpudiag_figure" not in names
