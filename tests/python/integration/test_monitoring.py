# SPDX-License-Identifier: Apache-2.0
"""The monitoring that ships (monitoring/): Prometheus alert rules and the Grafana dashboard,
checked against what gpudiag's exporter really serves.

- `promtool check rules` accepts the rules as shipped;
- a real Prometheus server (Debian's package, on loopback) scrapes three exporters: one serving
  the diagnosis of the bundled recording (input-bound, a sync per step, leaking 8 MiB per step),
  one a simulated node with a card fault on each of three GPUs (tests/data/sick_node.gpudiag),
  and one a real Kineto trace with nothing wrong. The planted problems fire their alerts, and
  only those; the healthy trace fires none;
- every metric the rules and the dashboard query is in the exporter's output for real inputs;
- the host label: the rules fire alike on the bundled recording exported with dcgm-exporter's
  old label alone (`Hostname`), the dashboard's queries find both, and gpudiag's samples join a
  dcgm-exporter 4.10 exposition (tests/data/dcgm_exporter_4.10_sample.prom, written for these
  tests) on `hostname` and `gpu`;
- a live session's own HTTP control (SessionOptions::http) is scraped like any exporter.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import gpudiag
from gpudiag import prometheus

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "monitoring" / "prometheus" / "gpudiag-alerts.yml"
DASHBOARD = ROOT / "monitoring" / "grafana" / "gpudiag.json"
CORPUS = ROOT.parent / "shared" / "corpus"
DEMO = Path(gpudiag.__file__).parent / "data" / "demo.gpudiag"
HEALTHY = CORPUS / "kineto_traces" / "kineto_pr1318_before_fix_trace.json"
# Simulated NVML readings of a 4-GPU node (tools/make_demo/make_sick_node_recording.cpp).
SICK_NODE = ROOT / "tests" / "data" / "sick_node.gpudiag"
DCGM_SAMPLE = ROOT / "tests" / "data" / "dcgm_exporter_4.10_sample.prom"
# Inputs whose expositions together hold every metric the monitoring may query: the bundled
# recording (steps, memory, health), the simulated node (the card, GPM), a torch snapshot (the
# allocator's cache), a 2021 trace.
INPUTS = [
    DEMO,
    SICK_NODE,
    CORPUS / "memory_snapshots" / "silmont2000_cs336a2_mem_snapshot.pickle",
    CORPUS
    / "kineto_traces"
    / "kineto_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz",
]
METRIC = re.compile(r"\bgpudiag_[a-z0-9_]+")


def _need(*paths: Path) -> None:
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        pytest.skip(f"corpus input not present: {', '.join(missing)}")


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(
            f"{name} not installed (Debian package prometheus; tools/install_deps.sh --test)"
        )
    return path


def _exported_metrics() -> set[str]:
    names: set[str] = set()
    for path in INPUTS:
        if path.exists():
            text = prometheus.exposition(gpudiag.analyze([str(path)]))
            names.update(
                line.split("{")[0].split(" ")[0]
                for line in text.splitlines()
                if line and not line.startswith("#")
            )
    return names


def _queried_metrics() -> dict[str, set[str]]:
    exprs: dict[str, set[str]] = {}
    rules = RULES.read_text(encoding="utf-8")
    for match in re.finditer(r"expr: *>-?\n((?: {10,}.*\n)+)|expr: *(.*)\n", rules):
        expr = match.group(1) or match.group(2)
        exprs.setdefault("alert rules", set()).update(METRIC.findall(expr))
    board = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    for p in board["panels"]:
        for t in p["targets"]:
            exprs.setdefault(f"dashboard panel {p['title']!r}", set()).update(
                METRIC.findall(t["expr"])
            )
    for v in board["templating"]["list"]:
        exprs.setdefault("dashboard variables", set()).update(METRIC.findall(str(v.get("query"))))
    return exprs


def test_promtool_accepts_the_rules() -> None:
    promtool = _tool("promtool")
    out = subprocess.run(
        [promtool, "check", "rules", str(RULES)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_the_dashboard_is_what_its_generator_writes() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "make_dashboard.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr


def test_every_queried_metric_is_exported() -> None:
    _need(*INPUTS)
    exported = _exported_metrics()
    for where, names in _queried_metrics().items():
        assert names, f"{where}: no gpudiag metric queried"
        assert names <= exported, (
            f"{where} queries metrics the exporter never serves: {sorted(names - exported)}"
        )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as r:  # loopback only
        return json.load(r)


def _alerts(base: str) -> list[dict[str, Any]]:
    return list(_get_json(f"{base}/api/v1/alerts")["data"]["alerts"])


def _query(base: str, expr: str) -> list[dict[str, Any]]:
    q = urllib.parse.quote(expr)
    return list(_get_json(f"{base}/api/v1/query?query={q}")["data"]["result"])


def _serve_text(text: str) -> http.server.ThreadingHTTPServer:
    """An exporter serving fixed text: dcgm-exporter's exposition, as written for the test."""
    body = text.encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", prometheus.CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, _format: str, *_args: Any) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _dashboard_queries(host: str) -> dict[str, str]:
    """Each dashboard panel's first query with its variables set (every GPU)."""
    board = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return {
        p["title"]: p["targets"][0]["expr"].replace("$host", host).replace("$gpu", ".*")
        for p in board["panels"]
    }


@pytest.mark.slow
def test_a_real_prometheus_fires_the_planted_alerts_and_none_on_a_healthy_trace(
    tmp_path: Path,
) -> None:
    server_bin = _tool("prometheus")
    _need(HEALTHY)
    planted = prometheus.serve(gpudiag.analyze([str(DEMO)]), port=0)
    sick = prometheus.serve(gpudiag.analyze([str(SICK_NODE)]), port=0)
    healthy = prometheus.serve(gpudiag.analyze([str(HEALTHY)]), port=0)
    # The recording again, labelled as for dcgm-exporter before 4.8.3 only.
    legacy = prometheus.serve(gpudiag.analyze([str(DEMO)]), port=0, host_labels="Hostname")
    # dcgm-exporter's exposition for the simulated node's host.
    dcgm = _serve_text(
        DCGM_SAMPLE.read_text(encoding="utf-8").replace("gpu-node-17", "simulated-node")
    )
    # A live session answering on its own HTTP control.
    session = gpudiag.session(capture_gpu=False, nvml_hz=0, torch=False, http="127.0.0.1:0")
    session.start()
    session_port = session.http_status()["port"]
    # The rules as shipped wait minutes (`for:`) before firing; here they wait one second, so
    # the test need not. promtool has checked the shipped file itself.
    rules = tmp_path / "rules.yml"
    rules.write_text(
        re.sub(r"\bfor: *\S+", "for: 1s", RULES.read_text(encoding="utf-8")), encoding="utf-8"
    )
    port = _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"rule_files: ['{rules}']\n"
        "scrape_configs:\n"
        f"  - job_name: planted\n    static_configs: [{{targets: ['127.0.0.1:{planted.address[1]}']}}]\n"
        f"  - job_name: sick_node\n    static_configs: [{{targets: ['127.0.0.1:{sick.address[1]}']}}]\n"
        f"  - job_name: healthy\n    static_configs: [{{targets: ['127.0.0.1:{healthy.address[1]}']}}]\n"
        f"  - job_name: legacy\n    static_configs: [{{targets: ['127.0.0.1:{legacy.address[1]}']}}]\n"
        f"  - job_name: dcgm\n    static_configs: [{{targets: ['127.0.0.1:{dcgm.server_address[1]}']}}]\n"
        + (
            f"  - job_name: session\n    static_configs: [{{targets: ['127.0.0.1:{session_port}']}}]\n"
            if session_port
            else ""
        ),
        encoding="utf-8",
    )
    log_file = (tmp_path / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            server_bin,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=log_file,
    )
    base = f"http://127.0.0.1:{port}"
    # What the analyzer finds in the recording: input-bound, a per-step sync that keeps the host
    # from loading the next batch while the GPU computes, a leak that fills the card in 35 min.
    expected = {
        ("GpudiagInputBound", "critical"),
        ("GpudiagHostSyncStall", "critical"),
        ("GpudiagMemoryLeak", "warning"),
        ("GpudiagMemoryLeakFullWithinAnHour", "critical"),
    }
    # The node: GPU 1's Xid 48 with an uncorrected ECC error and a row remap waiting for a reset,
    # GPU 2's link at x8, GPU 3 hot and slowed by the hardware (a critical throttle finding).
    expected_sick = {
        ("GpudiagXid", "critical", "1"),
        ("GpudiagEccErrors", "critical", "1"),
        ("GpudiagMemoryRetired", "warning", "1"),
        ("GpudiagPcieLinkDegraded", "warning", "2"),
        ("GpudiagThrottling", "critical", "3"),
        ("GpudiagGpuOutlier", "warning", "3"),
    }

    def labelled(
        states: tuple[str, ...],
    ) -> tuple[set[tuple[str, str, str]], set[tuple[str, str, str]]]:
        """(alert, severity, job) of every alert, and (alert, severity, gpu) of the node's."""
        alerts = [a for a in _alerts(base) if a["state"] in states]
        by_job = {
            (a["labels"]["alertname"], a["labels"].get("severity", ""), a["labels"]["job"])
            for a in alerts
        }
        node = {
            (a["labels"]["alertname"], a["labels"].get("severity", ""), a["labels"].get("gpu", ""))
            for a in alerts
            if a["labels"]["job"] == "sick_node"
        }
        return by_job, node

    try:
        firing: set[tuple[str, str, str]] = set()
        sick_firing: set[tuple[str, str, str]] = set()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):  # not listening yet
                firing, sick_firing = labelled(("firing",))
            if (
                {(n, s, "planted") for n, s in expected} <= firing
                and {(n, s, "legacy") for n, s in expected} <= firing
                and expected_sick <= sick_firing
            ):
                break
            time.sleep(0.5)
        time.sleep(3)  # a few more evaluations: nothing else may fire
        firing, sick_firing = labelled(("firing", "pending"))
        targets = _get_json(f"{base}/api/v1/targets")["data"]["activeTargets"]
        summaries = {
            a["annotations"].get("summary", "")
            for a in _alerts(base)
            if a["labels"]["job"] == "legacy"
        }
        joined = _query(
            base,
            'gpudiag_finding{job="sick_node"} * on(hostname, gpu) group_left(device) '
            "DCGM_FI_DEV_GPU_UTIL",
        )
        panels = {title: _query(base, q) for title, q in _dashboard_queries(".*").items()}
        on_host = _query(base, _dashboard_queries("simulated")["Findings"])
        session_events = _query(base, 'gpudiag_capture_events_total{job="session"}')
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log_file.close()
        planted.close()
        sick.close()
        healthy.close()
        legacy.close()
        dcgm.shutdown()
        dcgm.server_close()
        session.stop()
    log = (tmp_path / "prometheus.log").read_text(errors="replace")[-3000:]
    assert all(t["health"] == "up" for t in targets), (targets, log)
    assert {(n, s) for n, s, job in firing if job == "planted"} == expected, (firing, log)
    assert sick_firing == expected_sick, (sick_firing, log)
    assert not {a for a in firing if a[2] == "healthy"}, firing
    # The old label alone: the same alerts, their summaries naming the host.
    assert {(n, s) for n, s, job in firing if job == "legacy"} == expected, firing
    assert all("simulated" in text for text in summaries), summaries
    # gpudiag's findings join dcgm-exporter's samples on (hostname, gpu): GPUs 1-3 of the node.
    assert {r["metric"]["gpu"] for r in joined} >= {"1", "2", "3"}, joined
    assert all(r["metric"]["device"] == f"nvidia{r['metric']['gpu']}" for r in joined), joined
    # The dashboard's queries: the findings of every exporter, whichever host label it writes,
    # once each (a series with both labels is not counted twice).
    found = panels["Findings"]
    assert {r["metric"]["job"] for r in found} >= {"planted", "legacy", "sick_node"}, found
    keys = [(r["metric"]["job"], r["metric"]["id"], r["metric"].get("gpu")) for r in found]
    assert len(keys) == len(set(keys)), keys
    assert {r["metric"]["job"] for r in on_host} == {"planted", "legacy"}, on_host
    assert all(r["metric"]["hostname"] == "simulated" for r in on_host), on_host
    empty = [t for t, result in panels.items() if not result]
    assert len(empty) < len(panels) // 2, f"dashboard panels with no data: {empty}"
    if session_port:
        assert [r["metric"]["job"] for r in session_events] == ["session"], session_events
