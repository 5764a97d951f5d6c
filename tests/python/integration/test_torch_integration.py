# SPDX-License-Identifier: Apache-2.0
"""PyTorch integration on CPU: a real DataLoader over a slow dataset, real optimizers and
profiler, and faithful fakes of the torch.cuda allocator API where this machine has no CUDA."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, Dataset

import gpudiag
from gpudiag import _core
from gpudiag.integrations import torch as torch_integration

ITEM_DELAY_S = 0.020
BATCH = 2


class SlowDataset(Dataset):
    """20 ms per item: a batch of 2 takes 40 ms to load with num_workers=0."""

    def __len__(self) -> int:
        return 12

    def __getitem__(self, i: int):
        time.sleep(ITEM_DELAY_S)
        return torch.full((4,), float(i))


def _train(loader, steps_out: list | None = None) -> None:
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for batch in loader:
        opt.zero_grad()
        model(batch).sum().backward()
        opt.step()
        if steps_out is not None:
            steps_out.append(1)


def test_dataloader_wait_is_measured_per_step(fake_backend) -> None:
    loader = DataLoader(SlowDataset(), batch_size=BATCH, num_workers=0)
    with gpudiag.session(_backend_factory=fake_backend):
        _train(loader)
    backend = fake_backend.last
    waits = backend.input_waits_per_step()
    # 6 batches: the first fetch is in iteration 0, which the first optimizer step ends (so no
    # step holds it); each later one is inside the step of its iteration (1..5). The final fetch,
    # which ends the loop with StopIteration, delivered no batch: it is no wait at all.
    assert sorted(waits) == [1, 2, 3, 4, 5]
    expected_ns = BATCH * ITEM_DELAY_S * 1e9
    for step in range(1, 6):
        assert expected_ns * 0.95 <= waits[step] <= expected_ns * 2.0, (step, waits[step])
    assert backend.names().count("input_waited") == 6
    notes = backend.annotations()
    assert notes.pop("dataloader.cpu_cores") >= 1
    assert notes == {
        "dataloader.num_workers": 0,
        "dataloader.pin_memory": 0,
        "dataloader.prefetch_factor": -1,
        "dataloader.persistent_workers": 0,
        "dataloader.batch_size": BATCH,
    }


def test_worker_settings_are_recorded(fake_backend) -> None:
    loader = DataLoader(
        SlowDataset(), batch_size=BATCH, num_workers=2, prefetch_factor=3, persistent_workers=False
    )
    with gpudiag.session(_backend_factory=fake_backend):
        _train(loader)
    notes = fake_backend.last.annotations()
    assert notes["dataloader.num_workers"] == 2
    assert notes["dataloader.prefetch_factor"] == 3
    assert fake_backend.last.names().count("input_waited") == 6  # not the epoch's StopIteration


def test_dataloader_instrumentation_can_be_turned_off(fake_backend) -> None:
    original = torch.utils.data.dataloader._BaseDataLoaderIter.__next__
    with gpudiag.session(dataloader=False, _backend_factory=fake_backend):
        assert torch.utils.data.dataloader._BaseDataLoaderIter.__next__ is original
        _train(DataLoader(SlowDataset(), batch_size=6))
    assert "input_waited" not in fake_backend.last.names()


def test_patches_are_undone_at_stop(fake_backend) -> None:
    dl = torch.utils.data.dataloader
    before = (
        dl._BaseDataLoaderIter.__next__,
        dl.DataLoader.__iter__,
        torch.amp.GradScaler.step,
        torch.profiler.profile.step,
        torch.autograd.profiler._prepare_profiler,
        sys.excepthook,
    )
    with gpudiag.session(_backend_factory=fake_backend) as s:
        assert dl._BaseDataLoaderIter.__next__ is not before[0]
        assert s._integration.problems == []
    after = (
        dl._BaseDataLoaderIter.__next__,
        dl.DataLoader.__iter__,
        torch.amp.GradScaler.step,
        torch.profiler.profile.step,
        torch.autograd.profiler._prepare_profiler,
        sys.excepthook,
    )
    assert after == before


def test_optimizer_steps_are_step_boundaries(fake_backend) -> None:
    with gpudiag.session(_backend_factory=fake_backend) as s:
        _train([torch.ones(2, 4)] * 4)
        assert s.step_clock.owner == "optimizer"
    names = fake_backend.last.names()
    assert names.count("step_begin") == 4
    assert names.count("step_end") == 3


def test_two_optimizers_make_one_step_per_iteration(fake_backend) -> None:
    g, d = torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)
    opt_g = torch.optim.SGD(g.parameters(), lr=0.1)
    opt_d = torch.optim.Adam(d.parameters(), lr=0.1)
    with gpudiag.session(_backend_factory=fake_backend):
        for _ in range(3):
            d(g(torch.ones(1, 4))).sum().backward()
            opt_d.step()
            opt_g.step()
    assert fake_backend.last.names().count("step_begin") == 3


def test_explicit_steps_win_over_optimizer_hooks(fake_backend) -> None:
    with gpudiag.session(_backend_factory=fake_backend):
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for i in range(4):
            model(torch.ones(1, 4)).sum().backward()
            opt.step()
            gpudiag.step(100 + i)
    calls = fake_backend.last.calls
    begins = [a[0] for n, _, a in calls if n == "step_begin"]
    ends = [a[0] for n, _, a in calls if n == "step_end"]
    assert begins[-4:] == [100, 101, 102, 103]
    # The step the first optimizer step began is left open, not ended a moment later.
    assert ends == [100, 101, 102]


def test_grad_scaler_skipped_steps_still_end_the_step(fake_backend) -> None:
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    with gpudiag.session(_backend_factory=fake_backend):
        for i in range(3):
            opt.zero_grad()
            loss = model(torch.ones(1, 4)).sum() * (float("inf") if i == 1 else 1.0)
            scaler.scale(loss).backward()
            scaler.step(opt)  # skips optimizer.step() for the inf gradients of iteration 1
            scaler.update()
    begins = [a[0] for n, _, a in fake_backend.last.calls if n == "step_begin"]
    assert begins == [1, 2, 3]  # the first boundary ends iteration 0


def test_profiler_steps_and_cupti_handover(fake_backend) -> None:
    activities = [torch.profiler.ProfilerActivity.CPU]
    with gpudiag.session(_backend_factory=fake_backend) as s:
        with torch.profiler.profile(activities=activities) as prof:
            for _ in range(3):
                torch.ones(8, 8).sum()
                prof.step()
        assert s.step_clock.owner == "profiler"
    names = fake_backend.last.names()
    # Numbered as the profiler's ProfilerStep#N: #0 from start() to the first step(); the one the
    # last step() begins has no iteration in it and stays open.
    begins = [a[0] for n, _, a in fake_backend.last.calls if n == "step_begin"]
    assert begins == [0, 1, 2, 3]
    assert names.count("step_end") == 3
    assert "pause_capture" not in names  # CPU-only profiling leaves CUPTI to gpudiag


def test_profiler_with_cuda_activities_pauses_and_resumes_capture(
    fake_backend, monkeypatch
) -> None:
    prof_mod = torch.autograd.profiler
    seen = []
    monkeypatch.setattr(
        prof_mod, "_prepare_profiler", lambda *a, **_: seen.append(("prepare", a[1]))
    )
    monkeypatch.setattr(prof_mod, "_disable_profiler", lambda *_, **__: seen.append("disable"))
    cuda = torch.profiler.ProfilerActivity.CUDA
    with gpudiag.session(_backend_factory=fake_backend):
        prof_mod._prepare_profiler(object(), {cuda})
        prof_mod._disable_profiler()
    calls = fake_backend.last.names()
    assert calls.index("pause_capture") < calls.index("resume_capture")
    assert fake_backend.last.paused == ["torch.profiler is tracing CUDA"]
    assert seen == [("prepare", {cuda}), "disable"]


def test_deep_mode_yields_cupti_to_every_profiler_run(fake_backend, monkeypatch) -> None:
    # Kineto subscribes to CUPTI once, when it first initialises, and never retries: while deep
    # mode holds the subscriber, even a CPU-only trace must find it free.
    prof_mod = torch.autograd.profiler
    monkeypatch.setattr(prof_mod, "_prepare_profiler", lambda *_, **__: None)
    monkeypatch.setattr(prof_mod, "_disable_profiler", lambda *_, **__: None)
    cpu = torch.profiler.ProfilerActivity.CPU
    with gpudiag.session(_backend_factory=fake_backend):
        fake_backend.last.level = _core.CaptureLevel.cupti_deep
        prof_mod._prepare_profiler(object(), {cpu})
        prof_mod._disable_profiler()
    calls = fake_backend.last.names()
    assert calls.index("pause_capture") < calls.index("resume_capture")
    assert fake_backend.last.paused == ["torch.profiler needs CUPTI's subscriber"]


class FakeCuda:
    """The parts of torch.cuda gpudiag uses, for a machine without CUDA."""

    def __init__(self) -> None:
        self.initialized = False
        self.queued: list = []
        self.history_calls: list[dict] = []
        self.stats = {
            "allocated_bytes.all.current": 3 * 2**30,
            "reserved_bytes.all.current": 5 * 2**30,
            "inactive_split_bytes.all.current": 1.5 * 2**30,
            "num_alloc_retries": 2,
            "num_ooms": 0,
        }
        self.observer = None
        self.dumped: list[str] = []

    def install(self, monkeypatch) -> None:
        monkeypatch.setattr(torch.cuda, "is_initialized", lambda: self.initialized)
        monkeypatch.setattr(torch.cuda, "_lazy_call", self.queued.append)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        monkeypatch.setattr(torch.cuda, "memory_stats", lambda _device=None: dict(self.stats))
        monkeypatch.setattr(torch.cuda, "get_allocator_backend", lambda: "native")
        monkeypatch.setattr(
            torch.cuda.memory, "_record_memory_history", lambda **kw: self.history_calls.append(kw)
        )
        monkeypatch.setattr(torch.cuda.memory, "_dump_snapshot", self.dumped.append)
        monkeypatch.setattr(
            torch._C,
            "_cuda_attach_out_of_memory_observer",
            lambda fn: setattr(self, "observer", fn),
            raising=False,
        )
        monkeypatch.setattr(torch_integration, "_oom_observer_attached", False)

    def init(self) -> None:
        """What torch.cuda._lazy_init does: initialise, then run the queued calls."""
        self.initialized = True
        for fn in self.queued:
            fn()


def test_nothing_touches_cuda_before_the_program_does(fake_backend, monkeypatch) -> None:
    cuda = FakeCuda()
    cuda.install(monkeypatch)
    with gpudiag.session(memory_history=5000, _backend_factory=fake_backend):
        gpudiag.step()
        assert cuda.history_calls == []
        assert cuda.observer is None
        assert fake_backend.last.counters() == []  # memory_stats not polled before CUDA init
        cuda.init()
        assert cuda.history_calls == [
            {"enabled": "all", "context": "alloc", "stacks": "python", "max_entries": 5000}
        ]
        assert cuda.observer is not None
        gpudiag.step()
    assert cuda.history_calls[-1] == {"enabled": None}
    counters = {name: (value, device) for name, value, device in fake_backend.last.counters()}
    assert counters["framework_allocated_bytes"] == (3 * 2**30, 0)
    assert counters["framework_inactive_split_bytes"] == (1.5 * 2**30, 0)
    assert counters["framework_alloc_retries"] == (2, 0)


def test_a_session_that_ended_before_cuda_init_does_nothing_then(fake_backend, monkeypatch) -> None:
    cuda = FakeCuda()
    cuda.install(monkeypatch)
    with gpudiag.session(memory_history=10, _backend_factory=fake_backend):
        pass
    cuda.init()
    assert cuda.history_calls == []
    assert cuda.observer is None


# The allocator has released its wholly free segments before the observer runs: what is free is
# the 1.5 GiB stranded in partly used segments plus the device's free memory. A 2 GiB segment fits
# in that total (fragmentation); 4 GiB with nothing free on the device does not (too little).
@pytest.mark.parametrize(
    ("free", "segment", "cause"),
    [(1 * 2**30, 2 * 2**30, "fragmentation"), (0, 4 * 2**30, "too_little_memory")],
)
def test_oom_explanation_is_attached_to_the_error(
    fake_backend, monkeypatch, tmp_path, free, segment, cause
) -> None:
    cuda = FakeCuda()
    cuda.install(monkeypatch)
    snapshot = tmp_path / "oom.pickle"
    with (  # noqa: PT012
        pytest.raises(torch.OutOfMemoryError) as e,
        gpudiag.session(oom_snapshot=snapshot, _backend_factory=fake_backend),
    ):
        cuda.init()
        cuda.observer(0, segment, 80 * 2**30, free)
        cuda.observer(0, segment, 80 * 2**30, free)  # cuDNN retries: reported once
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 3.00 GiB")
    text = e.value.gpudiag_explanation
    assert text in getattr(e.value, "__notes__", [])
    assert text.startswith(f"gpudiag: {cause}:")  # decided by the C++ explainer
    assert "free in partly used segments 1.5 GiB" in text
    assert "evidence:" in text
    assert str(snapshot) in text
    assert cuda.dumped == [str(snapshot)]
    ooms = [ev for ev in fake_backend.last.events if ev.kind.name == "out_of_memory"]
    assert len(ooms) == 1
    assert ooms[0].oom.free_bytes == free


def test_oom_observer_never_raises(monkeypatch) -> None:
    class Broken:
        _detached = False

        def on_out_of_memory(self, *_args):
            raise RuntimeError("boom")

    monkeypatch.setattr(torch_integration, "_active", Broken())
    torch_integration._oom_observer(0, 1, 2, 3)  # must not raise into the allocator


def test_sessions_started_before_torch_is_imported_instrument_it_on_import() -> None:
    tests_dir = str(Path(__file__).resolve().parents[1])
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {tests_dir!r})
        import gpudiag
        from _fakes import FakeFactory
        factory = FakeFactory()
        with gpudiag.session(_backend_factory=factory):
            assert "torch" not in sys.modules
            import torch
            from torch.utils.data import DataLoader
            for _ in DataLoader(list(range(4)), batch_size=2):
                pass
        assert factory.last.names().count("input_waited") == 2, factory.last.names()
        print("ok")
    """)
    result = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_phase_is_a_session_phase(fake_backend) -> None:
    with gpudiag.session(_backend_factory=fake_backend), gpudiag.phase("forward"):
        pass
    names = fake_backend.last.names()
    assert names.index("phase_begin") < names.index("phase_end")
    with gpudiag.phase("outside a session"):  # harmless without a session
        pass
