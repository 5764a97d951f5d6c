# SPDX-License-Identifier: Apache-2.0
"""``gpudiag run``: run a Python script, module or any program under gpudiag.

A Python script or module runs in this interpreter under a session, so steps, phases, DataLoader
waits and the PyTorch allocator are seen; a session the script opens itself joins that one. Any
other program (after ``--``) runs with gpudiag's library injected through CUDA_INJECTION64_PATH /
NVTX_INJECTION64_PATH and each of its processes writes a recording named after GPUDIAG_RECORD;
each of its Python processes also starts a session of its own at interpreter start
(gpudiag._bootstrap), which records what the injection cannot see, without a GPU too. gpudiag then
analyses the recordings. SIGTERM, SIGHUP and SIGINT sent to gpudiag are passed on to the program
once (cli/_program_signals.py), which is never killed: its own shutdown runs, then the report.
When the program fails, gpudiag exits with EXIT_PROGRAM_FAILED (128 + N when signal N ended it),
after printing its status; a clean exit that recorded nothing stays 0, said to be no all-clear.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import runpy
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

from gpudiag import _bootstrap, _core
from gpudiag._analyze import analyze
from gpudiag._errors import EXIT_OK, EXIT_PROGRAM_FAILED, GpudiagError, UnavailableError
from gpudiag._report import Report
from gpudiag._session import RUN_ORIGIN, Session
from gpudiag.cli._common import add_report_options, emit_report, nothing_observed
from gpudiag.cli._program_signals import SignalRelay

NAME = "run"
HELP = "run a Python script (script.py / -m module) or any program (-- ./prog) under gpudiag"
DESCRIPTION = """\
Run a program under gpudiag, write its recording and print the diagnosis.

  gpudiag run train.py --epochs 1        a Python script, in this interpreter
  gpudiag run -m mypackage.train         a Python module
  gpudiag run -- python train.py         the same, in a Python process of its own
  gpudiag run -- torchrun --nproc-per-node 8 train.py    every rank
  gpudiag run -- ./my_cuda_program args  any program (CUDA injection)

A script that opens its own gpudiag.session() joins the session gpudiag run started (one capture
per process); its report() is the run's report so far.

The recording goes to --record (default gpudiag-<name>-<pid>.gpudiag); a program of several
processes (ranks, workers) leaves one per process, named <stem>-<pid>.gpudiag, analysed together.
After --, every Python process that can import this gpudiag records steps, DataLoader waits and
phases (no GPU needed), and any process that initialises CUDA records its GPU activity; a process
that did neither leaves no recording. The report is printed (to stderr, so the program's own
output stays clean) and written as JSON next to it.

SIGTERM, SIGHUP and SIGINT sent to gpudiag are passed on to a program run after --, once: the
program runs in a process group of its own (outside a terminal's foreground), and a signal its
sender already sent to the program (the terminal's Ctrl-C, systemd's KillMode=control-group) is
not sent again. gpudiag waits for it to shut down on its own (it is never killed), then writes the
report; should gpudiag itself die, the program gets SIGTERM (Linux). When the program fails,
gpudiag prints its status and exits with 5 (128 + N when signal N ended it). A program that exits
0 having recorded nothing gives 0, with a line saying that nothing was observed.

For services: --window 600 keeps only the last ten minutes of events (written at exit; SIGUSR1
to gpudiag writes them now, as <stem>-dump-<pid>-<time>-<n>-requested beside the recording), and
--report-every 60 prints a line of the diagnosis so far each minute."""

INJECTION_VARIABLES = ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH")


def library_path() -> Path:
    """The packaged libgpudiag.so (the injection library)."""
    return Path(__file__).resolve().parent.parent / "lib" / "libgpudiag.so"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--record",
        metavar="PATH",
        help="recording to write (default: gpudiag-<name>-<pid>.gpudiag)",
    )
    p.add_argument(
        "-m", dest="module", metavar="MODULE", help="run a Python module (like python -m)"
    )
    p.add_argument("--no-torch", action="store_true", help="do not instrument PyTorch")
    p.add_argument("--no-dataloader", action="store_true", help="do not time DataLoader waits")
    p.add_argument(
        "--memory-history",
        type=int,
        metavar="N",
        default=None,
        help="keep PyTorch's allocation history (at most N entries) for stacks",
    )
    p.add_argument(
        "--oom-snapshot",
        metavar="PATH",
        default=None,
        help="dump a torch memory snapshot here on CUDA out-of-memory",
    )
    p.add_argument(
        "--window",
        type=float,
        metavar="SECONDS",
        default=0.0,
        help="keep only the last SECONDS of events (for services), written at exit; "
        "SIGUSR1 to gpudiag writes them now, beside the recording",
    )
    p.add_argument(
        "--http",
        metavar="HOST:PORT",
        default=os.environ.get("GPUDIAG_HTTP") or None,
        help="answer /metrics, /report, /dump, /healthz and /capture/pause|resume over HTTP "
        "there while the program runs (127.0.0.1:0 = any free port, printed; another address "
        "needs GPUDIAG_HTTP_TOKEN; default: $GPUDIAG_HTTP; docs/http.md)",
    )
    p.add_argument(
        "--report-every",
        type=float,
        metavar="SECONDS",
        default=0.0,
        help="while the program runs, print a line of the diagnosis so far this often",
    )
    add_report_options(p)
    p.add_argument(
        "target", nargs=argparse.REMAINDER, help="script.py [args], or -- program [args]"
    )


def _default_record(name: str) -> Path:
    stem = Path(name).stem or "program"
    return Path(f"gpudiag-{stem}-{os.getpid()}.gpudiag")


def run(args: argparse.Namespace) -> int:
    from gpudiag.cli import UsageError

    target = list(args.target)
    if args.module:
        return _run_python(args, module=args.module, argv=target)
    if not target:
        raise UsageError("gpudiag run: name a script.py, -m module, or -- program")
    if target[0] == "--":
        if len(target) < 2:
            raise UsageError("gpudiag run: nothing to run after --")
        return _run_program(args, target[1:])
    if target[0].endswith(".py"):
        return _run_python(args, script=target[0], argv=target[1:])
    return _run_program(args, target)


def _finish(
    report: Report,
    args: argparse.Namespace,
    record: Path,
    returncode: int,
    recordings: list[Path] | None = None,
    notes: list[str] | None = None,
) -> int:
    """Prints and writes the report; returns the exit code. `returncode` is the program's
    (negative: the signal that ended it)."""
    if notes:
        report = _with_notes(report, notes)
    json_path = args.json or str(record.with_suffix(".report.json"))
    args.json = json_path
    code = emit_report(report, args, out=sys.stderr)
    if recordings is not None and len(recordings) > 1:
        names = ", ".join(str(r) for r in recordings)
        print(
            f"gpudiag: {len(recordings)} recordings (one per process): {names}; report {json_path}",
            file=sys.stderr,
        )
    else:
        print(f"gpudiag: recording {record}, report {json_path}", file=sys.stderr)
    for note in notes or []:
        print(f"gpudiag: {note}", file=sys.stderr)
    if returncode != 0:  # the program's failure is the news, and decides the exit code
        return _program_failed(returncode)
    if report.complete and nothing_observed(report):
        # emit_report said plainly that nothing was observed; the exit code stays the program's
        # clean 0, so a service manager does not mark a graceful stop as failed.
        return _nothing_recorded("the report holds 0 events")
    return code


def _nothing_recorded(why: str) -> int:
    """Says that the run recorded nothing (never an all-clear) and returns the program's 0."""
    print(
        f"gpudiag: nothing was recorded ({why}): no events were observed, so this is no "
        f"all-clear; exit code {EXIT_OK} is the program's own clean exit",
        file=sys.stderr,
    )
    return EXIT_OK


def _program_failed(returncode: int) -> int:
    """Says how the program ended and returns gpudiag's exit code for it."""
    if returncode < 0:
        name = _signal_name(-returncode)
        print(
            f"gpudiag: the program was ended by signal {-returncode} ({name}); "
            f"exit code {128 - returncode}",
            file=sys.stderr,
        )
        return 128 - returncode
    print(
        f"gpudiag: the program failed with status {returncode}; exit code {EXIT_PROGRAM_FAILED}",
        file=sys.stderr,
    )
    return EXIT_PROGRAM_FAILED


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return "unknown signal"


def _with_notes(report: Report, notes: list[str]) -> Report:
    """The report with gpudiag run's own notes added (what an option could not do)."""
    data = report.to_dict()
    data["notes"] = [*data.get("notes", []), *notes]
    return Report(data)


def _run_python(
    args: argparse.Namespace,
    *,
    script: str | None = None,
    module: str | None = None,
    argv: list[str],
) -> int:
    from gpudiag.cli import UsageError

    name = script or module or "python"
    if script is not None and not Path(script).is_file():
        raise UsageError(f"gpudiag run: no such script: {script}")
    record = Path(args.record) if args.record else _default_record(name)
    begun = time.monotonic()
    session = Session(
        record,
        torch=False if args.no_torch else "auto",
        dataloader=not args.no_dataloader,
        memory_history=args.memory_history,
        oom_snapshot=args.oom_snapshot,
        report_period_s=max(args.report_every, 0.0),
        record_window_s=max(args.window, 0.0),
        http=args.http,
        on_report=(
            (lambda r: print(progress_line(r, time.monotonic() - begun), file=sys.stderr))
            if args.report_every > 0
            else None
        ),
        _origin=RUN_ORIGIN,
    )
    saved_argv, saved_path0 = sys.argv[:], sys.path[0] if sys.path else None
    sys.argv = [name, *argv]
    previous_usr1 = None
    if script is not None:
        sys.path.insert(0, str(Path(script).resolve().parent))
    status = 0
    try:
        with session:
            _bootstrap.say_http(session)
            if args.window > 0 and threading.current_thread() is threading.main_thread():
                previous_usr1 = signal.signal(signal.SIGUSR1, lambda *_: session.request_dump())
            try:
                if script is not None:
                    runpy.run_path(script, run_name="__main__")
                else:
                    runpy.run_module(module or "", run_name="__main__", alter_sys=True)
            except SystemExit as e:
                status = _system_exit_status(e)
            except Exception as e:  # noqa: BLE001 - the program's own error, reported as Python would
                session.explain_exception(e)  # a CUDA out-of-memory error gets gpudiag's note
                print_program_traceback(e)
                status = 1
    finally:
        if previous_usr1 is not None:
            signal.signal(signal.SIGUSR1, previous_usr1)
        sys.argv = saved_argv
        if script is not None and sys.path and saved_path0 is not None:
            sys.path.pop(0)
    notes = _bootstrap.unused_option_notes(args.memory_history, args.oom_snapshot)
    return _finish(session.report() or Report(_core.Report()), args, record, status, notes=notes)


def _system_exit_status(e: SystemExit) -> int:
    """The status sys.exit(code) gives, as the interpreter would (printing a message code)."""
    if e.code is None or isinstance(e.code, int):
        return int(e.code or 0)
    print(e.code, file=sys.stderr)
    return 1


def print_program_traceback(exc: BaseException) -> None:
    """Prints the program's traceback as Python would, without gpudiag's frames: the runner
    above the program's own code, and gpudiag's wrappers inside it (the frame that raised is
    kept, whoever's it is)."""
    shown = traceback.TracebackException.from_exception(exc)
    pending, seen = [shown], set()
    while pending:
        te = pending.pop()
        if id(te) in seen:
            continue
        seen.add(id(te))
        frames = list(te.stack)
        kept = [f for i, f in enumerate(frames) if i == len(frames) - 1 or not _ours(f.filename)]
        te.stack = traceback.StackSummary.from_list(kept)
        pending.extend(t for t in (te.__cause__, te.__context__) if t is not None)
    print("".join(shown.format()), end="", file=sys.stderr)


_PACKAGE = str(Path(__file__).resolve().parent.parent)


def _ours(filename: str) -> bool:
    """A frame of gpudiag itself or of runpy, which runs the program for it."""
    if filename in ("<frozen runpy>", runpy.__file__):
        return True
    return str(Path(filename).resolve()).startswith(_PACKAGE + os.sep)


def _run_program(args: argparse.Namespace, command: list[str]) -> int:
    library = library_path()
    if not library.is_file():
        raise UnavailableError(
            f"the injection library is missing from this installation ({library}); "
            "reinstall gpudiag"
        )
    record = (Path(args.record) if args.record else _default_record(command[0])).resolve()
    if record.exists():
        record.unlink()  # a stale recording must not pass for this run's
    env = _program_environment(args, record, library)
    started = time.time() - 1.0  # file times come from a coarser clock
    begun = time.monotonic()

    def report_progress() -> None:
        recordings = _process_recordings(record, started)
        if not recordings:
            print("gpudiag: no recording yet", file=sys.stderr)
            return
        try:
            line = progress_line(analyze(recordings), time.monotonic() - begun)
        except GpudiagError as e:
            line = f"gpudiag: the recording so far cannot be read yet ({e})"
        print(line, file=sys.stderr)

    with SignalRelay() as relay:
        try:
            relay.start(command, env)
        except FileNotFoundError:
            from gpudiag.cli import UsageError

            raise UsageError(f"gpudiag run: no such program: {command[0]}") from None
        returncode = relay.wait(every_s=args.report_every, tick=report_progress)
    notes = _collect_notes(record, started)
    recordings = _process_recordings(record, started)
    if not recordings:
        for note in notes:
            print(f"gpudiag: {note}", file=sys.stderr)
        message = (
            f"the program wrote no recording ({_per_process_name(record)}): none of its Python "
            "processes recorded a step, input wait or phase, and none initialised CUDA (or this "
            "machine has no GPU driver for the injection to load into)"
        )
        print(f"gpudiag: {message}", file=sys.stderr)
        if returncode != 0:  # the program's failure is the news
            return _program_failed(returncode)
        return _nothing_recorded("no recording")
    if len(recordings) == 1:
        recordings[0].replace(record)  # one process: the recording is where it was asked for
        recordings = [record]
    try:
        report = analyze(recordings)
    except GpudiagError as e:
        if returncode == 0:
            raise
        print(f"gpudiag: the program's recordings cannot be read: {e}", file=sys.stderr)
        return _program_failed(returncode)
    return _finish(report, args, record, returncode, recordings, notes)


def _program_environment(args: argparse.Namespace, record: Path, library: Path) -> dict[str, str]:
    """The program's environment: the CUDA and NVTX injection, and the Python bootstrap."""
    env = dict(os.environ)
    for variable in INJECTION_VARIABLES:
        env[variable] = str(library)
    # Every process that initialises CUDA writes its own <stem>-<pid> file (ranks and child
    # processes all read this one variable).
    env["GPUDIAG_RECORD"] = str(record)
    if args.http:
        env["GPUDIAG_HTTP"] = args.http  # each process's session, and the injected library's
    if args.window > 0:
        env["GPUDIAG_WINDOW_S"] = str(args.window)
        env["GPUDIAG_DUMP_SIGNAL"] = "USR1"  # the injected library asks for a dump on it
    python_path = [str(_bootstrap.site_folder())]
    if env.get("PYTHONPATH"):
        python_path.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(python_path)
    env[_bootstrap.SETTINGS_VARIABLE] = _bootstrap.settings(
        record=record,
        injection=library,
        torch=False if args.no_torch else "auto",
        dataloader=not args.no_dataloader,
        memory_history=args.memory_history,
        oom_snapshot=args.oom_snapshot,
        window_s=max(args.window, 0.0),
    )
    return env


def _collect_notes(record: Path, since: float) -> list[str]:
    """The notes the program's Python processes left (and removes their files), each once."""
    notes: list[str] = []
    for path in _process_files(record, since, ".notes"):
        with contextlib.suppress(OSError):
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip() and line not in notes:
                    notes.append(line)
            path.unlink()
    return notes


def progress_line(report: Report, elapsed_s: float) -> str:
    """One line of the diagnosis so far, for --report-every."""
    findings = report.findings
    what = (
        ", ".join(f"{f.id} ({f.severity})" for f in findings[:4])
        + (f" and {len(findings) - 4} more" if len(findings) > 4 else "")
        if findings
        else "no finding"
    )
    scope = "" if report.complete else " in the part written so far"
    return (
        f"gpudiag: after {elapsed_s:.0f} s, {report.input.get('events', 0)} events: {what}{scope}"
    )


def _per_process_name(record: Path) -> str:
    return str(record.with_name(f"{record.stem}-<pid>{record.suffix}"))


def _process_recordings(record: Path, since: float) -> list[Path]:
    """The recordings this run's processes wrote (<stem>-<pid><suffix>, not older than the
    run), by pid."""
    return _process_files(record, since, record.suffix)


def _process_files(record: Path, since: float, suffix: str) -> list[Path]:
    """This run's per-process files <stem>-<pid><suffix>, by pid."""
    pattern = re.compile(re.escape(record.stem) + r"-(\d+)" + re.escape(suffix) + "$")
    found: list[tuple[int, Path]] = []
    for path in record.parent.iterdir():
        match = pattern.match(path.name)
        if match and path.is_file() and path.stat().st_mtime >= since:
            found.append((int(match.group(1)), path))
    return [path for _, path in sorted(found)]
