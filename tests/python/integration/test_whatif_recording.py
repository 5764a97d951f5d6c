# SPDX-License-Identifier: Apache-2.0
"""The allocator what-if over gpudiag's own recordings: a CPU-only session handed a real torch
snapshot's allocator events (read in place from the corpus; skipped when it is absent) answers
``session.whatif()`` while it runs, and ``gpudiag whatif`` answers for the recording it wrote as
for the snapshot; a recording without allocator events is refused, saying what it lacks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import gpudiag
from gpudiag import cli
from gpudiag._errors import EXIT_OK, FailedPreconditionError

ROOT = Path(__file__).resolve().parents[3]
SNAPSHOT = ROOT.parent / "shared" / "corpus" / "memory_snapshots" / "decomfl_memory.pickle"


def _cpu_session(record: Path | None, **options: object) -> gpudiag.Session:
    return gpudiag.session(record, capture_gpu=False, nvml_hz=0, torch=False, **options)


def _whatif_json(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert cli.main(["whatif", str(path), "--format", "json"]) == EXIT_OK
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


@pytest.mark.parametrize("window_s", [0, 3600])
def test_a_session_recording_answers_as_its_snapshot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], window_s: int
) -> None:
    if not SNAPSHOT.exists():
        pytest.skip(f"{SNAPSHOT} is absent")
    record = tmp_path / "run.gpudiag"
    with _cpu_session(record, record_window_s=window_s) as session:
        session.replay(SNAPSHOT)
        live = session.whatif(settings="expandable_segments:True")
    assert "the session" in live.source
    assert live.reproduction.exact, live.reproduction.first_difference
    assert [o.label for o in live.outcomes][:3] == ["recorded", "baseline", "chosen"]

    recorded = _whatif_json(record, capsys)
    snapshot = _whatif_json(SNAPSHOT, capsys)
    assert recorded["source"] == str(record)
    assert recorded["reproduction"]["exact"] is True
    for key in ("recorded_peak_reserved_bytes", "modelled_peak_reserved_bytes", "allocations"):
        assert recorded["reproduction"][key] == snapshot["reproduction"][key], key
    assert recorded["reproduction"]["recorded_peak_reserved_bytes"] == (
        live.reproduction.recorded_peak_reserved_bytes
    )
    assert [(o["change"], o["peak_reserved_bytes"]) for o in recorded["outcomes"]] == [
        (o["change"], o["peak_reserved_bytes"]) for o in snapshot["outcomes"]
    ]
    assert cli.main(["whatif", str(record)]) == EXIT_OK
    assert "Reproduction under the recorded settings: exact" in capsys.readouterr().out


def test_a_recording_without_allocator_events_says_what_it_lacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = tmp_path / "cuda.gpudiag"
    with _cpu_session(record) as session:
        event = gpudiag._core.Event()  # what CUPTI records for a cudaMalloc
        event.kind = gpudiag._core.EventKind.device_alloc
        event.device = 0
        event.memory.address = 0x7F0000000000
        event.memory.bytes = 64 << 20
        assert session.native.record(event)
        # The OOM observer's record alone is no history either.
        assert session.record_oom(1 << 30, 0, 80 << 30, 0)
        with pytest.raises(FailedPreconditionError, match="no caching-allocator operations"):
            session.whatif()
    code = cli.main(["whatif", str(record)])
    assert code == FailedPreconditionError.exit_code
    err = capsys.readouterr().err
    assert "1 device-memory events are driver-level" in err
    assert "memory_history" in err
    with _cpu_session(None) as unrecorded, pytest.raises(FailedPreconditionError, match="record"):
        unrecorded.whatif()
