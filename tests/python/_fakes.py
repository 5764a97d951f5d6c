# SPDX-License-Identifier: Apache-2.0
"""Test doubles: a session backend with gpudiag._core.Session's methods, recording every call."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from gpudiag import _core


class FakeNative:
    """Stands in for gpudiag._core.Session: records calls with monotonic timestamps (ns)."""

    def __init__(self, options: Any) -> None:
        self.options = options
        self.calls: list[tuple[str, int, tuple[Any, ...]]] = []
        self.events: list[Any] = []
        self.strings: dict[int, str] = {}
        self.watches: dict[int, tuple[int, Callable[[int], None]]] = {}
        self.running_flag = False
        self.paused: list[str] = []
        self.level = _core.CaptureLevel.no_gpu  # what status() reports
        self._lock = threading.Lock()

    def _log(self, name: str, *args: Any) -> None:
        with self._lock:
            self.calls.append((name, time.monotonic_ns(), args))

    def start(self) -> None:
        self._log("start")
        self.running_flag = True

    def stop(self) -> None:
        self._log("stop")
        self.running_flag = False

    def running(self) -> bool:
        return self.running_flag

    def step_begin(self, step: int) -> None:
        self._log("step_begin", step)

    def step_end(self, step: int) -> None:
        self._log("step_end", step)

    def phase_begin(self, name: str) -> None:
        self._log("phase_begin", name)

    def phase_end(self) -> None:
        self._log("phase_end")

    def input_wait_begin(self) -> None:
        self._log("input_wait_begin")

    def input_wait_end(self) -> None:
        self._log("input_wait_end")

    @staticmethod
    def now_ns() -> int:
        return time.monotonic_ns()

    def input_waited(self, since_ns: int) -> None:
        self._log("input_waited", since_ns)

    def record(self, event: Any) -> bool:
        self._log("record", event.kind)
        self.events.append(event)
        return True

    def intern(self, text: str) -> int:
        for k, v in self.strings.items():
            if v == text:
                return k
        k = len(self.strings) + 2
        self.strings[k] = text
        return k

    def watch_memory(self, threshold: int, callback: Callable[[int], None]) -> int:
        wid = len(self.watches) + 1
        self.watches[wid] = (threshold, callback)
        return wid

    def unwatch_memory(self, wid: int) -> None:
        del self.watches[wid]

    def record_watch_action(
        self, wid: int, action: str, ok: bool, bytes_freed: int, detail: str
    ) -> None:
        self._log("record_watch_action", wid, action, ok, bytes_freed, detail)

    def report(self) -> Any:
        r = _core.Report()
        r.notes = [f"fake session: {len(self.calls)} calls"]
        return r

    def status(self) -> Any:
        st = _core.CaptureStatus()
        st.level = self.level
        return st

    def pause_capture(self, reason: str) -> None:
        self._log("pause_capture", reason)
        self.paused.append(reason)

    def resume_capture(self) -> None:
        self._log("resume_capture")

    # ---- helpers for assertions ----
    def names(self) -> list[str]:
        return [c[0] for c in self.calls]

    def annotations(self) -> dict[str, int]:
        out = {}
        for e in self.events:
            if e.kind == _core.EventKind.annotation:
                out[self.strings[e.annotation.text]] = e.annotation.value
        return out

    def counters(self) -> list[tuple[str, float, int]]:
        return [
            (e.counter.counter.name, e.counter.value, e.device)
            for e in self.events
            if e.kind == _core.EventKind.counter
        ]

    def input_waits_per_step(self) -> dict[int, int]:
        """Nanoseconds spent in input waits during each step (by step number)."""
        waits: dict[int, int] = {}
        step = None
        began = None
        for name, t, args in self.calls:
            if name == "step_begin":
                step = args[0]
            elif name == "input_wait_begin":
                began = t
            elif name == "input_wait_end" and began is not None:
                if step is not None:
                    waits[step] = waits.get(step, 0) + (t - began)
                began = None
            elif name == "input_waited" and step is not None:
                waits[step] = waits.get(step, 0) + (t - args[0])
        return waits


class FakeFactory:
    """A backend factory for gpudiag.Session(_backend_factory=...) that keeps the last backend."""

    def __init__(self) -> None:
        self.last: FakeNative | None = None

    def __call__(self, options: Any) -> FakeNative:
        self.last = FakeNative(options)
        return self.last
