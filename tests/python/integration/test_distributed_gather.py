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

WORKER = textwrap.dedent("""
    import json, os, sys
    import torch.distributed as dist
    import gpudiag
    from gpudiag import Report
    from gpudiag.torch_integration import gather_report

    rank = int(sys.argv[1])
    dist.init_process_group("gloo", init_method=sys.argv[2], rank=rank, world_size=2)
    own = Report({"source": {"rank": -1, "pid": os.getpid()},
                  "findings": [{"id": "input_bound", "severity": "warning", "title": "slow"}]
                              if rank == 1 else [],
                  "sections": [{"id": "timeline", "title": "t", "figures": {
                      "step_time": {"value": 100e6 * (1 + rank), "unit": "ns", "label": "s"}},
                      "tables": [], "series": []}]})
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
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    init = f"tcp://127.0.0.1:{_free_port()}"
    procs = [subprocess.Popen([sys.executable, "-W", "ignore", str(script), str(r), init],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in (0, 1)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
    assert outs[1][0].strip() == "none"
    job = json.loads(outs[0][0])
    assert [r["source"]["rank"] for r in job["ranks"]] == [0, 1]
    assert job["source"]["world_size"] == 2
    rank1 = job["ranks"][1]
    assert rank1["findings"][0]["rank"] == 1  # findings carry the rank they came from
    job_section = next(s for s in job["sections"] if s["id"] == "job")
    table = job_section["tables"][0]
    assert "timeline.step_time" in table["columns"]
    assert [row[0] for row in table["rows"]] == [0, 1]
