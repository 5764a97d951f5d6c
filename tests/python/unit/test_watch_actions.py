# SPDX-License-Identifier: Apache-2.0
"""watch_memory's built-in actions: each crossing records what ran and what it returned."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gpudiag
from gpudiag import _core

GiB = 1 << 30


def test_actions_are_checked(fake_backend) -> None:
    with gpudiag.session(torch=False, _backend_factory=fake_backend) as s:
        with pytest.raises(gpudiag.InvalidArgumentError, match="unknown watch action"):
            s.watch_memory("1 GiB", action="defragment")
        with pytest.raises(gpudiag.InvalidArgumentError, match="callback or an action"):
            s.watch_memory("1 GiB")


def test_each_crossing_records_the_action_and_its_result(fake_backend, tmp_path: Path) -> None:
    seen: list[int] = []
    with gpudiag.session(torch=False, _backend_factory=fake_backend):
        wid = gpudiag.watch_memory(
            "2 GiB", seen.append, action=["report", "empty_cache"], path=tmp_path
        )
        backend = fake_backend.last
        _threshold, crossing = backend.watches[wid]
        crossing(3 * GiB)  # what the session's worker does at a crossing
    assert seen == [3 * GiB]
    recorded = [args for name, _t, args in backend.calls if name == "record_watch_action"]
    assert len(recorded) == 1
    rid, action, ok, freed, detail = recorded[0]
    assert rid == wid
    assert action == "report+empty_cache+callback"
    assert ok is False  # no PyTorch with CUDA here: empty_cache could not run, and says so
    assert freed == 0
    written = Path(detail.split(";")[0])
    assert written.parent == tmp_path
    assert written.exists()
    assert "PyTorch with CUDA is not initialised" in detail
    json.loads(written.read_text())  # the report, as JSON


def test_a_failing_callback_is_recorded_not_raised(fake_backend) -> None:
    def boom(_used: int) -> None:
        raise RuntimeError("disk full")

    with gpudiag.session(torch=False, _backend_factory=fake_backend):
        wid = gpudiag.watch_memory("1 GiB", boom)
        fake_backend.last.watches[wid][1](2 * GiB)
    recorded = [args for name, _t, args in fake_backend.last.calls if name == "record_watch_action"]
    assert recorded[0][1:3] == ("callback", False)
    assert "disk full" in recorded[0][4]


@pytest.mark.skipif(not hasattr(_core, "Session"), reason="no live sessions in this build")
def test_a_real_crossing_lands_in_the_report(tmp_path: Path) -> None:
    import time

    with gpudiag.session(torch=False, capture_gpu=False, nvml_hz=0) as s:
        gpudiag.watch_memory("1 GiB", action="report", path=tmp_path)
        e = _core.Event()
        e.kind = _core.EventKind.device_alloc
        e.device = 0
        e.memory.address = 0x7F0000000000
        e.memory.bytes = 2 * GiB
        assert s.native.record(e)
        for _ in range(400):
            if list(tmp_path.glob("gpudiag-watch-*.report.json")):
                break
            time.sleep(0.01)
        time.sleep(0.05)
    memory = next(sec for sec in s.report().to_dict()["sections"] if sec["id"] == "memory")
    table = next(t for t in memory["tables"] if t["id"] == "watch_crossings")
    assert len(table["rows"]) == 1
    row = dict(zip(table["columns"], table["rows"][0]))
    assert row["action"] == "report"
    assert row["result"].endswith(".report.json")
    assert row["empty_cache could return"] == "unknown"  # no allocator segments or totals seen


def test_allocator_statistics_are_polled_on_a_timer_too() -> None:
    """Services mark no steps: the integration reads memory_stats on a timer as well."""
    import time
    from types import SimpleNamespace

    from gpudiag.integrations import torch as torch_integration

    recorded: list[tuple[str, float, int]] = []
    session = SimpleNamespace(
        memory_poll_s=0.01,
        record_counter=lambda name, value, device: recorded.append((name, value, device)),
    )
    # The program works on device 1; the timer's thread would see device 0 as "current".
    stats = {
        0: {"reserved_bytes.all.current": 0},
        1: {"allocated_bytes.all.current": 5.0, "reserved_bytes.all.current": 7.0},
    }
    fake_torch = SimpleNamespace(
        cuda=SimpleNamespace(
            is_initialized=lambda: True,
            current_device=lambda: 0,
            device_count=lambda: 2,
            memory_stats=lambda d: stats[d],
        )
    )
    integration = torch_integration.Integration(session)
    integration.torch = fake_torch
    integration._start_poller()
    for _ in range(200):
        if len(recorded) >= 4:
            break
        time.sleep(0.01)
    integration.detach()
    polls = [r for r in recorded if r[0] == "framework_reserved_bytes"]
    assert len(polls) >= 2, recorded
    assert polls[0] == ("framework_reserved_bytes", 7.0, 1)
    assert all(device == 1 for _name, _value, device in recorded[:-2])  # not the idle device 0
    count = len(recorded)
    time.sleep(0.05)
    assert len(recorded) == count  # stopped with the session
