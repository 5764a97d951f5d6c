# SPDX-License-Identifier: Apache-2.0
"""A session's HTTP control (``gpudiag.session(http=...)``, docs/http.md) on loopback, asked by
urllib and curl as an operator or an agent would: /healthz, /metrics, /report, /dump, the
capture pause, a token where one is set, a non-loopback address refused without one, and a
bounded load that the program's own loop does not feel (the numbers are printed)."""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import gpudiag

parser = pytest.importorskip("prometheus_client.parser")


def _session(tmp_path: Path, **options: Any) -> gpudiag.Session:
    s = gpudiag.session(
        tmp_path / "run.gpudiag",
        record_window_s=30,
        capture_gpu=False,
        nvml_hz=0,
        torch=False,
        **options,
    )
    s.start()
    if s.http_url is None:
        s.stop()
        pytest.skip(f"no HTTP control here: {s.http_status()['reason']}")
    return s


def _ask(
    url: str, method: str = "GET", token: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as r:  # loopback only
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_an_operator_asks_a_running_session_over_loopback(tmp_path: Path) -> None:
    s = _session(tmp_path, http="127.0.0.1:0")
    try:
        for n in range(20):
            s.step(n)
        url = s.http_url
        assert url is not None
        assert url.startswith("http://127.0.0.1:")

        status, _, body = _ask(f"{url}/healthz")
        assert status == 200
        assert json.loads(body)["running"] is True

        status, headers, body = _ask(f"{url}/metrics")
        assert status == 200
        assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
        names = {f.name for f in parser.text_string_to_metric_families(body.decode())}
        assert "gpudiag_capture_events" in names  # the counter family, as Prometheus names it

        status, _, body = _ask(f"{url}/report?compact=1")
        assert status == 200
        assert body.count(b"\n") == 1
        report = gpudiag.Report.from_json(body.decode())
        assert report.section("cost") is not None

        status, _, body = _ask(f"{url}/dump", "POST")
        assert status == 200, body
        dumped = Path(json.loads(body)["path"])
        assert dumped.exists()
        assert dumped.parent == tmp_path
        assert gpudiag.analyze([str(dumped)]) is not None  # a recording gpudiag reads

        status, _, body = _ask(f"{url}/capture/pause?reason=nsys", "POST")
        assert status == 409
        assert b"CUPTI" in body
        assert _ask(f"{url}/nope")[0] == 404
        assert _ask(f"{url}/dump")[0] == 405

        curl = shutil.which("curl")
        if curl is not None:
            out = subprocess.run(
                [curl, "-s", "-o", "/dev/null", "-w", "%{http_code}", f"{url}/metrics"],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
            assert out.stdout == "200", out
            out = subprocess.run(
                [curl, "-s", "-X", "POST", f"{url}/dump"],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
            assert "one dump every 10 s" in out.stdout, out  # spaced: the dump above was now
    finally:
        s.stop()
    assert s.http_url is None
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{url}/healthz", timeout=5)


def test_another_address_needs_a_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUDIAG_HTTP_TOKEN", raising=False)
    refused = gpudiag.session(capture_gpu=False, nvml_hz=0, torch=False, http="0.0.0.0:0")
    refused.start()
    try:
        st = refused.http_status()
        if "no HTTP control" in st["reason"]:
            pytest.skip(st["reason"])
        assert not st["serving"], st
        assert "needs a token" in st["reason"], st
        assert any("needs a token" in n for n in refused.report().notes)
    finally:
        refused.stop()

    s = _session(tmp_path, http="0.0.0.0:0", http_token="t0ken")
    try:
        port = s.http_status()["port"]
        assert _ask(f"http://127.0.0.1:{port}/healthz")[0] == 401
        assert _ask(f"http://127.0.0.1:{port}/healthz", token="wrong")[0] == 401
        assert _ask(f"http://127.0.0.1:{port}/metrics", token="t0ken")[0] == 200
    finally:
        s.stop()


# A client in a process of its own, so that its work never takes the program's interpreter lock:
# what is measured is what serving costs the program, not what asking does.
_LOAD = """
import sys, time, urllib.request, urllib.error
base, n = sys.argv[1], int(sys.argv[2])
codes = {}
for i in range(n):
    path = ("/metrics", "/report", "/healthz")[i % 3]
    try:
        with urllib.request.urlopen(base + path, timeout=10) as r:
            r.read()
            code = r.status
    except urllib.error.HTTPError as e:
        code = e.code
    codes[code] = codes.get(code, 0) + 1
    time.sleep(0.002)
print(codes)
"""


def _loop(s: gpudiag.Session, seconds: float) -> list[float]:
    """The program's loop: a fixed piece of work a step, timed; the step times in ms."""
    times = []
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        s.step(n)
        sum(i * i for i in range(2000))
        times.append((time.perf_counter() - t0) * 1e3)
        n += 1
    return times


def test_200_requests_leave_the_programs_loop_as_it_was(tmp_path: Path) -> None:
    s = _session(tmp_path, http="127.0.0.1:0")
    try:
        quiet = _loop(s, 1.5)
        client = subprocess.Popen(
            [sys.executable, "-c", _LOAD, str(s.http_url), "200"],
            stdout=subprocess.PIPE,
            text=True,
        )
        loaded: list[float] = []
        while client.poll() is None:
            loaded += _loop(s, 0.2)
        answers = eval(client.communicate(timeout=60)[0])
        report = s.report()
    finally:
        s.stop()
    q, ld = statistics.median(quiet), statistics.median(loaded)
    print(
        f"\nloop step, median (p99) ms: quiet {q:.3f} ({_p99(quiet):.3f}), "
        f"under 200 requests {ld:.3f} ({_p99(loaded):.3f}); answers {answers}"
    )
    # Every request was answered (200, or 429 past the rate), and the loop ran throughout:
    # the program's thread never waited on the server. Timing is reported, not asserted.
    assert sum(answers.values()) == 200, answers
    assert set(answers) <= {200, 429}, answers
    assert answers.get(200, 0) >= 100
    assert len(loaded) > 0
    assert report.figure("timeline", "steps") is None or report.figure("timeline", "steps") > 0


def _p99(values: list[float]) -> float:
    return sorted(values)[int(0.99 * (len(values) - 1))]
