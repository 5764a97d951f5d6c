# SPDX-License-Identifier: Apache-2.0
"""A program that exits without gpudiag.stop(), and where the pip CUDA's libcupti is found."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import gpudiag
from gpudiag import _libraries

TESTS = Path(__file__).resolve().parents[1]


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-W", "ignore", "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_exiting_without_stop_stops_the_session_while_python_still_runs() -> None:
    # The fake backend lives in Python: only the interpreter's exit handler can stop it.
    result = _run(f"""
        import sys
        sys.path.insert(0, {str(TESTS)!r})
        import gpudiag
        from _fakes import FakeFactory, FakeNative

        class Loud(FakeNative):
            def stop(self):
                super().stop()
                print("native stop", flush=True)

        factory = FakeFactory()
        gpudiag.start(torch=False, _backend_factory=lambda options: Loud(options))
        print("main done", flush=True)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["main", "done", "native", "stop"]


def test_exiting_without_stop_leaves_a_complete_recording(tmp_path: Path) -> None:
    record = tmp_path / "left-running.gpudiag"
    result = _run(f"""
        import gpudiag
        s = gpudiag.start({str(record)!r}, torch=False, capture_gpu=False, nvml_hz=0)
        for step in range(3):
            s.step(step)
            s.annotate("work", step)
    """)
    assert result.returncode == 0, result.stderr
    report = gpudiag.analyze([record])
    capture = report.to_dict()["capture"]
    assert not capture.get("truncated", False), capture
    assert report.figure("overview", "events", 0) >= 6


def test_the_pip_cuda_libcupti_directory_is_found_without_importing(
    tmp_path: Path, monkeypatch
) -> None:
    site = tmp_path / "site-packages"
    lib = site / "nvidia" / "cu13" / "lib"
    lib.mkdir(parents=True)
    (lib / "libcupti.so.13").write_bytes(b"")
    (site / "nvidia" / "cu12" / "lib").mkdir(parents=True)  # another CUDA: not named
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "nvidia", raising=False)
    dirs = _libraries.nvidia_library_dirs()
    assert dirs[0] == str(lib)
    assert "nvidia" not in sys.modules
    assert str(lib) in _libraries.register_nvidia_library_dirs()


def test_the_cuda12_wheels_libcupti_directory_is_found_too(tmp_path: Path, monkeypatch) -> None:
    site = tmp_path / "site-packages"
    lib = site / "nvidia" / "cuda_cupti" / "lib"  # nvidia-cuda-cupti-cu12, as torch cu12x has it
    lib.mkdir(parents=True)
    (lib / "libcupti.so.12").write_bytes(b"")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "nvidia", raising=False)
    assert str(lib) in _libraries.nvidia_library_dirs()


def test_no_pip_cuda_no_directories(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "nvidia" / "cu13" / "lib").mkdir(parents=True)  # no libcupti inside
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "nvidia", raising=False)
    assert str(tmp_path) not in " ".join(_libraries.nvidia_library_dirs())
