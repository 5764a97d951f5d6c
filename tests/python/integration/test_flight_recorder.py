# SPDX-License-Identifier: Apache-2.0
"""Flight Recorder dumps of real gloo jobs with planted faults (tests/python/fr_dump_generator.py,
made here at test time) read by `gpudiag analyze DIR --format json`: each verdict must name the
planted process group, sequence id, op and culprit rank, and a missing rank's dump must be said."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpudiag import cli
from gpudiag._errors import EXIT_FINDINGS, EXIT_INPUT

pytestmark = [pytest.mark.torch, pytest.mark.slow]

GENERATOR = Path(__file__).resolve().parents[1] / "fr_dump_generator.py"
CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "corpus" / "kineto_traces"
CASES = [f"{fault}-w{world}" for world in (2, 4) for fault in ("skip", "size", "sleep", "die")]


def _generate(out: Path, *extra: str) -> dict[str, Any]:
    pytest.importorskip("torch.distributed")
    subprocess.run(
        [sys.executable, "-W", "ignore", str(GENERATOR), str(out), *extra],
        check=True,
        capture_output=True,
        timeout=600,
    )
    planted: dict[str, Any] = json.loads((out / "planted.json").read_text())
    return planted


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("fr")
    # the sleep case first, so that --also-json dumps it in the JSON form too
    faults = ["sleep", "skip", "size", "die"]
    return out, _generate(out, "--faults", *faults, "--also-json")


def _analyze(
    path: Path, capsys: pytest.CaptureFixture[str], partial: bool = False
) -> dict[str, Any]:
    # A hang fails the command (critical findings); a job with a rank's dump missing is partial
    # input, which its exit code says first.
    code = cli.main(["analyze", str(path), "--format", "json", "--fail-on", "critical"])
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert code == (EXIT_INPUT if partial else EXIT_FINDINGS), code
    return report


def _verdict(report: dict[str, Any]) -> dict[str, Any]:
    # The job's section has it; a job of one dump (the others missing) has it in its own.
    (table,) = [
        t for s in report["sections"] for t in s["tables"] if t["id"] == "collective_verdicts"
    ]
    rows = [dict(zip(table["columns"], row)) for row in table["rows"]]
    assert len(rows) == 1, rows  # one process group: the default one
    return rows[0]


@pytest.mark.parametrize("case", CASES)
def test_verdict_names_the_planted_fault(
    case: str, dumps: tuple[Path, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    out, planted = dumps
    want = planted[case]
    report = _analyze(out / case, capsys, partial=bool(want["missing"]))
    finding = next(f for f in report["findings"] if f["id"] == want["finding"])
    assert finding["rank"] == want["culprit"], finding
    figures = {key: f["value"] for key, f in finding["figures"].items()}
    assert figures["seq_id"] == want["seq"], finding
    assert figures["culprit_rank"] == want["culprit"], finding
    assert f"Process group {want['group']} (default_pg)" in finding["title"], finding["title"]
    assert f"{want['op']} " in finding["title"] or f"called {want['op']}" in finding["title"]
    verdict = _verdict(report)
    assert verdict["group"] == want["group"]
    assert verdict["seq"] == want["seq"]
    assert verdict["op"] == want["op"]
    assert verdict["culprit_ranks"] == str(want["culprit"])
    if want["finding"] == "collective_hang" and want["fault"] != "die":
        # where the culprit was last seen: the generator's own line, not torch's wrappers
        assert "fr_dump_generator.py" in finding["summary"], finding["summary"]
    # only the planted fault: a hang is not also called a desync, nor the other way round
    other = {"collective_hang", "collective_desync"} - {want["finding"]}
    assert not [f for f in report["findings"] if f["id"] in other], report["findings"]


@pytest.mark.parametrize("world", [2, 4])
def test_a_missing_rank_dump_is_said(
    world: int, dumps: tuple[Path, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = dumps
    report = _analyze(out / f"die-w{world}", capsys, partial=True)
    culprit = world - 1
    assert not report["input"]["complete"]
    assert any(f"rank {culprit})" in m for m in report["input"]["missing"]), report["input"]
    finding = next(f for f in report["findings"] if f["id"] == "collective_hang")
    assert f"rank {culprit} left no Flight Recorder dump" in finding["summary"]
    assert _verdict(report)["missing_ranks"] == str(culprit)


def test_the_json_form_gives_the_same_verdict(
    dumps: tuple[Path, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    out, planted = dumps
    want = planted["sleep-w2-json"]
    assert (out / "sleep-w2-json" / "nccl_trace_rank_0").read_bytes().startswith(b"{")
    verdict = _verdict(_analyze(out / "sleep-w2-json", capsys))
    assert (verdict["seq"], verdict["op"], verdict["culprit_ranks"]) == (
        want["seq"],
        want["op"],
        str(want["culprit"]),
    )


def test_the_culprits_own_report_is_attached(
    tmp_path: Path, dumps: tuple[Path, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    # Each dump beside a trace of the same rank (real traces of another two-rank job: what is
    # tested is the join) joins that rank's process: two ranks, not four, and the hang's culprit
    # comes with what its own trace found.
    traces = [CORPUS / f"hta_sampled_rank-{r}.json.gz" for r in (0, 1)]
    if not all(t.exists() for t in traces):
        pytest.skip(f"corpus traces absent: {traces}")
    out, _ = dumps
    for rank in (0, 1):
        (tmp_path / f"nccl_trace_rank_{rank}").write_bytes(
            (out / "sleep-w2" / f"nccl_trace_rank_{rank}").read_bytes()
        )
        (tmp_path / f"rank{rank}_trace.json.gz").symlink_to(traces[rank])
    report = _analyze(tmp_path, capsys, partial=True)  # the corpus traces are partial
    assert [r["source"]["rank"] for r in report["ranks"]] == [0, 1]
    hang = next(f for f in report["findings"] if f["id"] == "collective_hang")
    own = {f"rank 1's own report: {f['title']} ({f['id']})" for f in report["ranks"][1]["findings"]}
    assert own, "rank 1's trace has findings of its own"
    assert "Rank 1's own inputs found: " in hang["summary"], hang["summary"]
    attached = [e for e in hang["evidence"] if e.startswith("rank 1's own report: ")]
    assert attached, hang["evidence"]
    assert set(attached) <= own, (attached, own)
