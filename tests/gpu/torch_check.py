#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""GPU check of the PyTorch integration (run on the lent GPU machine; tests/gpu/device_check.sh
calls it when present). Needs torch with CUDA and an installed gpudiag.

Trains a small CNN on synthetic data with planted problems, each under a gpudiag session that
writes $OUT/recorded/<name>.gpudiag, and prints gpudiag's verdict:
  slow_dataset     a 4 ms/sample Dataset with num_workers=0      (expect input_bound)
  step_leak        a list that keeps one activation per step      (expect a memory leak)
  pageable_copies  batches copied from ordinary (pageable) memory (expect pageable copies)
Then torch.profiler before and after a gpudiag session (it must still see CUDA kernels), and the
step time without gpudiag, with gpudiag's default mode and with torch.profiler, as a table.
Bounded: every part has a time limit, and a watchdog ends the whole run after 220 s.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import time
from pathlib import Path

WATCHDOG_S = 220
faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)  # never hang the device machine

import torch  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402

import gpudiag  # noqa: E402

OUT = Path(os.environ.get("OUT", "."))
RECORDED = OUT / "recorded"
RESULTS: dict[str, object] = {}


def model_and_opt():
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10)).cuda()
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


class Synthetic(Dataset):
    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s

    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, i: int):
        if self.delay_s:
            time.sleep(self.delay_s)
        return torch.randn(3, 64, 64), i % 10


def train(steps: int, loader=None, leak: list | None = None, pageable: bool = False,
          prof=None, batch: int = 32) -> float:
    """Trains `steps` steps; returns the mean step time in ms (after 3 warm-up steps)."""
    model, opt = model_and_opt()
    host = torch.randn(batch, 3, 64, 64)  # pageable unless pinned
    host_pinned = host.pin_memory()
    labels = torch.randint(0, 10, (batch,), device="cuda")
    it = iter(loader) if loader is not None else None
    times = []
    for step in range(steps):
        t0 = time.perf_counter()
        if it is not None:
            x, y = next(it)
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        else:
            x = (host if pageable else host_pinned).cuda(non_blocking=True)
            y = labels
        out = model(x)
        loss = torch.nn.functional.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if leak is not None:
            leak.append(out.detach().repeat(64, 1))  # the planted leak: kept every step
        if prof is not None:
            prof.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return 1e3 * sum(times[3:]) / max(1, len(times) - 3)


def verdict(name: str, session: gpudiag.Session) -> None:
    report = session.report()
    ids = sorted({f.id for f in report.findings})
    serious = sorted({f.id for f in report.findings if f.severity in ("warning", "critical")})
    RESULTS[name] = {"findings": ids, "serious": serious,
                     "status": str(gpudiag.status().capture_level)}
    print(report.summary())
    print("VERDICT " + json.dumps({"example": name, "findings": ids, "serious": serious}))


def scenario(name: str, **train_args) -> None:
    t0 = time.monotonic()
    try:
        with gpudiag.session(record=RECORDED / f"{name}.gpudiag") as s:
            train(**train_args)
        verdict(name, s)
    except Exception as e:  # report and go on: one broken scenario must not hide the others
        RESULTS[name] = {"error": repr(e)}
        print(f"SCENARIO {name} FAILED: {e!r}")
    print(f"[{name}: {time.monotonic() - t0:.1f} s]")


def profiler_kernels(steps: int = 5) -> int:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        train(steps, prof=prof)
    return sum(1 for e in prof.events() if str(getattr(e, "device_type", "")).endswith("CUDA"))


def main() -> int:
    if not torch.cuda.is_available():
        print("torch_check: no CUDA device; skipped")
        return 77
    RECORDED.mkdir(parents=True, exist_ok=True)
    print(gpudiag.status())
    scenario("slow_dataset", steps=25,
             loader=DataLoader(Synthetic(delay_s=0.004), batch_size=32, num_workers=0))
    scenario("step_leak", steps=40, leak=[])
    scenario("pageable_copies", steps=40, pageable=True, batch=256)

    before = profiler_kernels()
    with gpudiag.session():
        train(10)
    after = profiler_kernels()
    RESULTS["profiler_kernels"] = {"before_session": before, "after_session": after}
    print(f"torch.profiler CUDA events: {before} before a gpudiag session, {after} after")

    plain = train(60)
    with gpudiag.session():
        with_gpudiag = train(60)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with_profiler = train(60, prof=prof)
    RESULTS["step_ms"] = {"plain": plain, "gpudiag": with_gpudiag, "torch_profiler": with_profiler}
    print(f"{'mode':<16}{'step (ms)':>10}{'overhead':>10}")
    for mode, ms in (("plain", plain), ("gpudiag", with_gpudiag), ("torch.profiler",
                                                                     with_profiler)):
        print(f"{mode:<16}{ms:>10.3f}{(ms / plain - 1) * 100:>9.1f}%")
    (OUT / "torch_check.json").write_text(json.dumps(RESULTS, indent=2))
    ok = before > 0 and after > 0 and all("error" not in v for k, v in RESULTS.items()
                                          if isinstance(v, dict) and k not in ("step_ms",))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
