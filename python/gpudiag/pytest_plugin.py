# SPDX-License-Identifier: Apache-2.0
"""pytest plugin (registered through the ``pytest11`` entry point): GPU memory limits per test.

::

    @pytest.mark.gpu_limit_memory("2 GiB")   # peak device memory the test adds
    def test_forward(): ...

    @pytest.mark.gpu_limit_leaks("16 MiB")   # device memory the test still holds at its end
    def test_train_step(): ...

Measured with PyTorch's caching allocator on the current CUDA device. Without PyTorch or a GPU
the marked tests still run; one that passes is reported skipped, saying that its memory limit was
not checked and why. A failing leak check lists the allocation sites of
the memory still held (from PyTorch's allocation history, recorded during the test only).

A test's run against a kept baseline (``gpudiag compare``), failing with the comparison's text
on a regression::

    def test_train_speed(gpudiag_baseline):
        report = gpudiag.analyze(run_training_and_trace())
        gpudiag_baseline(report)             # baseline named after the test; call it last

``pytest --gpudiag-update-baselines`` keeps each run as its baseline instead (the first time,
and after an intended change); ``--gpudiag-baseline-dir`` (or the ini option
``gpudiag_baseline_dir``, else $GPUDIAG_BASELINE_DIR) names their folder, by default
``.gpudiag-baselines`` in pytest's rootdir. ``assert_no_regression()`` is the same check for
code without the fixture.
"""

from __future__ import annotations

import gc
import os
import re
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

import pytest

from gpudiag import _core
from gpudiag._format import format_bytes, parse_size

if TYPE_CHECKING:
    from gpudiag._compare import Comparison
    from gpudiag._report import Report

MARKERS = {
    "gpu_limit_memory": "gpu_limit_memory(size): fail when the test's peak device memory (above "
    "what was in use at its start) exceeds size, e.g. '2 GiB'",
    "gpu_limit_leaks": "gpu_limit_leaks(size): fail when the test still holds more than size of "
    "device memory at its end, e.g. '16 MiB'; lists the allocation sites",
}
HISTORY_ENTRIES = 100_000  # bounds the allocation history kept during a leak-checked test
MAX_SITES = 10


class DeviceMemory:
    """The CUDA allocator figures the markers need (replaceable in tests without a GPU)."""

    def unavailable_reason(self) -> str | None:
        try:
            import torch
        except ImportError:
            return "gpu_limit_* needs PyTorch (pip install 'gpudiag[torch]')"
        if not torch.cuda.is_available():
            return "gpu_limit_* needs a CUDA device; none is available"
        return None

    def settle(self) -> None:
        import torch

        gc.collect()
        torch.cuda.synchronize()

    def allocated(self) -> int:
        import torch

        return int(torch.cuda.memory_allocated())

    def reset_peak(self) -> None:
        import torch

        torch.cuda.reset_peak_memory_stats()

    def peak(self) -> int:
        import torch

        return int(torch.cuda.max_memory_allocated())

    def start_history(self) -> bool:
        import torch

        try:
            torch.cuda.memory._record_memory_history(
                enabled="all", context="alloc", stacks="python", max_entries=HISTORY_ENTRIES
            )
        except Exception:  # noqa: BLE001 - a private API; any failure means no history
            return False
        return True

    def stop_history(self) -> None:
        import torch

        torch.cuda.memory._record_memory_history(enabled=None)

    def live_blocks(self) -> list[dict[str, Any]]:
        """Allocated blocks now, each {"address", "size", "frames"} (from PyTorch's in-memory
        snapshot: nothing is read from a file)."""
        import torch

        snapshot = torch.cuda.memory._snapshot()
        blocks = []
        for segment in snapshot.get("segments", []):
            for block in segment.get("blocks", []):
                if block.get("state") == "active_allocated":
                    blocks.append(
                        {
                            "address": block.get("address"),
                            "size": block.get("size", 0),
                            "frames": block.get("frames", []),
                        }
                    )
        return blocks


device_memory = DeviceMemory()


def pytest_configure(config: pytest.Config) -> None:
    for text in MARKERS.values():
        config.addinivalue_line("markers", text)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpudiag")
    group.addoption(
        "--gpudiag-update-baselines",
        action="store_true",
        help="keep each run checked by gpudiag_baseline / assert_no_regression as its baseline "
        "(the first time, or after an intended change) instead of comparing with it",
    )
    group.addoption(
        "--gpudiag-baseline-dir",
        metavar="DIR",
        default=None,
        help="the folder of the baselines (default: the ini option gpudiag_baseline_dir, else "
        "$GPUDIAG_BASELINE_DIR, else .gpudiag-baselines in the rootdir)",
    )
    parser.addini("gpudiag_baseline_dir", "the folder of gpudiag's baselines", default="")


def _limit(item: pytest.Item, name: str) -> int | None:
    marker = item.get_closest_marker(name)
    if marker is None:
        return None
    if len(marker.args) != 1 or marker.kwargs:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{name} takes one size, e.g. '2 GiB'")
    try:
        return parse_size(marker.args[0])
    except ValueError as e:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{name}: {e}") from None


def _site(frames: list[dict[str, Any]]) -> str:
    """The allocation site as every gpudiag report names it (C++'s rule: the innermost frame in
    the program's own code)."""
    site = _core.allocation_site(
        [
            _core.StackFrame(
                str(f.get("filename", "")), str(f.get("name", "")), int(f.get("line", 0))
            )
            for f in frames
        ]
    )
    return str(site) or "<no frame recorded>"


def leak_sites(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """Blocks alive at the end that were not alive at the start, summed by site, largest first."""
    existing = {(b["address"], b["size"]) for b in before}
    by_site: dict[str, int] = {}
    for b in after:
        if (b["address"], b["size"]) in existing:
            continue
        site = _site(b.get("frames", []))
        by_site[site] = by_site.get(site, 0) + int(b["size"])
    return sorted(by_site.items(), key=lambda kv: -kv[1])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Malformed limits are usage errors, found before any test runs.
    for item in items:
        _limit(item, "gpu_limit_memory")
        _limit(item, "gpu_limit_leaks")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    memory_limit = _limit(item, "gpu_limit_memory")
    leak_limit = _limit(item, "gpu_limit_leaks")
    if memory_limit is None and leak_limit is None:
        return (yield)
    mem = device_memory
    reason = mem.unavailable_reason()
    if reason is not None:
        # The test itself runs everywhere (a failure fails it); only the memory check needs the
        # device, and the test is reported skipped with why, never as a passed limit.
        yield  # a failing test raises here and is reported as it is
        pytest.skip(f"{reason}: the test ran and passed; its memory limit was not checked")
    mem.settle()
    baseline = mem.allocated()
    if memory_limit is not None:
        mem.reset_peak()  # the test's own peak; resets torch's max_memory_allocated for it
    history = leak_limit is not None and mem.start_history()
    before = mem.live_blocks() if history else []
    try:
        result = yield  # a failing test raises here and is reported as it is
    finally:
        mem.settle()
        after = mem.live_blocks() if history else []
        if history:
            mem.stop_history()
    problems = []
    if memory_limit is not None:
        peak = max(0, mem.peak() - baseline)
        if peak > memory_limit:
            problems.append(
                f"peak device memory {format_bytes(peak)} exceeds the limit of "
                f"{format_bytes(memory_limit)} (gpu_limit_memory)"
            )
    if leak_limit is not None:
        held = mem.allocated() - baseline
        if held > leak_limit:
            lines = [
                (
                    f"the test still holds {format_bytes(held)} of device memory at its end, "
                    f"more than the {format_bytes(leak_limit)} allowed (gpu_limit_leaks)"
                )
            ]
            sites = leak_sites(before, after)
            if sites:
                lines.append("held by allocations from:")
                lines.extend(
                    f"  {format_bytes(size):>10}  {site}" for site, size in sites[:MAX_SITES]
                )
            elif not history:
                lines.append("(no allocation sites: PyTorch's allocation history is unavailable)")
            problems.append("\n".join(lines))
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)
    return result


# ---- runs against baselines --------------------------------------------------------------------

Run = Union["Report", str, Path]
_KEPT = pytest.StashKey[list[str]]()  # the baselines this pytest run kept
_UNNAMEABLE = re.compile(r"[^A-Za-z0-9._-]+")


def assert_no_regression(
    run: Run,
    baseline: str,
    *,
    baseline_dir: str | Path | None = None,
    fail_on: Sequence[str] = ("regression",),
    update: bool = False,
) -> Comparison | None:
    """Compares ``run`` (a Report, or what ``gpudiag.analyze`` reads) with baseline ``baseline``
    and fails the test with the comparison's text when its verdict is one of ``fail_on``.

    An inconclusive comparison that ``fail_on`` does not name skips the test with the reasons:
    the check was not decided, which is no pass. ``update`` keeps ``run`` as the baseline
    instead (returns None). A baseline not kept yet fails, saying how to keep one."""
    from gpudiag._analyze import analyze
    from gpudiag._baseline import baseline_dir as folder_of
    from gpudiag._baseline import baseline_exists, check_name, save_baseline
    from gpudiag._compare import compare, verdict_names
    from gpudiag._errors import InvalidArgumentError

    check_name(baseline)
    fail_on = [fail_on] if isinstance(fail_on, str) else list(fail_on)
    unknown = sorted(set(fail_on) - set(verdict_names()))
    if unknown:
        raise InvalidArgumentError(
            f"fail_on: not a verdict: {', '.join(unknown)} (one of {', '.join(verdict_names())})"
        )
    report = run if not isinstance(run, (str, Path)) else analyze(run)
    if update:
        save_baseline(baseline, report, baseline_dir, replace=True)
        return None
    if not baseline_exists(baseline, baseline_dir):
        pytest.fail(
            f"no baseline {baseline!r} in {folder_of(baseline_dir)}: run pytest with "
            "--gpudiag-update-baselines to keep this run's report as it",
            pytrace=False,
        )
    comparison = compare(baseline, report, baseline_dir=baseline_dir)
    if comparison.verdict in fail_on:
        pytest.fail(
            f"against baseline {baseline!r}: {comparison.verdict}\n{comparison.text}",
            pytrace=False,
        )
    if comparison.verdict == "inconclusive":
        # The headline says why (C++'s words): a check not decided is no pass.
        pytest.skip(f"against baseline {baseline!r}, not checked: {comparison.headline}")
    return comparison


class BaselineCheck:
    """What the ``gpudiag_baseline`` fixture gives a test: ``gpudiag_baseline(run, name=None,
    fail_on=("regression",))`` runs :func:`assert_no_regression` with the session's options,
    the baseline named after the test unless ``name`` is given."""

    def __init__(
        self, test_name: str, directory: Path, update: bool, kept: list[str] | None = None
    ) -> None:
        self.name = _UNNAMEABLE.sub("_", test_name).lstrip("._-")[:100] or "test"
        self.directory = directory
        self.update = update
        self._kept = kept if kept is not None else []

    def __call__(
        self, run: Run, name: str | None = None, *, fail_on: Sequence[str] = ("regression",)
    ) -> Comparison | None:
        name = name or self.name
        result = assert_no_regression(
            run, name, baseline_dir=self.directory, fail_on=fail_on, update=self.update
        )
        if self.update:
            self._kept.append(name)
        return result


def _baseline_folder(config: pytest.Config) -> Path:
    """The option (from where pytest was started), the ini option (from its file's folder), the
    environment, else .gpudiag-baselines in the rootdir."""
    option = config.getoption("gpudiag_baseline_dir")
    if option:
        return config.invocation_params.dir / str(option)
    ini = str(config.getini("gpudiag_baseline_dir"))
    if ini:
        return (config.inipath.parent if config.inipath else config.rootpath) / ini
    environment = os.environ.get("GPUDIAG_BASELINE_DIR")
    return Path(environment) if environment else config.rootpath / ".gpudiag-baselines"


@pytest.fixture
def gpudiag_baseline(request: pytest.FixtureRequest) -> BaselineCheck:
    """Compares a test's run with its kept baseline (see :class:`BaselineCheck`)."""
    config = request.config
    return BaselineCheck(
        request.node.name,
        _baseline_folder(config),
        bool(config.getoption("gpudiag_update_baselines")),
        config.stash.setdefault(_KEPT, []),
    )


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Under --gpudiag-update-baselines, which baselines the run kept, and where."""
    kept = config.stash.get(_KEPT, [])
    if kept:
        terminalreporter.write_sep("-", f"gpudiag: {len(kept)} baseline(s) kept")
        terminalreporter.write_line(f"in {_baseline_folder(config)}: {', '.join(kept)}")
