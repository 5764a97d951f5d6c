# SPDX-License-Identifier: Apache-2.0
"""A two-rank gloo job (CPU) whose rank 1 sleeps in Python before its second all_reduce, while
rank 0 runs a gpudiag session with ``collective_timeout_s`` (docs/hangs.md, "Live"): rank 0's
session reads its own Flight Recorder every second, finds the all_reduce in flight past the
timeout and writes its window. Rank 0 writes ``<out>/report.json`` (its live report, taken once
the dump is there) and ``<out>/http_report.json`` (the same from its HTTP ``GET /report``, where
this build serves HTTP) beside the recording and its dumps; then the job is killed.

    python tests/python/live_collective_job.py OUT
"""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing
import os
import signal
import sys
import threading
import time
import urllib.request
from pathlib import Path

from fr_dump_generator import _free_port

TIMEOUT_S = 2.0  # the session's collective_timeout_s
SLEEP_S = 30.0  # rank 1's stall: far past the timeout; the job is killed before it ends
JOB_LIMIT_S = 25.0


def _rank(rank: int, port: int, out: Path) -> None:
    import torch
    import torch.distributed as dist

    import gpudiag

    store = dist.TCPStore("127.0.0.1", port, 2, rank == 0, timeout=dt.timedelta(seconds=20))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2)
    grads = torch.ones(4)
    dist.all_reduce(grads)  # #1 completes on both ranks
    if rank == 1:
        time.sleep(SLEEP_S)
        dist.all_reduce(grads)
        return
    session = gpudiag.Session(
        record=out / "run.gpudiag",
        record_window_s=60,
        capture_gpu=False,
        nvml_hz=0,
        collective_timeout_s=TIMEOUT_S,
        http="127.0.0.1:0",
    ).start()
    threading.Thread(target=dist.all_reduce, args=(grads,), daemon=True).start()  # #2 hangs
    deadline = time.monotonic() + JOB_LIMIT_S
    while time.monotonic() < deadline and not list(out.glob("run-dump-*-collective.gpudiag")):
        time.sleep(0.1)
    if session.http_url is not None:
        with urllib.request.urlopen(session.http_url + "/report", timeout=10) as answer:
            (out / "http_report.json").write_bytes(answer.read())
    report = session.report()
    (out / ".report.json").write_text(json.dumps(report.to_dict()))
    (out / ".report.json").rename(out / "report.json")
    os._exit(0)  # the collective never ends: no clean shutdown


def run(out: Path) -> float:
    """Runs the job; returns its seconds. Raises RuntimeError when rank 0 wrote no report."""
    os.environ["TORCH_FR_BUFFER_SIZE"] = "64"
    out.mkdir(parents=True, exist_ok=True)
    ctx = multiprocessing.get_context("spawn")  # torch is imported in the ranks only
    port = _free_port()
    start = time.monotonic()
    procs = [ctx.Process(target=_rank, args=(r, port, out), daemon=True) for r in range(2)]
    for p in procs:
        p.start()
    while time.monotonic() - start < JOB_LIMIT_S + 10 and not (out / "report.json").exists():
        if not procs[0].is_alive():
            break
        time.sleep(0.05)
    for p in procs:
        if p.is_alive() and p.pid is not None:
            os.kill(p.pid, signal.SIGKILL)
        p.join()
    if not (out / "report.json").exists():
        raise RuntimeError(f"{out}: rank 0 wrote no report")
    return time.monotonic() - start


if __name__ == "__main__":
    print(f"{run(Path(sys.argv[1])):.1f} s")
