# SPDX-License-Identifier: Apache-2.0
"""The Python side of the stack verdict: what it reports about the framework (its CUDA build,
cuDNN, pip's CUDA wheels) and how capabilities() shows the native verdict. The rules are C++'s
(check_stack); these tests feed it the facts Python finds, in a fresh process each, because the
framework facts are process-wide. A stand-in ``torch`` module plays a CUDA 12.4 or CPU build on
this GPU-less machine, and a folder laid out like pip's ``nvidia`` namespace package plays the
CUDA wheels."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from gpudiag import _stack

_CAPS = """
    import json, sys, types
    torch = types.ModuleType("torch")
    torch.__version__ = sys.argv[1]
    torch.version = types.SimpleNamespace(cuda=sys.argv[2] or None)
    sys.modules["torch"] = torch
    sys.path.insert(0, sys.argv[3])  # its nvidia/ joins the namespace package
    import gpudiag
    caps = gpudiag.capabilities()
    print(json.dumps({"text": str(caps), "caps": caps.to_dict()}))
"""


def _capabilities(tmp_path: Path, version: str, cuda: str) -> dict:
    # A CUPTI path that does not exist stops the search there: no other CUPTI gets mapped.
    env = dict(os.environ, GPUDIAG_CUPTI_PATH=str(tmp_path / "absent" / "libcupti.so.12"))
    result = subprocess.run(
        [
            sys.executable,
            "-W",
            "ignore",
            "-c",
            textwrap.dedent(_CAPS),
            version,
            cuda,
            str(tmp_path / "site"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def _wheels(tmp_path: Path, *files: str) -> Path:
    nvidia = tmp_path / "site" / "nvidia"
    for f in files:
        (nvidia / f).parent.mkdir(parents=True, exist_ok=True)
        (nvidia / f).write_bytes(b"")
    return nvidia


def test_cuda12_wheels_without_the_cupti_wheel_are_a_problem_with_the_fix(tmp_path: Path) -> None:
    nvidia = _wheels(tmp_path, "cuda_runtime/lib/libcudart.so.12")
    out = _capabilities(tmp_path, "2.5.1+cu124", "12.4")
    stack = out["caps"]["stack"]
    assert stack["framework"] == "torch"
    assert stack["framework_version"] == "2.5.1+cu124"
    assert stack["framework_cuda"] == "12.4"
    assert stack["cuda_wheels_dir"] == str(nvidia)
    assert stack["cupti_in_wheels"] is False
    issues = out["caps"]["stack_issues"]
    assert [i["id"] for i in issues] == ["cupti_missing_from_wheels"]
    assert 'pip install "nvidia-cuda-cupti-cu12==12.4.*"' in issues[0]["fix"]
    text = out["text"]
    assert text.index("  stack:") < text.index("  problem: nvidia-cuda-cupti-cu12 is missing")
    assert f"PyTorch 2.5.1+cu124 (built for CUDA 12.4, CUDA from {nvidia})" in text
    assert 'fix: pip install "nvidia-cuda-cupti-cu12==12.4.*"' in text


def test_the_cupti_wheel_beside_the_runtime_is_no_problem(tmp_path: Path) -> None:
    _wheels(tmp_path, "cuda_runtime/lib/libcudart.so.12", "cuda_cupti/lib/libcupti.so.12")
    out = _capabilities(tmp_path, "2.5.1+cu124", "12.4")
    assert out["caps"]["stack"]["cupti_in_wheels"] is True
    assert out["caps"]["stack_issues"] == []
    assert "problem:" not in out["text"]


def test_a_cpu_build_of_pytorch_has_no_cuda_stack_to_check(tmp_path: Path) -> None:
    _wheels(tmp_path, "cuda_runtime/lib/libcudart.so.12")
    out = _capabilities(tmp_path, "2.5.1+cpu", "")
    stack = out["caps"]["stack"]
    assert stack["framework_cuda"] == ""
    assert stack["cuda_wheels_dir"] == ""  # a CPU build uses no CUDA wheels
    assert out["caps"]["stack_issues"] == []
    assert "PyTorch 2.5.1+cpu (CPU build)" in out["text"]


def test_cudnn_versions_read_as_cudnn_writes_them() -> None:
    assert _stack._cudnn_text(90100) == "9.1.0"  # cuDNN 9: major * 10000 + minor * 100 + patch
    assert _stack._cudnn_text(8902) == "8.9.2"  # cuDNN 8: major * 1000 + minor * 100 + patch
