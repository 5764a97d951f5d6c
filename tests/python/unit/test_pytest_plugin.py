# SPDX-License-Identifier: Apache-2.0
"""The pytest plugin's markers, run through pytester with a fake CUDA allocator."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import PLUGIN_ARGS, STARVED_TRACE, corpus_file
from gpudiag import cli, pytest_plugin

MIB = 1024**2


class FakeDeviceMemory:
    """The allocator as the markers see it, driven by the inner tests through `fake_alloc`."""

    def __init__(self) -> None:
        self.current = 0
        self.peak_value = 0
        self.blocks: list[dict[str, Any]] = []
        self.history = False

    def unavailable_reason(self) -> str | None:
        return None

    def settle(self) -> None:
        pass

    def allocated(self) -> int:
        return self.current

    def reset_peak(self) -> None:
        self.peak_value = self.current

    def peak(self) -> int:
        return self.peak_value

    def start_history(self) -> bool:
        self.history = True
        return True

    def stop_history(self) -> None:
        self.history = False

    def live_blocks(self) -> list[dict[str, Any]]:
        return list(self.blocks)

    def alloc(self, size: int, site: str, line: int) -> None:
        self.current += size
        self.peak_value = max(self.peak_value, self.current)
        frames = [
            {
                "filename": "/x/site-packages/torch/nn/modules/module.py",
                "line": 1,
                "name": "_call_impl",
            },
            {"filename": site, "line": line, "name": "make"},
        ]
        self.blocks.append(
            {"address": 0x1000 * (len(self.blocks) + 1), "size": size, "frames": frames}
        )

    def free_all(self) -> None:
        self.current = 0
        self.blocks.clear()


@pytest.fixture
def fake_memory(monkeypatch: pytest.MonkeyPatch) -> FakeDeviceMemory:
    fake = FakeDeviceMemory()
    monkeypatch.setattr(pytest_plugin, "device_memory", fake)
    return fake


INNER = """
import pytest
from gpudiag import pytest_plugin

def alloc(size_mib, line):
    pytest_plugin.device_memory.alloc(size_mib * 1024 * 1024, "test_inner.py", line)

@pytest.mark.gpu_limit_memory("100 MiB")
def test_peak_within_limit():
    alloc(60, 1)
    pytest_plugin.device_memory.free_all()

@pytest.mark.gpu_limit_memory("100 MiB")
def test_peak_over_limit():
    alloc(80, 2)
    alloc(80, 3)
    pytest_plugin.device_memory.free_all()

@pytest.mark.gpu_limit_leaks("16 MiB")
def test_leaks_within_limit():
    alloc(8, 4)

@pytest.mark.gpu_limit_leaks("16 MiB")
def test_leaks_over_limit():
    alloc(24, 42)
    alloc(10, 43)

@pytest.mark.gpu_limit_leaks("1 MiB")
def test_failing_test_reports_its_own_failure():
    alloc(64, 5)
    assert False, "the test's own failure"
"""


def test_markers_are_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(*PLUGIN_ARGS, "--markers")
    result.stdout.fnmatch_lines(["*gpu_limit_memory(size)*", "*gpu_limit_leaks(size)*"])


def test_limits_pass_and_fail_with_sites(
    pytester: pytest.Pytester, fake_memory: FakeDeviceMemory
) -> None:
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest(*PLUGIN_ARGS, "--strict-markers", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=3)
    out = result.stdout.str()
    assert "peak device memory 160.0 MiB exceeds the limit of 100.0 MiB" in out
    assert "still holds 34.0 MiB" in out  # 8 MiB left by an earlier test is not this test's
    assert "24.0 MiB  test_inner.py:42 make" in out
    assert "10.0 MiB  test_inner.py:43 make" in out
    assert "the test's own failure" in out
    assert fake_memory.history is False  # allocation history is stopped after each test


def test_without_a_gpu_the_body_runs_and_only_the_limit_is_skipped(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    class NoGpu(pytest_plugin.DeviceMemory):
        def unavailable_reason(self) -> str | None:
            return "gpu_limit_* needs a CUDA device; none is available"

    monkeypatch.setattr(pytest_plugin, "device_memory", NoGpu())
    pytester.makepyfile(
        test_inner="""
import pytest

@pytest.mark.gpu_limit_memory("100 MiB")
def test_body_passes():
    assert sum([1, 2]) == 3

@pytest.mark.gpu_limit_leaks("16 MiB")
def test_body_fails():
    assert False, "the body ran without a GPU"
"""
    )
    result = pytester.runpytest(*PLUGIN_ARGS, "-rs")
    # The failing body fails as it would anywhere; the passing one is not a passed limit.
    result.assert_outcomes(skipped=1, failed=1)
    skipped = (
        "*needs a CUDA device; none is available: the test ran and passed; its memory limit "
        "was not checked*"
    )
    result.stdout.fnmatch_lines([skipped])
    assert "the body ran without a GPU" in result.stdout.str()


def test_real_device_check_skips_here_or_measures_on_a_gpu(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    from pathlib import Path

    import gpudiag

    package_root = str(Path(gpudiag.__file__).resolve().parents[1])
    monkeypatch.setenv(
        "PYTHONPATH",
        os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p),
    )
    pytester.makepyfile(
        test_inner="""
import pytest
@pytest.mark.gpu_limit_memory("1 GiB")
def test_small():
    pass
"""
    )
    # In a subprocess: the real check imports torch, which cannot be re-imported once pytester
    # restores this process's sys.modules.
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "-rs")
    outcomes = result.parseoutcomes()
    reason = pytest_plugin.DeviceMemory().unavailable_reason()
    if reason is None:
        assert outcomes.get("passed") == 1
    else:
        assert outcomes.get("skipped") == 1
        assert reason in result.stdout.str()  # no fnmatch: the reason has brackets


@pytest.mark.usefixtures("fake_memory")
def test_bad_size_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_inner="""
import pytest
@pytest.mark.gpu_limit_memory("two gigs")
def test_x():
    pass
"""
    )
    result = pytester.runpytest(*PLUGIN_ARGS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test_x*gpu_limit_memory*not a size: 'two gigs'*"])


def test_leak_sites_skip_framework_frames() -> None:
    before = [{"address": 1, "size": 10, "frames": []}]
    after = [
        *before,
        {
            "address": 2,
            "size": 30,
            "frames": [
                {
                    "filename": "/usr/lib/python3/site-packages/torch/functional.py",
                    "line": 9,
                    "name": "f",
                },
                {"filename": "/home/me/model.py", "line": 7, "name": "forward"},
            ],
        },
        {
            "address": 3,
            "size": 50,
            "frames": [{"filename": "/home/me/model.py", "line": 7, "name": "forward"}],
        },
        {"address": 4, "size": 5, "frames": []},
    ]
    # Sites are named by C++'s allocation-site rule, as in every gpudiag report.
    assert pytest_plugin.leak_sites(before, after) == [
        ("me/model.py:7 forward", 80),
        ("<no frame recorded>", 5),
    ]


# ---- a test's run against a kept baseline -----------------------------------------------------

BASELINE_TEST = """
import os

def test_resnet(gpudiag_baseline):
    gpudiag_baseline(os.environ["GPUDIAG_TEST_RUN"], "resnet")
"""


def test_a_run_is_checked_against_its_baseline(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    starved = corpus_file(
        "kineto_traces/kineto_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz"
    )
    fixed = corpus_file(
        "kineto_traces/kineto_resnet50_num_workers_4_worker0.1623212756351.pt.trace.json.gz"
    )
    monkeypatch.delenv("GPUDIAG_BASELINE_DIR", raising=False)
    pytester.makepyfile(test_inner=BASELINE_TEST)
    folder = pytester.path / "kept"
    args = [*PLUGIN_ARGS, "-p", "no:cacheprovider", "--gpudiag-baseline-dir", str(folder)]
    monkeypatch.setenv("GPUDIAG_TEST_RUN", str(fixed))
    # No baseline yet: the test fails, saying how to keep one.
    result = pytester.runpytest(*args)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*no baseline 'resnet' in*--gpudiag-update-baselines*"])
    result = pytester.runpytest(*args, "--gpudiag-update-baselines")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*gpudiag: 1 baseline(s) kept*", f"in {folder}: resnet"])
    assert (folder / "resnet.json").is_file()
    # The same run passes; the starved one is a regression, failed with the comparison's text.
    pytester.runpytest(*args).assert_outcomes(passed=1)
    monkeypatch.setenv("GPUDIAG_TEST_RUN", str(starved))
    result = pytester.runpytest(*args)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "against baseline 'resnet': regression" in out
    assert "Traceback" not in out


def test_the_fixture_names_the_baseline_after_the_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUDIAG_TEST_RUN", str(corpus_file(STARVED_TRACE)))
    monkeypatch.delenv("GPUDIAG_BASELINE_DIR", raising=False)
    pytester.makepyfile(
        test_inner="""
import os, pytest

@pytest.mark.parametrize("size", ["small/1"])
def test_train(gpudiag_baseline, size):
    gpudiag_baseline(os.environ["GPUDIAG_TEST_RUN"])
"""
    )
    pytester.makeini("[pytest]\ngpudiag_baseline_dir = from_ini\n")
    result = pytester.runpytest(
        *PLUGIN_ARGS, "-p", "no:cacheprovider", "--gpudiag-update-baselines"
    )
    result.assert_outcomes(passed=1)
    assert [p.name for p in (pytester.path / "from_ini").iterdir()] == ["test_train_small_1_.json"]


def test_an_inconclusive_comparison_is_no_pass(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ResNet-50 on a V100 as the baseline; an AlexNet benchmark on an A100 as the run.
    other_gpu = corpus_file(
        "kineto_traces/hta_critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz"
    )
    folder = pytester.path / "kept"
    assert (
        cli.main(
            ["baseline", "save", "resnet", str(corpus_file(STARVED_TRACE)), "--dir", str(folder)]
        )
        == 0
    )
    monkeypatch.setenv("GPUDIAG_TEST_RUN", str(other_gpu))
    pytester.makepyfile(
        test_inner="""
import os

def test_default(gpudiag_baseline):
    gpudiag_baseline(os.environ["GPUDIAG_TEST_RUN"], "resnet")

def test_strict(gpudiag_baseline):
    gpudiag_baseline(os.environ["GPUDIAG_TEST_RUN"], "resnet", fail_on=["regression", "inconclusive"])
"""
    )
    result = pytester.runpytest(
        *PLUGIN_ARGS, "-p", "no:cacheprovider", "-rs", "--gpudiag-baseline-dir", str(folder)
    )
    result.assert_outcomes(skipped=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*against baseline 'resnet', not checked: Inconclusive: *different GPU models*"]
    )
    assert "against baseline 'resnet': inconclusive" in result.stdout.str()
