# SPDX-License-Identifier: Apache-2.0
"""Live sessions: ``gpudiag.start()``/``stop()``, ``with gpudiag.session(...)``, steps and phases.

A :class:`Session` owns the C++ session (``gpudiag._core.Session``) and, when PyTorch is in the
process, the PyTorch integration (step detection, DataLoader waits, allocator statistics, OOM
hook, profiler coexistence). Nothing here touches CUDA: the integration defers everything that
would create a context until the program's own first CUDA use.

One capture per process: a session started while another runs (a script with its own
``gpudiag.session`` under ``gpudiag run`` or ``%%gpudiag``, or a library's session inside the
program's) joins the running one instead of failing (see :class:`_Join`).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
import threading
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal, Union, overload

from gpudiag import _core, _stack
from gpudiag._analyze import analysis_window
from gpudiag._errors import FailedPreconditionError, InvalidArgumentError, UnavailableError
from gpudiag._format import parse_size
from gpudiag._libraries import register_nvidia_library_dirs
from gpudiag._report import Report
from gpudiag._steps import StepClock
from gpudiag._whatif import whatif_options

if TYPE_CHECKING:  # typing.Self is 3.11+; typing_extensions is only needed by type checkers
    from types import FrameType, TracebackType

    from typing_extensions import Self

_current: Session | None = None  # the session that owns this process' capture
_joined: list[Session] = []  # sessions started while it runs, joined to it (latest last)
_current_lock = threading.Lock()

#: The origin of the session ``gpudiag run`` starts (named in the messages of sessions that join
#: it, which then suggest its command-line options).
RUN_ORIGIN = "the session `gpudiag run` started"

SizeLike = Union[int, float, str]
ActionLike = Union[str, "list[str]", "tuple[str, ...]", None]

# What watch_memory can do by itself at a crossing (run before the callback, in this order).
WATCH_ACTIONS = ("empty_cache", "snapshot", "report")


def native_sessions_available() -> bool:
    """True when this build of gpudiag._core has live sessions."""
    return hasattr(_core, "Session")


def _create_native(options: Any) -> Any:
    if not native_sessions_available():
        raise UnavailableError(
            "live sessions are not built into this gpudiag._core (the Session implementation "
            "was missing when it was compiled); offline analysis (gpudiag.analyze) still works"
        )
    return _core.Session.create(options)


class Session:
    """A diagnosis of the running program.

    Args:
        record: write a ``.gpudiag`` recording here (analyse it later with ``gpudiag analyze``).
        record_max_bytes: the recording never grows past this (0 = no cap; at least 4 MiB).
        record_window_s: for services left on: keep only the last N seconds of events, on disk
            as they arrive (``<stem>-window.gpudiag`` survives a crash or ``kill -9``; at most
            ``record_window_bytes`` a file), moved to ``record`` at stop, and written to numbered
            files beside it when a memory watch fires, an allocation fails, or on
            :meth:`dump` / :meth:`request_dump`. 0 = write everything as it comes.
        record_window_bytes: the most one window file takes on disk (about; two are kept).
        capture_gpu: capture GPU activity through CUPTI when available.
        deep: take CUPTI's callback subscriber for allocation call sites (torch.profiler GPU
            tracing may then be unavailable in this process).
        nvml_hz: NVML sampling rate (0 = off).
        cost_budget_cpu_share: the most of the program's CPU time gpudiag may take (0 = no
            limit; None = the library's default, 1 %); past it gpudiag takes in fewer event
            kinds, and says so in the report (``SessionOptions::cost_budget``, docs/api.md).
        cost_budget_step_share: the same against the step time (None = the default, 0.5 %).
        torch: "auto" (instrument PyTorch if the program uses it), True or False.
        dataloader: time the loop's waits for DataLoader batches (PyTorch only).
        memory_history: keep PyTorch's allocation history with at most this many entries (for
            snapshots with stacks); None = off. Started at the program's first CUDA use.
        oom_snapshot: on a CUDA out-of-memory error, dump a torch memory snapshot to this path.
        memory_poll_s: also read PyTorch's allocator statistics this often, in seconds, not only
            at step boundaries (services mark no steps); 0 = at steps only.
        report_period_s: call ``on_report`` with a fresh Report this often (0 = never).
        on_report: callable taking a :class:`Report` (runs on the session's thread).
        properties: free-form facts for the report.
        window: analysis window, "steps", "hta" or "all".
        http: answer HTTP at this ``host:port`` while the session runs (``"127.0.0.1:0"``: any
            free port, see :attr:`http_url`): ``GET /metrics``, ``/report``, ``/healthz``,
            ``POST /dump``, ``/capture/pause``, ``/capture/resume`` (docs/http.md). Any address
            but loopback needs ``http_token``. Not serving is no error: :meth:`http_status`
            says why.
        http_token: the bearer token every request must carry (None = ``GPUDIAG_HTTP_TOKEN``).
        collective_timeout_s: in a distributed job whose Flight Recorder is on
            (``TORCH_FR_BUFFER_SIZE``), a collective still in flight this many seconds after the
            session saw it writes the window once (needs ``record_window_s``) and the report
            says so; its ``collectives_in_flight`` section lists those in flight (docs/hangs.md,
            "Live"). 0 = off.

    Started while another session runs in this process, a session joins it (one capture per
    process): it shares that session's recording and capture, :meth:`report` gives that
    session's report so far, and stopping it leaves that session running. Its options must then
    be left at their defaults or agree with the running session's, except ``record`` (a copy of
    the running session's recording is written there when that session ends),
    ``memory_history`` and ``oom_snapshot`` (taken over when the running session has none) and
    ``properties`` (left out of the report, with a warning on stderr); anything else raises
    FailedPreconditionError naming the option and the fix.
    """

    def __init__(
        self,
        record: str | Path | None = None,
        *,
        record_max_bytes: int = 0,
        record_window_s: float = 0.0,
        record_window_bytes: int = 256 << 20,
        capture_gpu: bool = True,
        deep: bool = False,
        nvml_hz: float = 2.0,
        cost_budget_cpu_share: float | None = None,
        cost_budget_step_share: float | None = None,
        torch: bool | str = "auto",
        dataloader: bool = True,
        memory_history: int | None = None,
        oom_snapshot: str | Path | None = None,
        memory_poll_s: float = 1.0,
        report_period_s: float = 0.0,
        on_report: Callable[[Report], None] | None = None,
        properties: dict[str, Any] | None = None,
        window: str = "steps",
        http: str | None = None,
        http_token: str | None = None,
        collective_timeout_s: float = 0.0,
        _backend_factory: Callable[[Any], Any] | None = None,
        _origin: str | None = None,
    ) -> None:
        if torch not in (True, False, "auto"):
            raise InvalidArgumentError(f"torch must be True, False or 'auto', not {torch!r}")
        analysis_window(window)  # refuses a name the C++ enum does not have
        if memory_history is not None and int(memory_history) <= 0:
            raise InvalidArgumentError("memory_history must be a positive number of entries")
        if memory_poll_s < 0:
            raise InvalidArgumentError("memory_poll_s must be >= 0 (0 = at steps only)")
        self.record_path = Path(record) if record is not None else None
        self.record_max_bytes = int(record_max_bytes)
        self.record_window_s = float(record_window_s)
        self.record_window_bytes = int(record_window_bytes)
        self.capture_gpu = capture_gpu
        self.deep = deep
        self.nvml_hz = nvml_hz
        self.cost_budget_cpu_share = cost_budget_cpu_share
        self.cost_budget_step_share = cost_budget_step_share
        self.torch = torch
        self.dataloader = dataloader
        self.memory_history = int(memory_history) if memory_history is not None else None
        self.oom_snapshot = Path(oom_snapshot) if oom_snapshot is not None else None
        self.memory_poll_s = float(memory_poll_s)
        self.report_period_s = report_period_s
        self.on_report = on_report
        self.properties = dict(properties or {})
        self.window = window
        self.http = http
        self.http_token = http_token
        self.collective_timeout_s = float(collective_timeout_s)
        self._backend_factory = _backend_factory or _create_native
        self._native: Any = None
        self._clock: StepClock | None = None
        self._integration: Any = None
        self._running = False
        self._final_report: Report | None = None
        self._phase_stack = threading.local()
        self._origin = _origin  # who started it, for the messages of sessions that join it
        self._join: _Join | None = None  # set while this session is joined to another
        self._record_copies: list[Path] = []  # where joined sessions asked for the recording

    # ---- lifecycle ------------------------------------------------------------------------------
    def _options(self) -> Any:
        options = _core.SessionOptions()
        options.record_path = str(self.record_path) if self.record_path else ""
        options.record_max_bytes = self.record_max_bytes
        options.record_window_s = self.record_window_s
        options.record_window_bytes = self.record_window_bytes
        options.capture_gpu = bool(self.capture_gpu)
        options.deep = bool(self.deep)
        options.nvml_hz = float(self.nvml_hz)
        if self.cost_budget_cpu_share is not None:
            options.cost_budget.cpu_share = float(self.cost_budget_cpu_share)
        if self.cost_budget_step_share is not None:
            options.cost_budget.step_share = float(self.cost_budget_step_share)
        options.report_period_ms = int(self.report_period_s * 1000)
        if self.on_report is not None:
            callback = self.on_report
            options.on_report = lambda native: callback(Report.from_native(native))
        analysis = _core.AnalysisOptions()
        analysis.window = analysis_window(self.window)
        options.analysis = analysis
        props = {"pid": str(os.getpid()), "python": sys.version.split()[0]}
        for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
            if key in os.environ:
                props[key.lower()] = os.environ[key]
        props.update({str(k): str(v) for k, v in self.properties.items()})
        options.properties = sorted(props.items())
        options.http = self.http or ""
        options.http_token = self.http_token or ""
        options.collective_timeout_s = self.collective_timeout_s
        return options

    def start(self) -> Self:
        """Starts capture and makes this the current session; joins the session already running
        in this process, if any (see the class documentation). Returns self."""
        global _current
        with _current_lock:
            if self._running:
                raise FailedPreconditionError("this session is already running")
            if self._origin is None:
                self._origin = _caller_origin()
            if _current is not None:
                self._join = _Join.enter(self, _current)
                self._native, self._clock = _current._native, _current._clock
                self._running = True
                self._final_report = None
                _joined.append(self)
                return self
            register_nvidia_library_dirs()  # before CUPTI loads: the file torch will map
            _stack.publish()  # the framework side of the stack verdict
            native = self._backend_factory(self._options())
            native.start()
            self._native = native
            self._clock = StepClock(native, on_boundary=self._on_step_boundary)
            self._running = True
            self._final_report = None
            _current = self
            # Registered again at each start so it runs before exit handlers registered since
            # (atexit runs them last in, first out), while what the session uses still works.
            atexit.unregister(_stop_at_exit)
            atexit.register(_stop_at_exit)
        if self.torch is not False:
            from gpudiag import torch_integration

            self._integration = torch_integration.attach(self, required=self.torch is True)
        return self

    def stop(self) -> None:
        """Stops capture (the report stays available). A joined session only leaves the session
        it joined, which keeps running."""
        global _current
        with _current_lock:
            if not self._running:
                raise FailedPreconditionError("this session is not running")
            self._running = False
            if self in _joined:
                _joined.remove(self)
            if _current is self:
                _current = None
                # Those joined to it stay stoppable, but are no longer the current session.
                _joined[:] = [s for s in _joined if s._join is None or s._join.outer is not self]
        if self._join is not None:
            self._join.leave()
            return
        try:
            if self._integration is not None:
                self._integration.detach()
        finally:
            self._integration = None
            self._native.stop()
            self._copy_recording()

    def _copy_recording(self) -> None:
        """Writes the copies of the recording that sessions which joined this one asked for."""
        copies, self._record_copies = self._record_copies, []
        for target in copies:
            try:
                shutil.copyfile(str(self.record_path), target)
            except OSError as e:
                print(f"gpudiag: the recording was not copied to {target}: {e}", file=sys.stderr)

    @property
    def running(self) -> bool:
        """True while started and not stopped (a joined session: while the one it joined runs)."""
        return self._running and (self._join is None or self._join.outer.running)

    @property
    def joined(self) -> Session | None:
        """The session this one joined (it was already running when this one started), or
        None."""
        return self._join.outer if self._join is not None else None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            self.explain_exception(exc)
        if self._running:
            self.stop()

    def explain_exception(self, exc: BaseException) -> None:
        """Attaches gpudiag's explanation to an exception the program raised (a CUDA
        out-of-memory error gets a note on what held the memory)."""
        owner = self._join.outer if self._join is not None else self
        if owner._integration is not None:
            owner._integration.explain_exception(exc)

    # ---- markers ------------------------------------------------------------------------------
    def step(self, number: int | None = None) -> None:
        """Marks a step boundary: the open step ends and the next begins."""
        if self._running and self._clock is not None:
            self._clock.boundary("explicit", number)

    def step_boundary(self, source: str, number: int | None = None) -> bool:
        """A boundary from an automatic source (used by integrations)."""
        if not self._running or self._clock is None:
            return False
        return self._clock.boundary(source, number)

    def step_begin_from(self, source: str, number: int) -> bool:
        """Step ``number`` starts now, says ``source`` (a framework's batch start)."""
        if not self._running or self._clock is None:
            return False
        return self._clock.begin(source, number)

    def step_end_from(self, source: str, done: int) -> bool:
        """``done`` steps are complete, says ``source`` (a framework's global step)."""
        if not self._running or self._clock is None:
            return False
        return self._clock.end(source, done)

    @property
    def step_clock(self) -> StepClock | None:
        return self._clock

    def _on_step_boundary(self, number: int) -> None:
        if self._integration is not None:
            self._integration.on_step_boundary(number)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Marks a phase of the step ("forward", "backward", ...), also as an NVTX range."""
        if not self._running:
            yield
            return
        from gpudiag import torch_integration

        self._native.phase_begin(str(name))
        nvtx = torch_integration.nvtx_push(str(name))
        try:
            yield
        finally:
            if nvtx:
                torch_integration.nvtx_pop()
            if self._running:
                self._native.phase_end()

    @contextlib.contextmanager
    def input_wait(self) -> Iterator[None]:
        """Marks the loop waiting for its next input (for loaders gpudiag does not know)."""
        if not self._running:
            yield
            return
        self._native.input_wait_begin()
        try:
            yield
        finally:
            if self._running:
                self._native.input_wait_end()

    def annotate(self, text: str, value: int = 0) -> bool:
        """Records a note (with an optional integer value) on the session's timeline."""
        if not self._running:
            return False
        event = _core.Event()
        event.kind = _core.EventKind.annotation
        event.process = os.getpid()
        event.thread = threading.get_native_id()
        event.annotation.text = self._native.intern(str(text))
        event.annotation.value = int(value)
        return bool(self._native.record(event))

    def record_counter(self, counter: str, value: float, device: int = -1) -> bool:
        """Records a sampled metric by CounterKind name (e.g. "framework_allocated_bytes")."""
        if not self._running:
            return False
        event = _core.Event()
        event.kind = _core.EventKind.counter
        event.process = os.getpid()
        event.thread = threading.get_native_id()
        if device >= 0:
            event.device = int(device)
        event.counter.counter = getattr(_core.CounterKind, counter)
        event.counter.value = float(value)
        return bool(self._native.record(event))

    def record_oom(self, requested: int, free: int, total: int, device: int) -> bool:
        """Records a failed allocation (from the PyTorch OOM observer)."""
        if not self._running:
            return False
        event = _core.Event()
        event.kind = _core.EventKind.out_of_memory
        event.process = os.getpid()
        event.thread = threading.get_native_id()
        event.device = int(device)
        event.oom.requested_bytes = max(0, int(requested))
        event.oom.free_bytes = max(0, int(free))
        event.oom.total_bytes = max(0, int(total))
        return bool(self._native.record(event))

    # ---- memory -------------------------------------------------------------------------------
    def watch_memory(
        self,
        level: SizeLike | None = None,
        callback: Callable[[int], None] | None = None,
        *,
        action: ActionLike = None,
        path: str | Path | None = None,
        **renamed: Any,
    ) -> int:
        """Acts each time the memory in use on a device rises to ``level`` ("2 GiB" or bytes) or
        above; re-armed when it falls below 95 % of it. In use means the framework's reserved
        bytes plus memory held outside it, or NVML's figure for this process when larger.

        ``action`` is done by gpudiag itself, before ``callback(bytes_in_use)``: "empty_cache"
        (collect garbage, then torch.cuda.empty_cache()), "snapshot" (dump a torch memory
        snapshot) or "report" (write this session's report as JSON), or a list of them; files go
        to the directory ``path`` (default: the temporary directory). Each crossing records what
        ran and what it returned (bytes freed, the file written) in the report's table of watch
        crossings, next to what emptying the cache could return at that moment (memory stranded
        in partly used segments it cannot). Returns an id for :meth:`unwatch_memory`. Runs on
        the session's thread with no lock held: keep callbacks short. (``limit=`` is the
        deprecated name of ``level``.)"""
        level = _renamed_level(level, renamed)
        if not self._running:
            raise FailedPreconditionError("watch_memory needs a running session")
        actions = _watch_actions(action)
        if callback is None and not actions:
            raise InvalidArgumentError("watch_memory needs a callback or an action")
        if callback is not None and not callable(callback):
            raise InvalidArgumentError("callback must be callable")
        folder = Path(path) if path is not None else None
        watch: dict[str, int] = {"id": 0, "crossings": 0}

        def on_crossing(used: int) -> None:
            watch["crossings"] += 1
            from gpudiag import torch_integration

            results = [
                torch_integration.run_watch_action(self, name, folder, watch["crossings"])
                for name in actions
            ]
            failure = ""
            if callback is not None:
                try:
                    callback(used)
                except Exception as e:  # noqa: BLE001 - recorded with the crossing, then dropped
                    failure = f"callback raised {type(e).__name__}: {e}"
            names = [*actions, *(["callback"] if callback is not None else [])]
            details = [d for _, _, d in results if d] + ([failure] if failure else [])
            ok = all(r[0] for r in results) and not failure
            with contextlib.suppress(Exception):
                self._native.record_watch_action(
                    watch["id"], "+".join(names), ok, sum(r[1] for r in results), "; ".join(details)
                )

        watch["id"] = int(self._native.watch_memory(parse_size(level), on_crossing))
        if self._join is not None:
            self._join.watches.append(watch["id"])  # removed when this session stops
        return watch["id"]

    def unwatch_memory(self, watch_id: int) -> None:
        self._native.unwatch_memory(int(watch_id))

    def snapshot(self, path: str | Path | None = None) -> Report:
        """Dumps a PyTorch memory snapshot (to ``path`` or a temporary file) and analyses it."""
        from gpudiag import torch_integration

        return torch_integration.snapshot_report(self, path)

    def dump(self, path: str | Path | None = None) -> None:
        """Writes the window of recent events (``record_window_s``) now: to ``path``, or to the
        next numbered dump file beside the recording."""
        if self._native is None:
            raise FailedPreconditionError("the session was never started")
        self._native.dump(str(path) if path is not None else "")

    def request_dump(self) -> None:
        """Asks for a dump of the window at the session's next tick; safe in a signal handler."""
        if self._native is not None:
            self._native.request_dump()

    def replay(self, path: str | Path) -> None:
        """Feeds the events of an input gpudiag reads (a recording, a torch memory snapshot, a
        Kineto trace) through this running session with their own timestamps: a demonstration
        without a GPU, or a past run put through live watches. The report names the file."""
        if self._native is None:
            raise FailedPreconditionError("the session is not running")
        self._native.replay(str(path))

    def whatif(
        self,
        *,
        settings: str | Sequence[str] = (),
        capacity: SizeLike | None = None,
        device_total: SizeLike | None = None,
        sweep: bool = True,
        device: int | None = None,
        torch_version: str | None = None,
    ) -> _core.WhatIfResult:
        """:func:`gpudiag.whatif` over what this session recorded so far: its ``record`` file
        (or, with ``record_window_s``, its window), while it runs or after stop(); the same
        arguments and result (a ``WhatIfResult``).

        Raises:
            FailedPreconditionError: the session was never started, keeps no ``record``, or
                recorded none of the caching allocator's own operations (CUPTI sees only
                cudaMalloc-level calls; the message says how to record them).
        """
        if self._native is None:
            raise FailedPreconditionError("the session was never started")
        options = whatif_options(
            settings=settings,
            capacity=capacity,
            device_total=device_total,
            sweep=sweep,
            device=device,
            torch_version=torch_version,
        )
        result: _core.WhatIfResult = self._native.whatif(options)
        return result

    def record_flight_recorder(self, dump: bytes, rank: int = -1) -> None:
        """Hands this process's own Flight Recorder dump (the bytes ``_dump_fr_trace_json()``
        or ``_dump_fr_trace()`` return) to the session: the collectives new since the last one
        (``collective_timeout_s``). The torch integration does it every second by itself."""
        if self._native is None:
            raise FailedPreconditionError("the session is not running")
        self._native.record_flight_recorder(bytes(dump), int(rank))

    # ---- results ------------------------------------------------------------------------------
    @overload
    def report(self, *, gather: Literal[False] = False) -> Report: ...
    @overload
    def report(self, *, gather: bool) -> Report | None: ...
    def report(self, *, gather: bool = False) -> Report | None:
        """The diagnosis so far (or of the whole run after stop()).

        With ``gather=True`` under torch.distributed, every rank must call it: rank 0 gets the
        job's report (per-rank reports plus stragglers and imbalance) and other ranks get None.
        """
        if self._native is None:
            raise FailedPreconditionError("the session was never started")
        report = Report.from_native(self._native.report())
        if gather:
            from gpudiag import torch_integration

            return torch_integration.gather_report(report)
        return report

    def status(self) -> Any:
        """The capture status (level, reasons, events, drops) of this session."""
        if self._native is None:
            raise FailedPreconditionError("the session was never started")
        return self._native.status()

    def http_status(self) -> dict[str, Any]:
        """Whether this session answers HTTP (``http=``), where, or why not (docs/http.md):
        ``{"serving": bool, "address": str, "port": int, "reason": str}``."""
        if self._join is not None:
            return self._join.outer.http_status()
        if self._native is None:
            return {"serving": False, "address": "", "port": 0, "reason": ""}
        st = self._native.http_status()
        return {"serving": st.serving, "address": st.address, "port": st.port, "reason": st.reason}

    @property
    def http_url(self) -> str | None:
        """``http://127.0.0.1:<port>`` while this session answers HTTP, else None."""
        st = self.http_status()
        if not st["serving"]:
            return None
        host = st["address"]
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{st['port']}"

    def pause_capture(self, reason: str) -> None:
        if self._running:
            self._native.pause_capture(reason)

    def resume_capture(self) -> None:
        if self._running:
            self._native.resume_capture()

    @property
    def native(self) -> Any:
        """The ``gpudiag._core.Session`` (None before start)."""
        return self._native


class _Join:
    """What a session started while another runs in this process holds in place of a capture of
    its own: the running ("outer") session, whose recording, step clock and PyTorch integration it
    shares, and the memory watches it added there (removed when it stops; the outer session keeps
    running). Two captures in one process would fight over CUPTI and the recording file, and a
    script written with its own session must work under ``gpudiag run`` unchanged."""

    def __init__(self, outer: Session) -> None:
        self.outer = outer
        self.watches: list[int] = []

    @classmethod
    def enter(cls, inner: Session, outer: Session) -> _Join:
        """Joins `inner` to `outer`, merging the options that can be merged; raises
        FailedPreconditionError, naming the option and the fix, for one that cannot."""
        merges = _join_merges(inner, outer)  # checks every option before changing anything
        for merge in merges:
            merge()
        return cls(outer)

    def leave(self) -> None:
        for watch_id in self.watches:
            with contextlib.suppress(Exception):
                self.outer.unwatch_memory(watch_id)
        self.watches.clear()


# Options a joining session cannot change in the session it joins: left at their default or
# equal to the running session's value they are fine; any other value is refused.
_FIXED_ON_JOIN = (
    "record_max_bytes",
    "record_window_s",
    "record_window_bytes",
    "capture_gpu",
    "deep",
    "nvml_hz",
    "cost_budget_cpu_share",
    "cost_budget_step_share",
    "dataloader",
    "memory_poll_s",
    "report_period_s",
    "on_report",
    "window",
    "http",
    "http_token",
    "collective_timeout_s",
)
# The `gpudiag run` option that sets each, for the fix in the refusal.
_RUN_OPTIONS = {
    "record": "--record PATH",
    "record_window_s": "--window SECONDS",
    "dataloader": "--no-dataloader",
    "report_period_s": "--report-every SECONDS",
    "torch": "--no-torch",
    "memory_history": "--memory-history N",
    "oom_snapshot": "--oom-snapshot PATH",
}


def _join_merges(inner: Session, outer: Session) -> list[Callable[[], None]]:
    """The changes to `outer` that joining `inner` needs, or FailedPreconditionError."""
    defaults = Session()
    for name in _FIXED_ON_JOIN:
        mine, theirs = getattr(inner, name), getattr(outer, name)
        if mine != getattr(defaults, name) and mine != theirs:
            raise _join_refusal(name, mine, outer, f"it has {name}={theirs!r}")
    if (inner.torch is True and outer._integration is None) or (
        inner.torch is False and outer._integration is not None
    ):
        instrumented = "instruments" if outer._integration is not None else "does not instrument"
        raise _join_refusal("torch", inner.torch, outer, f"it {instrumented} PyTorch")
    merges: list[Callable[[], None]] = []
    if inner.properties and inner.properties != outer.properties:
        merges.append(lambda: _say_properties_dropped(inner, outer))
    for name in ("memory_history", "oom_snapshot"):
        merge = _adopt(inner, outer, name)
        if merge is not None:
            merges.append(merge)
    if inner.record_path is not None:
        merges.extend(_record_copy(inner, outer))
    return merges


def _adopt(inner: Session, outer: Session, name: str) -> Callable[[], None] | None:
    """`outer` takes over `inner`'s memory_history or oom_snapshot when it has none: PyTorch's
    integration reads them when CUDA starts and at an out-of-memory error."""
    mine, theirs = getattr(inner, name), getattr(outer, name)
    if mine is None or mine == theirs:
        return None
    if theirs is not None:
        raise _join_refusal(name, mine, outer, f"it has {name}={theirs!r}")
    if outer._integration is None:
        raise _join_refusal(name, mine, outer, "it does not instrument PyTorch")
    if name == "memory_history" and cuda_initialised():
        raise _join_refusal(
            name, mine, outer, "CUDA is initialised already, so allocation history starts no more"
        )
    return lambda: setattr(outer, name, mine)


def _say_properties_dropped(inner: Session, outer: Session) -> None:
    # Facts for the report, fixed when the running session started: losing them changes no
    # finding, so they are no reason to stop the program.
    print(
        f"gpudiag: properties={inner.properties!r} are not in the report: this session joins "
        f"{outer._origin}, whose report's properties were set when it started",
        file=sys.stderr,
    )


def _record_copy(inner: Session, outer: Session) -> list[Callable[[], None]]:
    """A joined session's recording is the running session's: copied to `record` when it ends."""
    target = Path(inner.record_path or "").resolve()  # the program may change directory
    if outer.record_path is None:
        raise _join_refusal("record", str(inner.record_path), outer, "it writes no recording")
    if target == outer.record_path.resolve():
        return []

    def merge() -> None:
        outer._record_copies.append(target)
        print(
            f"gpudiag: this session joins {outer._origin}, which records to "
            f"{outer.record_path}; {target} gets a copy of that recording when it ends",
            file=sys.stderr,
        )

    return [merge]


def _join_refusal(name: str, value: Any, outer: Session, theirs: str) -> FailedPreconditionError:
    if outer._origin == RUN_ORIGIN and name in _RUN_OPTIONS:
        fix = f"pass {_RUN_OPTIONS[name]} to `gpudiag run` instead, or drop {name}= here"
    else:
        fix = f"drop {name}= here, or give it to that session when it starts"
    return FailedPreconditionError(
        f"gpudiag.session({name}={value!r}): this session joins {outer._origin} (a process has "
        f"one capture, which sessions started while it runs share), and {theirs}; {fix}"
    )


def cuda_initialised() -> bool:
    """True once PyTorch has initialised CUDA in this process (asking never initialises it)."""
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:  # noqa: BLE001 - a broken torch: treat CUDA as not started
        return False


def _caller_origin() -> str:
    """The session as its messages name it: where the program's code started it."""
    package = str(Path(__file__).resolve().parent)
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not str(Path(filename).resolve()).startswith(package) and "contextlib" not in filename:
            return f"the session started at {filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "the session already running"


def _stop_at_exit() -> None:
    """Stops the session a program leaves running at interpreter exit: PyTorch's hooks come off
    and the recording is finished while the interpreter and CUDA still work (the native
    library's own exit handler runs only after the interpreter is gone)."""
    s = _current
    if s is not None and s.running:
        with contextlib.suppress(Exception):  # an exit handler must not fail the exit
            s.stop()


# ---- module-level API over the current session ---------------------------------------------------
def current_session() -> Session | None:
    """The running session started with start() or session() (the latest one joined to it, if
    any), or None."""
    return _joined[-1] if _joined else _current


def start(record: str | Path | None = None, **options: Any) -> Session:
    """Starts a session (see :class:`Session` for options) and returns it."""
    return Session(record, **options).start()


def stop() -> Report | None:
    """Stops the current session and returns its report (None when no session runs). The
    current session is the latest started: a joined one leaves, and the one it joined runs on."""
    s = current_session()
    if s is None:
        return None
    s.stop()
    return s.report()


def session(record: str | Path | None = None, **options: Any) -> Session:
    """``with gpudiag.session(record="run.gpudiag") as s: ...`` then ``s.report()``."""
    return Session(record, **options)


def step(number: int | None = None) -> None:
    """Marks a step boundary in the current session (no-op without one)."""
    s = _current
    if s is not None:
        s.step(number)


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """``with gpudiag.phase("forward"):`` marks a phase in the current session, as an NVTX range
    too. Without a session it is only the NVTX range (when PyTorch with CUDA is loaded)."""
    s = _current
    if s is not None:
        with s.phase(name):
            yield
        return
    from gpudiag import torch_integration

    pushed = torch_integration.nvtx_push(str(name))
    try:
        yield
    finally:
        if pushed:
            torch_integration.nvtx_pop()


def watch_memory(
    level: SizeLike | None = None,
    callback: Callable[[int], None] | None = None,
    *,
    action: ActionLike = None,
    path: str | Path | None = None,
    **renamed: Any,
) -> int:
    """Watch a memory level on the current session and act on it (see
    :meth:`Session.watch_memory`)."""
    level = _renamed_level(level, renamed)
    s = current_session()
    if s is None:
        raise FailedPreconditionError("watch_memory needs a running session (gpudiag.start())")
    return s.watch_memory(level, callback, action=action, path=path)


def _renamed_level(level: SizeLike | None, renamed: dict[str, Any]) -> SizeLike:
    """``level``, or the value passed by its old name ``limit`` (with a DeprecationWarning): one
    word for a watch's level across C++ (level_bytes), C and Python."""
    if "limit" in renamed:
        warnings.warn(
            "watch_memory(limit=...) is deprecated: the argument is now called level",
            DeprecationWarning,
            stacklevel=3,
        )
        if level is not None:
            raise InvalidArgumentError("watch_memory: give level, not both level and limit")
        level = renamed.pop("limit")
    if renamed:
        raise TypeError(f"watch_memory got unexpected arguments: {', '.join(renamed)}")
    if level is None:
        raise InvalidArgumentError("watch_memory needs a level, e.g. '2 GiB'")
    return level


def _watch_actions(action: ActionLike) -> list[str]:
    names = [action] if isinstance(action, str) else list(action or ())
    for name in names:
        if name not in WATCH_ACTIONS:
            raise InvalidArgumentError(
                f"unknown watch action {name!r}: use one of {', '.join(WATCH_ACTIONS)}"
            )
    return names


def report(*, gather: bool = False) -> Report | None:
    """The current session's report so far (None when no session runs)."""
    s = _current
    return s.report(gather=gather) if s is not None else None
