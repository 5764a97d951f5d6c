# SPDX-License-Identifier: Apache-2.0
"""Prometheus exposition (written by C++) of reports the analyses make of corpus files, read with
prometheus_client's own parser, and the loopback endpoint that serves it."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest

from gpudiag import Report, _core, cli, prometheus

parser = pytest.importorskip("prometheus_client.parser")


def _families(text: str) -> dict[str, object]:
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


def _samples(text: str, name: str, **labels: str) -> list:
    out = []
    for family in parser.text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                out.append(s)
    return out


def _assert_no_duplicate_series(text: str) -> None:
    series = [
        (s.name, tuple(sorted(s.labels.items())))
        for family in parser.text_string_to_metric_families(text)
        for s in family.samples
    ]
    assert len(series) == len(set(series))


def test_one_metric_per_figure_in_base_units(starved_report: Report) -> None:
    text = prometheus.exposition(starved_report)
    assert text == _core.render_prometheus(starved_report.native())  # Python only passes it on
    families = _families(text)
    wait = _samples(text, "gpudiag_timeline_input_wait_ratio")
    assert len(wait) == 1
    assert wait[0].value == pytest.approx(starved_report.figure("timeline", "input_wait_share"))
    step = _samples(text, "gpudiag_timeline_step_time_seconds")
    assert step[0].value == pytest.approx(starved_report.figure("timeline", "step_time_ns") * 1e-9)
    assert "gpudiag_figure" not in families  # no value hidden in a generic gauge
    for family in parser.text_string_to_metric_families(text):
        for s in family.samples:
            assert not {"unit", "key", "section"} & set(s.labels), s


def test_findings_are_labelled_by_id_and_severity(starved_report: Report) -> None:
    text = prometheus.exposition(starved_report)
    for f in starved_report.findings:
        assert _samples(text, "gpudiag_finding", id=f.id, severity=f.severity), f.id
    counts = {s.labels["severity"]: s.value for s in _samples(text, "gpudiag_findings")}
    assert sum(counts.values()) == len(starved_report.findings)


def test_no_samples_for_what_the_input_never_had(snapshot_report: Report) -> None:
    text = prometheus.exposition(snapshot_report)
    assert not any(name.startswith("gpudiag_timeline_") for name in _families(text))
    assert _samples(text, "gpudiag_memory_reserved_bytes")[0].value == pytest.approx(
        snapshot_report.figure("memory", "reserved_bytes")
    )


def test_every_rank_is_labelled(job_report: Report) -> None:
    text = prometheus.exposition(job_report)
    _assert_no_duplicate_series(text)
    for rank in job_report.ranks:
        idle = _samples(text, "gpudiag_timeline_idle_ratio", rank=str(rank.source["rank"]))
        assert len(idle) == 1
        assert idle[0].value == pytest.approx(rank.figure("timeline", "idle_share"))


def test_saved_reports_export_together_without_duplicates(
    tmp_path: Path, capsys, starved_report: Report, snapshot_report: Report
) -> None:
    a = starved_report.save(tmp_path / "a.json")
    b = snapshot_report.save(tmp_path / "b.json")
    c = starved_report.save(tmp_path / "c.json")  # the same run saved twice
    assert cli.main(["export", str(a), str(b), str(c), "--prometheus", "-"]) == 0
    text = capsys.readouterr().out
    _assert_no_duplicate_series(text)
    events = _samples(text, "gpudiag_capture_events_total")
    assert len(events) == 3
    assert len({s.labels["source"] for s in events}) == 3


def test_http_endpoint_binds_loopback_and_serves_metrics(snapshot_report: Report) -> None:
    with prometheus.serve(snapshot_report, port=0) as server:
        host, port = server.address
        assert host == "127.0.0.1"
        with urllib.request.urlopen(server.url, timeout=10) as response:
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            body = response.read().decode()
        assert body == prometheus.exposition(snapshot_report)
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/other", timeout=10)
        assert e.value.code == 404
        e.value.close()


def test_endpoint_reports_failures_as_500_and_keeps_serving() -> None:
    calls = {"n": 0}

    def failing() -> Report:
        calls["n"] += 1
        raise RuntimeError("no report yet")

    with prometheus.serve(failing, port=0, min_interval_s=0) as server:
        for _ in range(2):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(server.url, timeout=10)
            assert e.value.code == 500
            e.value.close()
    assert calls["n"] == 2
