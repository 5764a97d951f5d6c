# SPDX-License-Identifier: Apache-2.0
"""How ``gpudiag run -- program`` starts the program and passes stop signals on to it, once.

A service must get each stop or reload signal exactly once: a signal sent to gpudiag alone is
passed on, but one its sender also sent to the program is not, or a service that takes a second
SIGTERM as "quit now" skips its drain. Three kinds of sender reach both processes:

- one that signals a process group (``kill -- -PGID``, a supervisor, SIGINT with no terminal):
  the program runs in a process group of its own, so such a signal reaches gpudiag alone, which
  passes it on. Only in a terminal's foreground does the program stay in gpudiag's group (it
  must be able to read the terminal); there
- the terminal (Ctrl-C, Ctrl-\\, a hang-up) signals the whole foreground group: a signal the
  kernel generated is not passed on;
- systemd's ``KillMode=control-group`` (its default) signals every process of the unit: a signal
  from the unit's service manager is not passed on when the unit's KillMode is known to be
  control-group (asked once, at start).

When in doubt a signal is passed on: a doubled signal costs a drain, a withheld one the whole
shutdown. The sender is read from the signal itself (``sigtimedwait``), so the program always
starts with the signals unblocked. On Linux the program also gets SIGTERM when gpudiag dies
(``PR_SET_PDEATHSIG``), so a ``kill -9`` of gpudiag never leaves it running unwatched.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # typing.Self is 3.11+; typing_extensions is only needed by type checkers
    from types import FrameType, TracebackType

    from typing_extensions import Self

#: Signals passed on to the program: what service managers, schedulers and terminals send to stop
#: or reload a process, and SIGUSR1 (a dump of the window, once the program handles it). gpudiag
#: itself stays to write the report.
PASSED_ON_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGUSR1)
#: What the program gets when gpudiag dies: the stop request a service manager would send, so it
#: still shuts down (and writes its recording) on its own.
PARENT_DEATH_SIGNAL = signal.SIGTERM

_SI_USER = 0  # si_code of kill(2)
_SI_KERNEL = 0x80  # si_code of a signal the kernel generated (the terminal's Ctrl-C, hang-up)
_PR_SET_PDEATHSIG = 1
#: How often the wait wakes when no signal comes: a signal taken by another of gpudiag's threads
#: runs its Python handler only when the main thread returns to Python.
_WAKE_S = 0.25


class SignalRelay:
    """Starts the program and waits for it, passing on what gpudiag receives meanwhile."""

    def __init__(self) -> None:
        self._main = threading.current_thread() is threading.main_thread()
        self._own_group = not _in_terminal_foreground()
        self._manager = _group_signalling_manager() if self._main else None
        self._waits = self._main and hasattr(signal, "sigtimedwait")
        self._waited: set[int] = {*PASSED_ON_SIGNALS, signal.SIGCHLD}
        self._previous: dict[int, object] = {}
        self._program: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Self:
        if self._main:  # signal handlers only from the main thread
            self._previous = {s: signal.signal(s, self._on_signal) for s in PASSED_ON_SIGNALS}
        if self._waits:
            signal.pthread_sigmask(signal.SIG_BLOCK, self._waited)
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        if self._waits:
            # The program has ended: what is still pending has no one to go to.
            while signal.sigtimedwait(self._waited, 0) is not None:
                pass
            signal.pthread_sigmask(signal.SIG_UNBLOCK, self._waited)
        for s, handler in self._previous.items():
            signal.signal(s, handler)  # type: ignore[arg-type]

    def start(self, command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        setup = _child_setup(self._own_group, self._waited if self._waits else set())
        # preexec_fn: the child only calls what _child_setup looked up before the fork.
        self._program = subprocess.Popen(command, env=env, preexec_fn=setup)  # noqa: PLW1509
        return self._program

    def wait(self, every_s: float = 0.0, tick: Callable[[], None] | None = None) -> int:
        """Waits for the program to end on its own, calling `tick` every `every_s` seconds.
        Returns its return code (negative: the signal that ended it)."""
        program = self._program
        assert program is not None
        period = every_s if every_s > 0 and tick is not None else None
        next_tick = time.monotonic() + period if period else None
        while (code := program.poll()) is None:
            timeout = _WAKE_S if next_tick is None else max(0.0, next_tick - time.monotonic())
            self._wait_once(program, min(timeout, _WAKE_S) if self._main else timeout)
            if next_tick is not None and tick is not None and time.monotonic() >= next_tick:
                tick()
                next_tick = time.monotonic() + (period or 0.0)
        return code

    def _wait_once(self, program: subprocess.Popen[bytes], timeout: float) -> None:
        if self._waits:
            info = signal.sigtimedwait(self._waited, timeout)
            if info is not None and info.si_signo != signal.SIGCHLD:
                self._pass_on(info.si_signo, (info.si_pid, info.si_code))
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            program.wait(timeout=timeout)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        """A signal another thread took (or, without sigtimedwait, any): its sender unknown."""
        self._pass_on(signum, None)

    def _pass_on(self, signum: int, sender: tuple[int, int] | None) -> None:
        program = self._program
        if program is None or program.returncode is not None:
            return
        if signum == signal.SIGUSR1 and not _catches(program.pid, signum):
            print(
                "gpudiag: SIGUSR1 not passed on: the program has no handler for it yet "
                "(gpudiag's is installed when it starts using CUDA, with --window)",
                file=sys.stderr,
            )
            return
        if self._sender_reached_the_program(signum, sender):
            return
        with contextlib.suppress(ProcessLookupError):
            program.send_signal(signum)

    def _sender_reached_the_program(self, signum: int, sender: tuple[int, int] | None) -> bool:
        if sender is None:  # only the terminal's Ctrl-C can be told without the sender
            return (
                not self._own_group
                and signum == signal.SIGINT
                and _terminal_sends_sigint_to_the_program()
            )
        pid, code = sender
        if code == _SI_KERNEL:  # the terminal: its foreground group, the program too when shared
            return not self._own_group
        return code == _SI_USER and self._manager is not None and pid == self._manager


def _child_setup(own_group: bool, unblock: set[int]) -> Callable[[], None]:
    """What the program's process does before exec: its own process group, the signals
    unblocked again, and SIGTERM when gpudiag dies. Everything is looked up here, in gpudiag,
    so the forked child only calls."""
    parent = os.getpid()
    prctl = _prctl()

    def setup() -> None:
        if own_group:
            os.setpgid(0, 0)
        if unblock:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, unblock)
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, int(PARENT_DEATH_SIGNAL), 0, 0, 0)
            if os.getppid() != parent:  # gpudiag died before the request took effect
                os.kill(os.getpid(), PARENT_DEATH_SIGNAL)

    return setup


def _prctl() -> Callable[..., int] | None:
    """libc's prctl (Linux), or None elsewhere: the program then outlives a killed gpudiag."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return function


def _in_terminal_foreground() -> bool:
    """gpudiag is in its terminal's foreground process group (the program then shares it, to
    read the terminal)."""
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        try:
            return os.tcgetpgrp(stream.fileno()) == os.getpgrp()
        except (OSError, ValueError, AttributeError):
            continue
    return False


def _terminal_sends_sigint_to_the_program() -> bool:
    """Ctrl-C reaches every process of the terminal's foreground group: when gpudiag is in it,
    so is the program (it shares gpudiag's group), which already got the SIGINT."""
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError, AttributeError):
        return False


def _catches(pid: int, signum: int) -> bool:
    """True when process `pid` has a handler for `signum` (Linux: SigCgt in /proc/<pid>/status).
    SIGUSR1 kills a process without one, so it is passed on only to one that has."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool((int(line.split()[1], 16) >> (signum - 1)) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def _group_signalling_manager() -> int | None:
    """The pid of the systemd manager whose unit gpudiag runs in, when that unit's stop signals go
    to every process of the unit (KillMode=control-group); None when not, or not known."""
    if not os.environ.get("INVOCATION_ID"):  # set by systemd in every unit's processes
        return None
    unit = _systemd_unit()
    manager = os.environ.get("MANAGERPID")  # set in a user manager's units only
    if unit is None or (manager is not None and not manager.isdigit()):
        return None
    scope = ["--user"] if manager else []
    try:
        done = subprocess.run(
            ["systemctl", *scope, "show", "--property=KillMode", "--value", unit],
            capture_output=True,
            text=True,
            timeout=2,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0 or done.stdout.strip() != "control-group":
        return None
    return int(manager) if manager else 1


def _systemd_unit() -> str | None:
    """The unit of gpudiag's cgroup (the last .service or .scope of /proc/self/cgroup)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = [p for p in line.split(":", 2)[-1].split("/") if p.endswith((".service", ".scope"))]
        if parts:
            return parts[-1]
    return None
