# SPDX-License-Identifier: Apache-2.0
"""Prometheus exposition, checked with prometheus_client's own parser."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from sample_reports import full_report

from gpudiag import Report, prometheus

parser = pytest.importorskip("prometheus_client.parser")


def _families(text: str) -> dict[str, list]:
    return {f.name: f.samples for f in parser.text_string_to_metric_families(text)}


def _value(samples: list, **labels: str) -> float:
    for s in samples:
        if all(s.labels.get(k) == v for k, v in labels.items()):
            return float(s.value)
    raise AssertionError(f"no sample with {labels} in {samples}")


def test_diagnoses_become_gauges_in_base_units() -> None:
    fams = _families(prometheus.exposition(Report(full_report())))
    assert _value(fams["gpudiag_input_wait_ratio"], pid="4242", rank="-1", host="node7") == 0.4
    assert _value(fams["gpudiag_idle_ratio"], cause="host_wait") == pytest.approx(0.05)
    assert _value(fams["gpudiag_fragmentation_ratio"]) == 0.25
    assert _value(fams["gpudiag_leak_rate_bytes_per_step"]) == 20 * 1024**2
    assert _value(fams["gpudiag_memory_watermark_bytes"], watermark="peak_allocated") == 8 * 1024**3
    assert _value(fams["gpudiag_throttle_ratio"]) == pytest.approx(0.1)
    assert _value(fams["gpudiag_findings"], severity="critical") == 1
    assert _value(fams["gpudiag_finding"], id="memory_leak", severity="warning") == 1
    # a figure in ns is exported by gpudiag_figure in its report unit
    assert _value(fams["gpudiag_figure"], section="timeline", key="step_time", unit="ns") == 100e6
    assert _value(fams["gpudiag_events_dropped"]) == 7


def test_every_rank_is_labelled() -> None:
    job = full_report()
    r0, r1 = full_report(), full_report()
    r0["source"]["rank"], r1["source"]["rank"] = 0, 1
    r1["sections"][1]["figures"]["input_wait_share"]["value"] = 0.7
    job["ranks"] = [r0, r1]
    fams = _families(prometheus.exposition(job))
    assert _value(fams["gpudiag_input_wait_ratio"], rank="1") == 0.7
    assert _value(fams["gpudiag_input_wait_ratio"], rank="0") == 0.4


def test_label_values_are_escaped() -> None:
    r = full_report()
    r["source"]["hostname"] = 'we"ird\\host\nname'
    fams = _families(prometheus.exposition(r))
    assert _value(fams["gpudiag_events"], host='we"ird\\host\nname') == 12345


def test_http_endpoint_binds_loopback_and_serves_metrics() -> None:
    report = Report(full_report())
    with prometheus.serve(report, port=0) as server:
        host, port = server.address
        assert host == "127.0.0.1"
        with urllib.request.urlopen(server.url, timeout=10) as response:
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            fams = _families(response.read().decode())
        assert "gpudiag_input_wait_ratio" in fams
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
