# SPDX-License-Identifier: Apache-2.0
"""A Python service left on: the recording keeps only the last N seconds, written at stop and
whenever a dump is asked for (from a signal handler too), and read back as partial when older
events were let go."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

import gpudiag


def test_a_window_is_written_on_demand_from_a_signal_and_at_stop(tmp_path: Path) -> None:
    record = tmp_path / "svc.gpudiag"
    s = gpudiag.session(
        record, record_window_s=600, torch=False, capture_gpu=False, nvml_hz=0
    ).start()
    for step in range(5):
        s.step(step)
    previous = signal.signal(signal.SIGUSR1, lambda *_: s.request_dump())
    try:
        os.kill(os.getpid(), signal.SIGUSR1)
        # <stem>-dump-<pid>-<UTC time>-<n>-<why>: never a name a restart would reuse
        deadline = time.monotonic() + 10
        while not list(tmp_path.glob("svc-dump-*-requested.gpudiag")):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        (dump,) = tmp_path.glob("svc-dump-*-requested.gpudiag")
        assert f"-dump-{os.getpid()}-" in dump.name
    finally:
        signal.signal(signal.SIGUSR1, previous)
    s.dump(tmp_path / "now.gpudiag")
    s.stop()
    assert (tmp_path / "now.gpudiag").exists()
    report = gpudiag.analyze(record)
    assert report.complete  # the whole run fits in ten minutes: nothing was let go
    assert report.input["events"] >= 5  # the five step markers at least


def test_dump_without_a_window_is_a_clear_error(tmp_path: Path) -> None:
    s = gpudiag.session(torch=False, capture_gpu=False, nvml_hz=0).start()
    try:
        with pytest.raises(gpudiag.FailedPreconditionError, match="record_window_s"):
            s.dump(tmp_path / "x.gpudiag")
        s.request_dump()  # nothing to do, no error
    finally:
        s.stop()
