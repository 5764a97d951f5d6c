# SPDX-License-Identifier: Apache-2.0
"""Real PyTorch Flight Recorder dumps of small gloo jobs (CPU) with planted faults.

Each case runs WORLD rank processes (forked from this one, so torch is imported once) that call
STEPS steps of ``all_reduce`` + ``broadcast`` on the default process group with
``TORCH_FR_BUFFER_SIZE`` set, one rank (the culprit, the last one) misbehaving at step FAULT_STEP:

* ``skip``: it skips that step's two collectives and carries on (the others hang at the end);
* ``size``: it calls that step's broadcast with another size (a desync; gloo completes it);
* ``sleep``: it is stuck in Python (``time.sleep``) before that step's all_reduce;
* ``die``: it freezes (SIGSTOP, as a node that died without closing its connections) before that
  step: it writes no dump.

A timer thread in every rank dumps its Flight Recorder (``_dump_fr_trace``, the pickle torch's
watchdog writes; ``--json``: ``_dump_fr_trace_json``) to ``<out>/<case>/nccl_trace_rank_<r>``,
the name torch gives dumps, after DUMP_AFTER_S seconds, as a watchdog timeout would; then the
job is killed. ``<out>/planted.json`` says, per case, what the verdict must name.

    python tests/python/fr_dump_generator.py OUT [--world 2 4] [--faults skip size sleep die]
        [--json | --also-json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

STEPS = 4
FAULT_STEP = 2
DUMP_AFTER_S = 1.5  # after the process group is up: the job's collectives take milliseconds
CASE_TIMEOUT_S = 30.0
FAULTS = ("skip", "size", "sleep", "die")


def planted(fault: str, world: int) -> dict[str, Any]:
    """What a correct verdict names for `fault` (the seq ids follow from the step loop)."""
    culprit = world - 1
    all_reduce = 2 * FAULT_STEP + 1  # each step: all_reduce #2s+1, broadcast #2s+2
    expect: dict[str, Any] = {"group": "0", "culprit": culprit, "world": world, "fault": fault}
    if fault == "skip":  # the others' last all_reduce has no partner
        expect.update(finding="collective_hang", op="all_reduce", seq=2 * STEPS - 1)
    elif fault == "size":
        expect.update(finding="collective_desync", op="broadcast", seq=all_reduce + 1)
    else:
        expect.update(finding="collective_hang", op="all_reduce", seq=all_reduce)
    expect["missing"] = [culprit] if fault == "die" else []
    return expect


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _dump_later(torch: Any, path: Path, as_json: bool) -> None:
    time.sleep(DUMP_AFTER_S)
    c10d = torch._C._distributed_c10d
    if as_json:
        data = c10d._dump_fr_trace_json(includeCollectives=True, onlyActive=False)
    else:
        data = c10d._dump_fr_trace(
            includeCollectives=True, includeStackTraces=True, onlyActive=False
        )
    tmp = path.with_name("." + path.name)  # hidden until whole: the parent waits for the name
    tmp.write_bytes(data if isinstance(data, bytes) else data.encode())
    tmp.rename(path)


def _rank(rank: int, world: int, port: int, fault: str, out: Path, as_json: bool) -> None:
    import torch
    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", port, world, rank == 0, timeout=dt.timedelta(seconds=20))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    dump = threading.Thread(
        target=_dump_later, args=(torch, out / f"nccl_trace_rank_{rank}", as_json), daemon=True
    )
    dump.start()
    culprit = rank == world - 1
    grads, weights = torch.ones(4), torch.ones(4)
    for step in range(STEPS):
        if culprit and step == FAULT_STEP:
            if fault == "skip":
                continue
            if fault == "sleep":
                time.sleep(3600)
            if fault == "die":
                os.kill(os.getpid(), signal.SIGSTOP)
        dist.all_reduce(grads)
        bad = culprit and step == FAULT_STEP and fault == "size"
        dist.broadcast(torch.ones(8) if bad else weights, src=0)
    dump.join()


def run_case(out: Path, fault: str, world: int, as_json: bool = False) -> float:
    """Runs one job; returns its seconds. Raises RuntimeError when a dump is missing."""
    out.mkdir(parents=True, exist_ok=True)
    ctx = multiprocessing.get_context("fork")
    port = _free_port()
    start = time.monotonic()
    procs = [
        ctx.Process(target=_rank, args=(r, world, port, fault, out, as_json), daemon=True)
        for r in range(world)
    ]
    for p in procs:
        p.start()
    want = [out / f"nccl_trace_rank_{r}" for r in range(world) if fault != "die" or r < world - 1]
    while time.monotonic() - start < CASE_TIMEOUT_S and not all(w.exists() for w in want):
        time.sleep(0.05)
    for p in procs:  # the hung job is killed, as a scheduler would after the timeout
        if p.is_alive() and p.pid is not None:
            os.kill(p.pid, signal.SIGKILL)
        p.join()
    missing = [w.name for w in want if not w.exists()]
    if missing:
        raise RuntimeError(f"{out}: no dump from {missing}")
    return time.monotonic() - start


def _warm_symbolizer(torch: Any) -> None:
    # torch symbolizes the recorded stacks at the first dump, which takes seconds; done once here,
    # the forked ranks inherit it and dump at once.
    tb = torch._C._profiler.gather_traceback(python=True, script=False, cpp=False)
    torch._C._profiler.symbolize_tracebacks([tb])


def generate(
    out: Path, worlds: list[int], faults: list[str], as_json: bool = False, also_json: bool = False
) -> dict[str, Any]:
    """Writes every case under `out` and `out/planted.json`; returns the planted verdicts.
    `also_json`: the first case once more in the JSON form (torch is imported once for both)."""
    os.environ["TORCH_FR_BUFFER_SIZE"] = "64"
    import torch

    _warm_symbolizer(torch)
    runs = [(fault, world, as_json) for world in worlds for fault in faults]
    if also_json and not as_json:
        runs.append((faults[0], worlds[0], True))
    cases: dict[str, Any] = {}
    for fault, world, json_form in runs:
        name = f"{fault}-w{world}" + ("-json" if json_form else "")
        seconds = run_case(out / name, fault, world, json_form)
        cases[name] = dict(planted(fault, world), seconds=round(seconds, 2))
    (out / "planted.json").write_text(json.dumps(cases, indent=1))
    return cases


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--world", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--faults", nargs="+", choices=FAULTS, default=list(FAULTS))
    parser.add_argument("--json", action="store_true", help="dump the JSON form")
    parser.add_argument(
        "--also-json", action="store_true", help="and the first case in the JSON form too"
    )
    args = parser.parse_args(argv)
    cases = generate(args.out, args.world, args.faults, args.json, args.also_json)
    print(json.dumps(cases, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
