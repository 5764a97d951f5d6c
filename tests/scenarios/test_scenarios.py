# SPDX-License-Identifier: Apache-2.0
"""Replays each example's committed GPU recording and checks gpudiag's verdict.

A scenario whose recording has not been made on a GPU yet is skipped and says so: it is never
replaced by a synthetic trace presented as real. On a GPU machine, tests/gpu/torch_check.py runs
the examples live and records them (see tests/gpu/device_check.sh).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
RECORDED = ROOT / "tests" / "data" / "recorded"
EXPECTATIONS = json.loads((HERE / "expectations.json").read_text())
SCENARIOS = sorted(k for k in EXPECTATIONS if not k.startswith("_"))


def check_verdict(name: str, finding_ids: list[str], severities: dict[str, str]) -> None:
    """Raises AssertionError when the findings do not match the scenario's expectation."""
    expected = EXPECTATIONS[name]
    for required in expected.get("required", []):
        assert required in finding_ids, f"{name}: expected {required}, got {finding_ids}"
    for forbidden in expected.get("forbidden", []):
        assert forbidden not in finding_ids, f"{name}: {forbidden} must not appear"
    if expected.get("healthy"):
        serious = [i for i in finding_ids if severities.get(i) in ("warning", "critical")]
        assert not serious, f"{name}: a healthy run got findings {serious}"


@pytest.mark.parametrize("name", SCENARIOS)
def test_replayed_recording_gives_the_verdict(name: str) -> None:
    recording = RECORDED / f"{name}.gpudiag"
    if not recording.exists():
        pytest.skip(f"no real GPU recording of '{name}' yet ({recording.name} not committed)")
    gpudiag = pytest.importorskip("gpudiag")
    report = gpudiag.analyze([str(recording)])
    ids = [f.id for f in report.findings]
    severities = {f.id: f.severity for f in report.findings}
    check_verdict(name, ids, severities)
    assert report.source.get("simulated") is not True, "scenario recordings must be real"


def test_every_example_has_an_expectation() -> None:
    examples = {p.stem for p in (ROOT / "examples" / "python").glob("*.py")}
    examples.discard("_common")
    assert examples == set(SCENARIOS)


def test_check_verdict_rejects_wrong_verdicts() -> None:
    with pytest.raises(AssertionError):
        check_verdict("starved_dataloader", ["launch_bound"], {"launch_bound": "warning"})
    with pytest.raises(AssertionError):
        check_verdict("healthy", ["input_bound"], {"input_bound": "critical"})
    check_verdict("healthy", ["note"], {"note": "info"})
