# SPDX-License-Identifier: Apache-2.0
"""gpudiag in every Python process that ``gpudiag run -- <program>`` starts.

The CUDA injection alone records a process only once it initialises CUDA, and sees no steps,
DataLoader waits, phases or allocator figures. So ``gpudiag run --`` also puts the folder
``_bootstrap_site`` first on PYTHONPATH and describes its options in GPUDIAG_RUN_PYTHON; the
``sitecustomize.py`` there calls :func:`start` at interpreter start in every Python process of
the program (``python train.py``, ``python -m pkg``, torchrun and the ranks it spawns), which then
records to ``<stem>-<pid>.gpudiag``, the name the injection would use.

One recording per process: once its session runs, the process drops CUDA_INJECTION64_PATH and
NVTX_INJECTION64_PATH from its own environment, so CUDA never loads the injected copy of gpudiag
into it (two copies would both write ``<stem>-<pid>.gpudiag``; the session captures CUPTI itself).
A process into which the injected library is already loaded (Python embedded in a CUDA program)
keeps the injection's session and starts none. Its own children inherit the environment without
the injection: Python ones start their own session (or, when they cannot, put the injection back
for themselves), other programs they start are not injected.

A process that saw nothing (no step, phase, input wait, GPU activity or device memory: a
launcher, a spawned DataLoader worker) leaves no recording, as the injection leaves none for a
process that never uses CUDA; the program ``gpudiag run`` started keeps its own when no other
process left one, so a program that fails early still gets its (empty) report. Whatever goes
wrong turns gpudiag off for that process and leaves a note for ``gpudiag run`` to print
(``<stem>-<pid>.notes`` beside the recording); the program never notices.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from gpudiag._session import RUN_ORIGIN, Session, cuda_initialised

#: The variable that carries ``gpudiag run``'s options to the Python processes (JSON).
SETTINGS_VARIABLE = "GPUDIAG_RUN_PYTHON"
INJECTION_VARIABLES = ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH")
#: Evidence every process of a GPU machine has (NVML samples the whole device): no sign that the
#: process itself did anything.
_MACHINE_WIDE_EVIDENCE = {"device_health"}


def site_folder() -> Path:
    """The folder ``gpudiag run --`` puts first on PYTHONPATH (it holds sitecustomize.py)."""
    return Path(__file__).resolve().parent / "_bootstrap_site"


def settings(
    *,
    record: Path,
    injection: Path,
    torch: bool | str,
    dataloader: bool,
    memory_history: int | None,
    oom_snapshot: str | None,
    window_s: float,
) -> str:
    """GPUDIAG_RUN_PYTHON's value for a run (read back by :func:`start` in each process)."""
    from gpudiag import __version__

    return json.dumps(
        {
            "version": __version__,
            "record": str(record),
            "notes": str(notes_path(record, "{pid}")),
            "injection": str(injection),
            "launcher": os.getpid(),
            "started": time.time() - 1.0,  # file times come from a coarser clock
            "torch": torch,
            "dataloader": dataloader,
            "memory_history": memory_history,
            "oom_snapshot": oom_snapshot,
            "window_s": window_s,
        }
    )


def per_process_path(record: Path, pid: int | str) -> Path:
    """``run.gpudiag`` -> ``run-<pid>.gpudiag``: the name the injected library gives each
    process' recording (api/record_path.hpp)."""
    text = str(record)
    if "%p" in text:
        return Path(text.replace("%p", str(pid)))
    return record.with_name(f"{record.stem}-{pid}{record.suffix}")


def notes_path(record: Path, pid: int | str) -> Path:
    """Where the process with `pid` leaves its notes for ``gpudiag run``."""
    return per_process_path(record, pid).with_suffix(".notes")


def unused_option_notes(memory_history: int | None, oom_snapshot: object) -> list[str]:
    """What --memory-history and --oom-snapshot did not do in a process that never initialised
    CUDA (both act on PyTorch's CUDA allocator)."""
    if cuda_initialised():
        return []
    notes = []
    if memory_history is not None:
        notes.append(
            "--memory-history had no effect: the program never initialised CUDA, so PyTorch kept "
            "no allocation history"
        )
    if oom_snapshot is not None:
        notes.append(
            "--oom-snapshot had no effect: the program never initialised CUDA, so no CUDA "
            "out-of-memory error could occur"
        )
    return notes


def start(options: dict[str, Any]) -> None:
    """Starts this process' session (called by sitecustomize.py at interpreter start). Never
    raises: a failure only leaves a note, and the injection in place for this process."""
    try:
        injection = Path(options["injection"])
        if _already_loaded(injection):
            return  # the injected library records this process (it initialised CUDA first)
        record = per_process_path(Path(options["record"]), os.getpid())
        session = Session(
            record,
            torch=options["torch"],
            dataloader=bool(options["dataloader"]),
            memory_history=options["memory_history"],
            oom_snapshot=options["oom_snapshot"],
            record_window_s=float(options["window_s"]),
            http=os.environ.get("GPUDIAG_HTTP") or None,
            _origin=RUN_ORIGIN,
        ).start()
        say_http(session)
    except Exception as e:  # noqa: BLE001 - the program must run on without gpudiag
        restore_injection(options)
        leave_note(options, f"no session in {_process_name()}, only the CUDA injection: {e}")
        return
    for variable in INJECTION_VARIABLES:
        if os.environ.get(variable) == str(injection):
            del os.environ[variable]  # before the program first uses CUDA: never loaded here
    if float(options["window_s"]) > 0 and os.environ.get("GPUDIAG_DUMP_SIGNAL") == "USR1":
        with contextlib.suppress(ValueError, OSError):  # not the main thread: no dump signal
            signal.signal(signal.SIGUSR1, lambda *_: session.request_dump())
    # Registered after the session's own exit handler, so it runs first (last in, first out).
    atexit.register(_finish, session, options, os.getpid())


def say_http(session: Session) -> None:
    """Where the session answers HTTP (GPUDIAG_HTTP; a port of 0 is picked now), or why not,
    on stderr: the operator's only way to learn a picked port."""
    if not session.http:
        return
    url = session.http_url
    where = f"answers HTTP on {url}" if url else f"no HTTP: {session.http_status()['reason']}"
    print(f"gpudiag: {_process_name()} {where}", file=sys.stderr, flush=True)


def restore_injection(options: dict[str, Any]) -> None:
    """Puts the injection back for a process that records no session of its own (its parent,
    a Python process with a session, dropped it from the environment)."""
    for variable in INJECTION_VARIABLES:
        os.environ.setdefault(variable, str(options.get("injection", "")))


def leave_note(options: dict[str, Any], note: str) -> None:
    with contextlib.suppress(Exception):
        path = Path(str(options["notes"]).replace("{pid}", str(os.getpid())))
        with path.open("a", encoding="utf-8") as f:
            f.write(note.replace("\n", " ") + "\n")


def _finish(session: Session, options: dict[str, Any], pid: int) -> None:
    """At interpreter exit (after an uncaught exception too): stops the session, which finishes
    the recording, then keeps it only if this process did something worth a report."""
    if os.getpid() != pid:
        return  # a forked child: the recording is its parent's
    with contextlib.suppress(Exception):
        if session.running:
            session.stop()
        notes = unused_option_notes(session.memory_history, session.oom_snapshot)
        record = session.record_path
        if record is None or _worth_keeping(session, options):
            for note in notes:
                leave_note(options, note)
        else:
            record.unlink()


def _worth_keeping(session: Session, options: dict[str, Any]) -> bool:
    observed = session.report().observed
    if observed is None or set(observed) - _MACHINE_WIDE_EVIDENCE:
        return True
    if os.getppid() != int(options["launcher"]):
        return False
    # The program gpudiag run started: its report, even an empty one, unless another process
    # of the program left a recording.
    record = Path(options["record"])
    mine = per_process_path(record, os.getpid())
    others = (
        p
        for p in record.parent.glob(f"{record.stem}-*{record.suffix}")
        if p != mine and p.stat().st_mtime >= float(options["started"])
    )
    return next(others, None) is None


def _already_loaded(library: Path) -> bool:
    """True when `library` is mapped into this process (Linux: /proc/self/maps)."""
    try:
        maps = Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return str(library.resolve()) in maps


def _process_name() -> str:
    argv = getattr(sys, "argv", [])  # not set yet in an embedded interpreter
    return f"{Path(sys.executable).name} (pid {os.getpid()}, {' '.join(argv[:2])})"
