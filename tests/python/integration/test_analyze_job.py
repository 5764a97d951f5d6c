# SPDX-License-Identifier: Apache-2.0
"""A job's files analysed side by side: on a local process pool, on a real Dask cluster (loopback
only), and from the command line; each must give the single-process result. And the files of one
process (a trace and a snapshot) as one report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gpudiag
from gpudiag import cli
from gpudiag._errors import EXIT_INPUT

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT.parent / "shared" / "corpus"
ARCHIVE = CORPUS / "kineto_traces" / "param_dlrm_kineto_8ranks.tar.gz"
PAIR = [CORPUS / "kineto_traces" / f"hta_sampled_rank-{r}.json.gz" for r in (0, 1)]
TRACE = (
    CORPUS
    / "kineto_traces"
    / "kineto_resnet50_num_workers_4_worker0.1623212756351.pt.trace.json.gz"
)
SNAPSHOT = CORPUS / "memory_snapshots" / "silmont2000_cs336a2_mem_snapshot.pickle"


def _need(*paths: Path) -> None:
    for p in paths:
        if not p.exists():
            pytest.skip(f"corpus file absent: {p}")


def test_local_pool_equals_one_process() -> None:
    _need(ARCHIVE)
    alone = gpudiag.analyze(ARCHIVE)
    pooled = gpudiag.analyze_job(ARCHIVE, jobs=2)
    assert len(pooled.to_dict()["ranks"]) == 8
    assert pooled.to_json() == alone.to_json()


@pytest.mark.slow
def test_dask_local_cluster_equals_one_process() -> None:
    distributed = pytest.importorskip("distributed")
    _need(ARCHIVE, *PAIR)
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        for paths in ([ARCHIVE], PAIR):
            on_dask = gpudiag.analyze_job(paths, executor=client.get_executor())
            assert on_dask.to_json() == gpudiag.analyze(paths).to_json()
    assert len(on_dask.to_dict()["ranks"]) == 2


def test_cli_jobs_equals_one_process(capsys: pytest.CaptureFixture[str]) -> None:
    _need(*PAIR)
    # Two ranks of a 128-rank job: partial input, so exit 3 unless accepted.
    assert cli.main(["analyze", *map(str, PAIR), "--format", "json"]) == EXIT_INPUT
    alone = json.loads(capsys.readouterr().out)
    assert not alone["input"]["complete"]
    args = ["analyze", *map(str, PAIR), "--format", "json", "--jobs", "2", "--allow-partial"]
    assert cli.main(args) in (0, 1)
    pooled = json.loads(capsys.readouterr().out)
    assert pooled == alone
    # The headline of the job names the ranks' findings.
    assert alone["findings"], "the ranks have findings: the job headline must show them"
    # Summaries of the ranks' findings are the job's (rank -1); a straggler names its rank: the
    # pair's rank 1, which reaches the collectives last on the GPU (HTA's straggler too).
    job_level = {"rank_straggler", "comm_imbalance"}
    assert all(f["rank"] == -1 for f in alone["findings"] if f["id"] not in job_level)
    assert [f["rank"] for f in alone["findings"] if f["id"] == "rank_straggler"] == [1]


def test_a_trace_and_its_snapshot_are_one_report() -> None:
    _need(TRACE, SNAPSHOT)
    report = gpudiag.analyze([TRACE, SNAPSHOT]).to_dict()
    assert report.get("ranks", []) == []
    ids = {s["id"] for s in report["sections"]}
    assert {"timeline", "memory"} <= ids
    assert " + " in report["source"]["description"]


def test_globs_and_folders_expand(tmp_path: Path) -> None:
    _need(*PAIR)
    for p in PAIR:
        (tmp_path / p.name).symlink_to(p)
    inputs = gpudiag._job.expand_inputs(str(tmp_path / "hta_sampled_rank-*.json.gz"))
    assert [Path(i.path).name for i in inputs] == [p.name for p in PAIR]
    folder = gpudiag.analyze(tmp_path).to_dict()
    files = gpudiag.analyze(PAIR).to_dict()
    assert [r["source"]["rank"] for r in folder["ranks"]] == [0, 1]
    job = next(s for s in folder["sections"] if s["id"] == "job")
    assert job == next(s for s in files["sections"] if s["id"] == "job")
