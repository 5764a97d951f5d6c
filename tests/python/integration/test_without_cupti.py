# SPDX-License-Identifier: Apache-2.0
"""Verdicts without CUPTI: a real PyTorch training loop over a slow DataLoader, in a process
where no CUPTI can load (GPUDIAG_CUPTI_PATH names a file that does not exist, which gpudiag
reports instead of searching further), still gets input_bound and its step times; the findings
that need GPU activity say they were not evaluated. And what capabilities() says there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.torch

pytest.importorskip("torch")

_TRAIN = """
    import json, time
    import torch
    from torch.utils.data import DataLoader, Dataset
    import gpudiag

    class SlowDataset(Dataset):
        def __len__(self):
            return 24
        def __getitem__(self, i):
            time.sleep(0.015)  # 30 ms per batch of 2, against a few ms of compute
            return torch.full((16,), float(i))

    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gpudiag.session(nvml_hz=0) as s:
        for batch in DataLoader(SlowDataset(), batch_size=2, num_workers=0):
            opt.zero_grad()
            model(batch).sum().backward()
            opt.step()
        status = s.status()
    report = s.report()
    f = report.finding("input_bound")
    print(json.dumps({
        "level": gpudiag._core.capture_level_name(status.level),
        "reasons": list(status.reasons),
        "input_bound": None if f is None else {"title": f.title,
                                               "evidence": f.evidence},
        "steps": report.figure("timeline", "steps", 0),
        "step_time_ns": report.figure("timeline", "step_time_ns", 0),
        "gpu_idle": report.finding("gpu_idle") is not None,
        "notes": list(report.notes),
        "properties": report.source.get("properties", {}),
    }))
"""


def _run(code: str) -> dict:
    env = dict(os.environ, GPUDIAG_CUPTI_PATH="/nonexistent/libcupti.so.12")
    result = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_training_loop_without_cupti_is_found_input_bound() -> None:
    out = _run(_TRAIN)
    assert out["level"] in ("framework", "nvml", "no_gpu"), out["level"]
    cupti = [r for r in out["reasons"] if r.startswith("cupti_activity:")]
    # Where a driver is, the reason names the forced path; without one, the missing driver.
    assert any("/nonexistent/libcupti.so.12" in r or "no CUDA driver" in r for r in cupti), cupti
    assert len(cupti) == len(set(cupti)), cupti
    bound = out["input_bound"]
    assert bound is not None, out["notes"]
    assert "input-bound" in bound["title"]
    assert any("GPU activity was not observed" in e for e in bound["evidence"]), bound
    # Step times come from the optimizer steps, without the GPU.
    assert out["steps"] >= 10
    assert out["step_time_ns"] > 20e6
    # What needs GPU activity is not claimed either way, and the report says so.
    assert not out["gpu_idle"]
    assert any("were not evaluated" in n for n in out["notes"]), out["notes"]
    # The live report's source names the framework side of the stack.
    assert out["properties"].get("stack.framework") == "torch", out["properties"]


def test_capabilities_say_what_works_then_what_does_not_and_name_the_stack() -> None:
    code = """
        import torch, gpudiag
        caps = gpudiag.capabilities()
        text = str(caps)
        print(__import__("json").dumps({"level": caps.level, "text": text,
                                         "available": caps.available,
                                         "stack": caps.to_dict()["stack"]}))
    """
    out = _run(code)
    text = out["text"]
    can, cannot, stack = text.index("  can:"), text.index("  cannot:"), text.index("  stack:")
    assert can < cannot < stack
    # Sessions here time steps and input waits: the framework level is available, not missing.
    assert any(a.startswith("framework: step times, phases, input waits") for a in out["available"])
    assert "framework: NVTX ranges need a GPU" in text or out["level"] != "no_gpu"
    assert out["level"] != "no_gpu"
    assert "PyTorch " in text[stack:]
    assert out["stack"]["framework"] == "torch"
    assert out["stack"]["cupti"] == ""
    assert "CUPTI: none in use" in text[stack:]
