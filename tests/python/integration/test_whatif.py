# SPDX-License-Identifier: Apache-2.0
"""gpudiag.whatif() and ``gpudiag whatif`` on the corpus snapshots (read in place; skipped when
the corpus is absent) and on committed inputs without history."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gpudiag
from gpudiag import cli
from gpudiag._errors import EXIT_OK, EXIT_USAGE

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT.parent / "shared" / "corpus" / "memory_snapshots"
NO_HISTORY = ROOT / "tests" / "data" / "memory" / "snapshot_bare_segments.pickle"

# Each recording's own peak reserved over its trace, and how much history it has.
SNAPSHOTS = [
    ("decomfl_memory.pickle", 1897922560, True),
    ("silmont2000_cs336a2_mem_snapshot.pickle", 3781165056, True),
    ("bcrafton_cs336a2_memory_snapshot.pickle", 4238344192, False),
    ("magma27_cs336a2_memory_snapshot.pickle", 14180941824, False),
]


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} is absent")
    return path


@pytest.mark.parametrize(("name", "peak", "from_start"), SNAPSHOTS)
def test_recorded_settings_reproduce_the_recorded_peak(
    name: str, peak: int, from_start: bool
) -> None:
    result = gpudiag.whatif(_need(CORPUS / name))
    assert result.reproduction.checked
    assert result.reproduction.exact, result.reproduction.first_difference
    assert result.reproduction.recorded_peak_reserved_bytes == peak
    assert result.outcomes[0].label == "recorded"
    assert result.outcomes[0].peak_reserved_bytes == peak
    assert result.history_from_start is from_start
    changes = {o.change for o in result.outcomes}
    assert {
        "expandable_segments:True",
        "max_split_size_mb:256",
        "roundup_power2_divisions:4",
    } <= changes
    assert result.advice


def test_cli_prints_the_reproduction_and_the_sweep(capsys: pytest.CaptureFixture[str]) -> None:
    path = _need(CORPUS / "decomfl_memory.pickle")
    assert cli.main(["whatif", str(path)]) == EXIT_OK
    out = capsys.readouterr().out
    assert "Reproduction under the recorded settings: exact" in out
    assert "1,897,922,560 B modelled, 1,897,922,560 B recorded" in out
    assert "expandable_segments:True" in out


def test_cli_json_with_chosen_settings_and_a_capacity(capsys: pytest.CaptureFixture[str]) -> None:
    path = _need(CORPUS / "silmont2000_cs336a2_mem_snapshot.pickle")
    code = cli.main(
        [
            "whatif",
            str(path),
            "--set",
            "expandable_segments=True",
            "--capacity",
            "3.5GiB",
            "--no-sweep",
            "--format",
            "json",
        ]
    )
    assert code == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    assert doc["reproduction"]["exact"] is True
    assert [o["label"] for o in doc["outcomes"]] == ["recorded", "baseline", "chosen"]
    chosen = doc["outcomes"][2]
    assert chosen["change"] == "expandable_segments:True"
    assert chosen["device_mallocs"] == 0
    assert chosen["page_maps"] > 0
    assert doc["capacity_bytes"] == int(3.5 * 2**30)
    # At 3.5 GiB the recorded settings need more than they had: the baseline fails somewhere.
    assert doc["outcomes"][1]["oom"] is True


def test_bad_settings_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    path = _need(CORPUS / "silmont2000_cs336a2_mem_snapshot.pickle")
    assert cli.main(["whatif", str(path), "--set", "max_split_size_mb=1"]) == EXIT_USAGE
    assert "max_split_size_mb too small" in capsys.readouterr().err
    with pytest.raises(gpudiag.InvalidArgumentError, match="capacity"):
        gpudiag.whatif(path, capacity="lots")


def test_a_snapshot_without_history_cannot_be_replayed() -> None:
    with pytest.raises(gpudiag.FailedPreconditionError, match="_record_memory_history"):
        gpudiag.whatif(_need(NO_HISTORY))


def test_whatif_is_a_cli_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "whatif" in capsys.readouterr().out


def test_the_modelled_torch_version_and_cautions_reach_python(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = _need(CORPUS / "silmont2000_cs336a2_mem_snapshot.pickle")
    assumed = gpudiag.whatif(path, sweep=False)
    # A snapshot does not record its torch version: the newest modelled release is assumed, and
    # the result says so rather than claiming it.
    assert assumed.torch_version_origin == "assumed"
    assert assumed.torch_version_note
    assert assumed.history_complete
    given = gpudiag.whatif(path, sweep=False, torch_version="2.13")
    assert (given.torch_version, given.torch_version_origin) == ("2.13", "given")
    assert all(isinstance(c.reason, str) for o in given.outcomes for c in o.cautions)
    assert cli.main(["whatif", str(path), "--no-sweep", "--torch-version", "2.13"]) == EXIT_OK
    assert "Allocator modelled: torch 2.13" in capsys.readouterr().out
