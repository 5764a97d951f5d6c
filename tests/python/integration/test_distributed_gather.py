# SPDX-License-Identifier: Apache-2.0
"""Per-rank reports gathered to rank 0 through torch.distributed (gloo, two CPU processes)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.torch, pytest.mark.slow]

CORPUS = Path(__file__).resolve().parents[3] / ".." / "shared" / "corpus" / "kineto_traces"

# Each rank's own report is what the analyzer makes of a real trace of that rank (HTA's
# down-sampled pair of a 128-rank NCCL job), so the gather is tested on reports gpudiag emits.
WORKER = textwrap.dedent("""
    import json, os, sys
    import torch.distributed as dist
    import gpudiag
    from gpudiag.integrations.distributed import gather_report

    rank = int(sys.argv[1])
    dist.init_process_group("gloo", init_method=sys.argv[2], rank=rank, world_size=2)
    own = gpudiag.analyze(os.path.join(sys.argv[3], f"hta_sampled_rank-{rank}.json.gz"))
    job = gather_report(own)
    dist.destroy_process_group()
    if rank == 0:
        print(json.dumps(job.to_dict()))
    else:
        print("none" if job is None else "unexpected")
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_rank_zero_gets_the_job_report(tmp_path: Path) -> None:
    pytest.importorskip("torch.distributed")
    if not (CORPUS / "hta_sampled_rank-0.json.gz").exists():
        pytest.skip(f"the corpus is not beside the checkout ({CORPUS})")
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    init = f"tcp://127.0.0.1:{_free_port()}"
    procs = [
        subprocess.Popen(
            [sys.executable, "-W", "ignore", str(script), str(r), init, str(CORPUS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in (0, 1)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
    assert outs[1][0].strip() == "none"
    job = json.loads(outs[0][0])
    assert [r["source"]["rank"] for r in job["ranks"]] == [0, 1]
    assert job["source"]["world_size"] == 2
    for rank, report in enumerate(job["ranks"]):
        # findings carry the rank they came from
        assert all(f["rank"] == rank for f in report["findings"]), report["findings"]
    job_section = next(s for s in job["sections"] if s["id"] == "job")
    table = job_section["tables"][0]
    assert "step_time_ns" in table["columns"], table["columns"]
    assert [row[0] for row in table["rows"]] == [0, 1]
