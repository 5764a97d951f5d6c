# SPDX-License-Identifier: Apache-2.0
"""Under torch.distributed: every rank's report to rank 0, combined there into the job report."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpudiag._report import Report


def _all_gather_json(torch: Any, dist: Any, data: Any, world: int) -> list[Any]:
    """Every rank's ``data`` as JSON bytes over all_gather: no pickling of what other processes
    send (all_gather_object unpickles it, and needs NumPy), and works on every backend."""
    import json

    payload = json.dumps(data).encode("utf-8")
    device = torch.device("cpu")
    if dist.get_backend() == "nccl":  # NCCL moves CUDA tensors only
        device = torch.device("cuda", torch.cuda.current_device())
    size = torch.tensor([len(payload)], dtype=torch.int64, device=device)
    sizes = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(world)]
    dist.all_gather(sizes, size)
    lengths = [int(s.item()) for s in sizes]
    padded = torch.zeros(max(lengths), dtype=torch.uint8, device=device)
    padded[: len(payload)] = torch.tensor(list(payload), dtype=torch.uint8, device=device)
    received = [torch.zeros(max(lengths), dtype=torch.uint8, device=device) for _ in range(world)]
    dist.all_gather(received, padded)
    return [
        json.loads(bytes(t[:n].cpu().tolist()).decode("utf-8")) for t, n in zip(received, lengths)
    ]


def gather_report(report: Report) -> Report | None:
    """Under torch.distributed: every rank's report to rank 0, combined there into the job report
    (C++ cross-rank analysis). Rank 0 returns it; other ranks return None. Without an initialised
    process group the report is returned as it is."""
    from gpudiag import _core
    from gpudiag._report import Report

    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributed", None) if torch is not None else None
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return report
    rank, world = dist.get_rank(), dist.get_world_size()
    data = report.to_dict()
    source = data.setdefault("source", {})
    if int(source.get("rank", -1)) < 0:
        source["rank"] = rank
    source["world_size"] = world
    for finding in data.get("findings", []):
        if int(finding.get("rank", -1)) < 0:
            finding["rank"] = rank
    gathered = _all_gather_json(torch, dist, data, world)
    if rank != 0:
        return None
    ranks = [Report(d).native() for d in gathered if d is not None]
    return Report.from_native(_core.analyze_job(ranks))
