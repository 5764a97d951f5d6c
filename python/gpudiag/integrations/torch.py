# SPDX-License-Identifier: Apache-2.0
"""The PyTorch instrumentation: steps, DataLoader waits, allocator statistics, OOMs, profiler
coexistence.

Every PyTorch entry point used here is private and changes between releases, so each is
feature-detected (``hasattr``), never chosen by ``torch.__version__``, and each failure only
disables its own part. Rules that keep the host program safe:

* Nothing touches CUDA until the program does. Allocator history and the OOM observer are set up
  from ``torch.cuda._lazy_call`` (run right after PyTorch's own lazy CUDA initialisation): before
  PyTorch 2.2 attaching the OOM observer before CUDA initialisation segfaults (pytorch#102796,
  #107330), and ``_record_memory_history`` would create a context on device 0 of every rank.
* Allocator statistics are read with ``memory_stats``, which returns {} before CUDA is
  initialised instead of initialising it, at step boundaries and on a timer (services mark no
  steps). Peak statistics are never reset: users rely on them.
* The OOM observer cannot be detached (no PyTorch API for it), so one process-wide observer
  forwards to the running session, if any, and never raises (an exception there would be thrown
  from inside the allocator).
* torch.profiler and gpudiag share CUPTI: before Kineto prepares a trace with CUDA activities,
  the session yields CUPTI (pause_capture) and takes it back after the profiler is disabled.
  While deep mode holds CUPTI's single subscriber it yields before every trace, CPU-only ones
  too: Kineto subscribes once, when it first initialises, and never retries.
* Patches are made on classes at session start and undone at stop, so loaders and optimizers
  created before the session are covered and nothing stays behind.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.util
import os
import sys
import threading
import time
import warnings
import weakref
from typing import Any, Callable

from gpudiag import _core, _stack
from gpudiag._errors import GpudiagError, UnavailableError

_active: Integration | None = None  # the integration of the running session
_oom_observer_attached = False  # process-wide: PyTorch offers no way to detach it

# memory_stats keys recorded at every step boundary, as gpudiag CounterKind names.
STAT_COUNTERS = (
    ("allocated_bytes.all.current", "framework_allocated_bytes"),
    ("reserved_bytes.all.current", "framework_reserved_bytes"),
    ("num_alloc_retries", "framework_alloc_retries"),
    ("num_ooms", "framework_ooms"),
    ("inactive_split_bytes.all.current", "framework_inactive_split_bytes"),
)
# An OOM can be reported several times for one failure (cuDNN autotuning catches and retries).
OOM_DEDUP_WINDOW_S = 1.0
# How often the process's own Flight Recorder is read while torch.distributed runs: a hang is
# named within a second of its timeout; a dump of the calls in flight only is small.
COLLECTIVE_POLL_S = 1.0
_FR_BUFFER_VARIABLES = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")


# ---- NVTX --------------------------------------------------------------------------------------
def nvtx_push(name: str) -> bool:
    """Pushes an NVTX range through PyTorch when it is loaded with CUDA support; else nothing."""
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(getattr(torch, "_C", None), "_nvtx"):
        return False
    try:
        torch.cuda.nvtx.range_push(name)
    except Exception:  # noqa: BLE001 - a CPU-only build raises here
        return False
    return True


def nvtx_pop() -> None:
    torch = sys.modules.get("torch")
    if torch is not None:
        with _suppress():
            torch.cuda.nvtx.range_pop()


# ---- attaching ---------------------------------------------------------------------------------
class _TorchImportHook(importlib.abc.MetaPathFinder):
    """Calls back once ``import torch`` has finished, for sessions started before it."""

    def __init__(self, callback: Callable[[Any], None]) -> None:
        self._callback = callback
        self._busy = False

    # importlib's MetaPathFinder signature; the module is found by name alone.
    def find_spec(
        self,
        fullname: str,
        path: Any = None,  # noqa: ARG002
        target: Any = None,  # noqa: ARG002
    ) -> Any:
        if fullname != "torch" or self._busy:
            return None
        self._busy = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        loader = spec.loader
        original_exec = loader.exec_module
        callback = self._callback

        def exec_module(module: Any) -> None:
            original_exec(module)
            callback(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def attach(session: Any, *, required: bool = False) -> Integration | None:
    """Instruments PyTorch for ``session``: now if torch is imported, else once it is."""
    global _active
    torch = sys.modules.get("torch")
    if torch is None and importlib.util.find_spec("torch") is None:
        if required:
            raise UnavailableError("torch=True, but PyTorch is not installed")
        return None
    integration = Integration(session)
    _active = integration
    if torch is not None:
        integration.install(torch)
    else:
        integration.wait_for_import()
    return integration


class Integration:
    """The PyTorch instrumentation of one session (see the module docstring)."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.torch: Any = None
        self._undo: list[Callable[[], None]] = []
        self._hook: _TorchImportHook | None = None
        self._profiler_paused = False
        self._leader_steps = 0
        self._described_loaders: weakref.WeakSet[Any] = weakref.WeakSet()
        self._last_oom: dict[str, Any] | None = None
        self._last_oom_time: dict[int, float] = {}
        self._history_started = False
        self._detached = False
        self._lock = threading.Lock()
        self._poller: threading.Thread | None = None
        self._collective_poller: threading.Thread | None = None
        self._stop_polling = threading.Event()
        self.problems: list[str] = []  # parts that could not be installed, and why

    # -- life --
    def wait_for_import(self) -> None:
        def on_import(torch: Any) -> None:
            self._remove_hook()
            if not self._detached:
                try:
                    self.install(torch)
                except Exception as e:  # noqa: BLE001 - never break the program's own import
                    warnings.warn(f"gpudiag: PyTorch instrumentation failed: {e}", stacklevel=2)

        self._hook = _TorchImportHook(on_import)
        sys.meta_path.insert(0, self._hook)

    def _remove_hook(self) -> None:
        if self._hook is not None:
            with _suppress():
                sys.meta_path.remove(self._hook)
            self._hook = None

    def install(self, torch: Any) -> None:
        self.torch = torch
        self._try(lambda: _stack.publish(torch))  # which CUDA and cuDNN this torch was built for
        for part in (
            self._install_optimizer_hook,
            self._install_grad_scaler,
            self._install_profiler_step,
            self._install_profiler_coexistence,
            self._install_excepthook,
        ):
            self._try(part)
        if self.session.dataloader:
            self._try(self._install_dataloader)
        self._try(self._defer_until_cuda)
        self._try(self._start_poller)
        self._try(self._start_collective_poller)

    def _try(self, part: Callable[[], None]) -> None:
        try:
            part()
        except Exception as e:  # noqa: BLE001 - each part is optional; the failure is recorded
            self.problems.append(f"{part.__name__.lstrip('_')}: {e}")

    def detach(self) -> None:
        global _active
        self._detached = True
        self._remove_hook()
        self._stop_polling.set()
        if self._poller is not None:
            self._poller.join(timeout=5)
            self._poller = None
        if self._collective_poller is not None:
            self._collective_poller.join(timeout=5)
            self._collective_poller = None
        if self.torch is not None:
            self._try(self.poll_memory)
            if self._history_started:
                self._try(self._stop_history)
        while self._undo:
            with _suppress():
                self._undo.pop()()
        if _active is self:
            _active = None

    def _patch(self, owner: Any, name: str, replacement: Any) -> None:
        original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        setattr(owner, name, replacement)
        self._undo.append(lambda: setattr(owner, name, original))

    # -- steps --
    def _install_optimizer_hook(self) -> None:
        register = _module("torch.optim.optimizer").register_optimizer_step_post_hook
        handle = register(self._on_optimizer_step)
        self._undo.append(handle.remove)

    def _on_optimizer_step(self, optimizer: Any, _args: Any, _kwargs: Any) -> None:
        clock = self.session.step_clock
        if clock is not None and clock.is_leader_optimizer(optimizer):
            self._leader_steps += 1
            self.session.step_boundary("optimizer")

    def _install_grad_scaler(self) -> None:
        scaler_cls = self.torch.amp.GradScaler
        original = scaler_cls.__dict__["step"]
        integration = self

        def step(scaler: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
            before = integration._leader_steps
            result = original(scaler, optimizer, *args, **kwargs)
            # GradScaler skips optimizer.step() on inf/nan gradients: no post hook fired, but
            # the iteration still ended.
            clock = integration.session.step_clock
            if (
                integration._leader_steps == before
                and clock is not None
                and clock.is_leader_optimizer(optimizer)
            ):
                integration.session.step_boundary("grad_scaler")
            return result

        self._patch(scaler_cls, "step", step)

    def _install_profiler_step(self) -> None:
        # Numbered as torch.profiler numbers them: ProfilerStep#N runs from the N-th step() call
        # (from start() for N = 0) to the next.
        profile_cls = _module("torch.profiler").profile
        original_step = profile_cls.__dict__["step"]
        original_start = profile_cls.__dict__["start"]
        session = self.session

        def step_number(prof: Any) -> int | None:
            number = getattr(prof, "step_num", None)
            return number if isinstance(number, int) else None

        def start(prof: Any, *args: Any, **kwargs: Any) -> Any:
            result = original_start(prof, *args, **kwargs)
            session.step_boundary("profiler", step_number(prof))
            return result

        def step(prof: Any, *args: Any, **kwargs: Any) -> Any:
            result = original_step(prof, *args, **kwargs)
            session.step_boundary("profiler", step_number(prof))
            return result

        self._patch(profile_cls, "start", start)
        self._patch(profile_cls, "step", step)

    # -- torch.profiler and CUPTI --
    def _install_profiler_coexistence(self) -> None:
        module = _module("torch.autograd.profiler")
        prepare, disable = module._prepare_profiler, module._disable_profiler
        integration = self

        def _prepare_profiler(*args: Any, **kwargs: Any) -> Any:
            activities = args[1] if len(args) > 1 else kwargs.get("activities", ())
            cuda = _uses_cuda(activities)
            if not integration._profiler_paused and (cuda or integration._holds_cupti_subscriber()):
                try:
                    integration.session.pause_capture(
                        "torch.profiler is tracing CUDA"
                        if cuda
                        else "torch.profiler needs CUPTI's subscriber"
                    )
                    integration._profiler_paused = True
                except GpudiagError:
                    pass
            return prepare(*args, **kwargs)

        def _disable_profiler(*args: Any, **kwargs: Any) -> Any:
            try:
                return disable(*args, **kwargs)
            finally:
                if integration._profiler_paused:
                    integration._profiler_paused = False
                    with _suppress():
                        integration.session.resume_capture()

        self._patch(module, "_prepare_profiler", _prepare_profiler)
        self._patch(module, "_disable_profiler", _disable_profiler)

    def _holds_cupti_subscriber(self) -> bool:
        # Deep mode's capture level is the one that holds CUPTI's subscriber.
        try:
            level = self.session.status().level
        except GpudiagError:
            return False
        return bool(level == _core.CaptureLevel.cupti_deep)

    # -- DataLoader --
    def _install_dataloader(self) -> None:
        dataloader = _module("torch.utils.data.dataloader")
        iter_cls = dataloader._BaseDataLoaderIter
        loader_cls = dataloader.DataLoader
        original_next = iter_cls.__dict__["__next__"]
        original_iter = loader_cls.__dict__["__iter__"]
        session = self.session
        integration = self

        def __next__(it: Any) -> Any:
            native = session.native
            if not session.running or native is None:
                return original_next(it)
            since = native.now_ns()
            # A fetch that raises (StopIteration at the epoch's end, shutting the workers down,
            # or a worker's error) waited for no batch: only a delivered batch is a wait.
            batch = original_next(it)
            native.input_waited(since)
            return batch

        def __iter__(loader: Any) -> Any:
            it = original_iter(loader)
            if session.running and loader not in integration._described_loaders:
                integration._described_loaders.add(loader)
                integration.describe_loader(loader)
            return it

        self._patch(iter_cls, "__next__", __next__)
        self._patch(loader_cls, "__iter__", __iter__)

    def describe_loader(self, loader: Any) -> None:
        """Records the loader's settings that decide how well it keeps up (as annotations), and
        the CPU cores its workers can use: the timeline's input finding reads them to say whether
        more workers would help. num_workers comes first (it starts a loader's description)."""
        prefetch = getattr(loader, "prefetch_factor", None)
        for key, value in (
            ("num_workers", getattr(loader, "num_workers", 0)),
            ("pin_memory", bool(getattr(loader, "pin_memory", False))),
            ("prefetch_factor", -1 if prefetch is None else prefetch),
            ("persistent_workers", bool(getattr(loader, "persistent_workers", False))),
            ("batch_size", getattr(loader, "batch_size", None) or 0),
            ("cpu_cores", _usable_cpu_cores()),
        ):
            self.session.annotate(f"dataloader.{key}", int(value))

    # -- allocator --
    def poll_memory(self) -> None:
        """Records the allocator's statistics for the current device (if CUDA is initialised)."""
        cuda = self.torch.cuda
        if not cuda.is_initialized():
            return
        device = cuda.current_device()
        self._record_stats(device, cuda.memory_stats(device))

    def poll_all_devices(self) -> None:
        """From the timer's thread, whose current device is not the program's: every device on
        which the allocator holds memory (reading its statistics creates no CUDA context)."""
        cuda = self.torch.cuda
        if not cuda.is_initialized():
            return
        for device in range(int(cuda.device_count())):
            stats = cuda.memory_stats(device)
            if stats.get("reserved_bytes.all.current", 0) > 0:
                self._record_stats(device, stats)

    def _record_stats(self, device: int, stats: dict[str, Any]) -> None:
        for key, counter in STAT_COUNTERS:
            if key in stats:
                self.session.record_counter(counter, float(stats[key]), device)

    def on_step_boundary(self, _number: int) -> None:
        if self.torch is not None:
            self._try(self.poll_memory)

    def _start_poller(self) -> None:
        """Polls the allocator on a timer as well: a service marks no steps, and its memory
        must still form a series the leak detector can trend."""
        period = float(getattr(self.session, "memory_poll_s", 0.0) or 0.0)
        if period <= 0:
            return

        def loop() -> None:
            while not self._stop_polling.wait(period):
                if self._detached:
                    return
                with _suppress():
                    self.poll_all_devices()

        self._poller = threading.Thread(target=loop, name="gpudiag-memory-poll", daemon=True)
        self._poller.start()

    def _start_collective_poller(self) -> None:
        """Hands the process's own Flight Recorder dump to the session every
        COLLECTIVE_POLL_S, once torch.distributed is up: the session finds the collectives in
        flight (and those past ``collective_timeout_s``) in it. Only where the recorder is on
        (TORCH_FR_BUFFER_SIZE, or TORCH_NCCL_TRACE_BUFFER_SIZE before torch 2.5)."""
        if not any(int(os.environ.get(k, "0") or 0) > 0 for k in _FR_BUFFER_VARIABLES):
            return

        def loop() -> None:
            while not self._stop_polling.wait(COLLECTIVE_POLL_S):
                if self._detached:
                    return
                dump = _flight_recorder_dump(self.torch)
                if dump is None:
                    continue
                with _suppress():
                    self.session.record_flight_recorder(dump[0], dump[1])

        self._collective_poller = threading.Thread(
            target=loop, name="gpudiag-collective-poll", daemon=True
        )
        self._collective_poller.start()

    def _defer_until_cuda(self) -> None:
        cuda = self.torch.cuda
        lazy_call = getattr(cuda, "_lazy_call", None)
        if cuda.is_initialized() or lazy_call is None:
            if cuda.is_initialized():
                self._on_cuda_ready()
            return
        lazy_call(self._on_cuda_ready)

    def _on_cuda_ready(self) -> None:
        # Runs inside PyTorch's lazy CUDA initialisation, possibly long after this session ended.
        if self._detached or _active is not self:
            return
        if self.session.memory_history:
            self._try(self._start_history)
        self._try(_attach_oom_observer)

    def _start_history(self) -> None:
        # Bounded ring (the default max_entries is sys.maxsize); Python stacks only: C++ unwinding
        # made 16B-model dumps take minutes (torchtitan#3628) and crashes on generated code.
        self.torch.cuda.memory._record_memory_history(
            enabled="all",
            context="alloc",
            stacks="python",
            max_entries=int(self.session.memory_history),
        )
        self._history_started = True

    def _stop_history(self) -> None:
        self.torch.cuda.memory._record_memory_history(enabled=None)
        self._history_started = False

    # -- OOM --
    def on_out_of_memory(self, device: int, alloc: int, total: int, free: int) -> None:
        now = time.monotonic()
        if now - self._last_oom_time.get(device, -1e9) < OOM_DEDUP_WINDOW_S:
            return
        self._last_oom_time[device] = now
        stats = {}
        with _suppress():
            stats = dict(self.torch.cuda.memory_stats(device))
        snapshot_path = None
        if self.session.oom_snapshot is not None:
            with _suppress():
                self.torch.cuda.memory._dump_snapshot(str(self.session.oom_snapshot))
                snapshot_path = str(self.session.oom_snapshot)
        self._last_oom = {
            "device": device,
            "alloc": alloc,
            "total": total,
            "free": free,
            "stats": stats,
            "snapshot": snapshot_path,
        }
        self.session.record_oom(alloc, free, total, device)

    def explain_exception(self, exc: BaseException) -> None:
        """Attaches gpudiag's explanation to a CUDA OutOfMemoryError (as a note)."""
        torch = self.torch
        oom_type = getattr(torch, "OutOfMemoryError", None) if torch is not None else None
        if oom_type is None or not isinstance(exc, oom_type) or self._last_oom is None:
            return
        if getattr(exc, "gpudiag_explanation", None):
            return
        text = oom_note(self._last_oom, expandable_segments=_expandable_segments_on())
        exc.gpudiag_explanation = text
        if hasattr(exc, "add_note"):
            exc.add_note(text)
        else:  # Python < 3.11: kept where 3.11 tracebacks would print it
            exc.__notes__ = [*getattr(exc, "__notes__", []), text]

    def _install_excepthook(self) -> None:
        previous = sys.excepthook
        integration = self

        def excepthook(exc_type: Any, exc: BaseException, tb: Any) -> None:
            with _suppress():
                integration.explain_exception(exc)
            previous(exc_type, exc, tb)

        sys.excepthook = excepthook
        self._undo.append(lambda: setattr(sys, "excepthook", previous))


def _usable_cpu_cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the OS has one)."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        with contextlib.suppress(OSError):
            return len(affinity(0))
    return os.cpu_count() or 0


def _module(name: str) -> Any:
    # Submodules by import, not attribute: some packages delete their submodule names
    # (torch.optim has no attribute "optimizer" on recent releases).
    return importlib.import_module(name)


def _uses_cuda(activities: Any) -> bool:
    try:
        return any("CUDA" in str(getattr(a, "name", a)).upper() for a in activities)
    except TypeError:
        return False


def _oom_observer(device: int, alloc: int, total: int, free: int) -> None:
    # PyTorch names the third argument device_allocated, but the allocator passes the device's
    # total (or the per-process fraction's cap); alloc is the segment size it tried to cudaMalloc.
    try:
        integration = _active
        if integration is not None and not integration._detached:
            integration.on_out_of_memory(int(device), int(alloc), int(total), int(free))
    except BaseException:  # noqa: BLE001, S110 - must never raise into the allocator
        pass


def _attach_oom_observer() -> None:
    global _oom_observer_attached
    torch = sys.modules["torch"]
    if _oom_observer_attached:
        return
    attach_fn = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
    if attach_fn is None:
        raise UnavailableError("this PyTorch has no OOM observer (CPU-only build?)")
    backend = getattr(torch.cuda, "get_allocator_backend", lambda: "native")()
    if backend != "native":
        raise UnavailableError(f"the {backend} allocator backend supports no OOM observer")
    attach_fn(_oom_observer)
    _oom_observer_attached = True


def oom_state(oom: dict[str, Any], *, expandable_segments: bool = False) -> Any:
    """The OOM observer's numbers and ``memory_stats`` as the C++ explainer's input."""
    from gpudiag import _core

    stats = oom.get("stats", {})
    state = _core.AllocatorOomState()
    state.device = int(oom["device"])
    # The observer passes the segment size the allocator tried to map, not the tensor's size.
    state.requested_bytes = state.segment_bytes = max(0, int(oom["alloc"]))
    state.device_free_known = True
    state.device_free_bytes = max(0, int(oom["free"]))
    state.capacity_bytes = max(0, int(oom["total"]))
    state.reserved_bytes = int(stats.get("reserved_bytes.all.current", 0))
    state.allocated_bytes = int(stats.get("allocated_bytes.all.current", 0))
    state.inactive_split_bytes = int(stats.get("inactive_split_bytes.all.current", 0))
    # The allocator released its wholly free cached segments and retried before calling the
    # observer: none are left.
    state.releasable_known = True
    state.releasable_bytes = 0
    state.expandable_segments = bool(expandable_segments)
    return state


def oom_note(oom: dict[str, Any], *, expandable_segments: bool = False) -> str:
    """The C++ explainer's account of an out-of-memory failure, as a note for the exception."""
    from gpudiag import _core

    x = _core.explain_oom_state(oom_state(oom, expandable_segments=expandable_segments))
    lines = [f"gpudiag: {_core.oom_cause_name(x.cause)}: {x.summary}"]
    lines += [f"  evidence: {e}" for e in x.evidence]
    lines += [f"  advice: {a}" for a in x.advice]
    if oom.get("snapshot"):
        lines.append(f"Memory snapshot: {oom['snapshot']} (gpudiag analyze {oom['snapshot']}).")
    return "\n".join(lines)


def _expandable_segments_on() -> bool:
    """The allocator setting, as the environment gives it (torch reads the same variables)."""
    for var in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        conf = os.environ.get(var, "").replace(" ", "").lower()
        if "expandable_segments:true" in conf:
            return True
    return False


def _suppress() -> contextlib.suppress:
    """``with _suppress():`` ignores any Exception (cleanup paths that must not fail)."""
    return contextlib.suppress(Exception)


def _flight_recorder_dump(torch: Any) -> tuple[bytes, int] | None:
    """This process's Flight Recorder, the calls in flight only where torch can say (the JSON
    form: no stacks to symbolize), and its rank; None before torch.distributed is up."""
    dist = getattr(torch, "distributed", None)
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    c10d = torch._C._distributed_c10d
    backend = str(dist.get_backend())
    if backend == "nccl" and hasattr(c10d, "_dump_nccl_trace_json"):
        dump = c10d._dump_nccl_trace_json
        kwargs: dict[str, Any] = {}
    elif hasattr(c10d, "_dump_fr_trace_json"):
        dump = c10d._dump_fr_trace_json
        kwargs = {"backend": backend}
    else:
        return None
    try:
        data = dump(includeCollectives=True, onlyActive=True, **kwargs)
    except TypeError:  # a torch without onlyActive or backend
        data = dump(includeCollectives=True)
    return (data if isinstance(data, bytes) else str(data).encode()), int(dist.get_rank())
