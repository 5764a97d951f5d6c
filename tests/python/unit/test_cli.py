# SPDX-License-Identifier: Apache-2.0
"""The gpudiag command line: parsing, exit codes, and each subcommand's error paths."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import gpudiag
from gpudiag import Report, cli
from gpudiag._errors import (
    EXIT_FINDINGS,
    EXIT_INPUT,
    EXIT_OK,
    EXIT_PROGRAM_FAILED,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
)
from gpudiag.cli import _common, _program_signals, demo
from gpudiag.cli import run as run_cmd


def test_help_documents_every_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for code in (
        EXIT_OK,
        EXIT_FINDINGS,
        EXIT_USAGE,
        EXIT_INPUT,
        EXIT_UNAVAILABLE,
        EXIT_PROGRAM_FAILED,
        70,
        130,
    ):
        assert f"\n  {code} " in out
    for command in ("run", "analyze", "export", "demo"):
        assert command in out


def _help(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    return capsys.readouterr().out


def test_each_subcommand_lists_only_its_own_exit_codes(capsys) -> None:
    run_help = _help("run", capsys)
    assert f"\n  {EXIT_PROGRAM_FAILED} " in run_help
    assert "\n  128+N " in run_help
    analyze_help = _help("analyze", capsys)
    assert f"\n  {EXIT_INPUT} " in analyze_help
    assert f"\n  {EXIT_PROGRAM_FAILED} " not in analyze_help
    assert "128+N" not in analyze_help
    assert "the program" not in analyze_help


def test_demo_help_says_the_recording_is_simulated(capsys) -> None:
    text = " ".join(_help("demo", capsys).split())
    assert "simulated" in text
    assert "real training run" not in text


@pytest.mark.usefixtures("capsys")  # keeps the usage text off the test output
def test_no_command_is_a_usage_error() -> None:
    assert cli.main([]) == EXIT_USAGE


def test_unknown_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["analyze", "--bogus", "x"]) == EXIT_USAGE
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_missing_input_is_an_input_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["analyze", "/nonexistent/trace.json"]) == EXIT_INPUT
    assert "/nonexistent/trace.json" in capsys.readouterr().err


def test_garbage_input_is_an_input_error(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "notatrace.bin"
    bad.write_bytes(b"\x00\x01garbage" * 10)
    assert cli.main(["analyze", str(bad)]) == EXIT_INPUT
    assert "notatrace.bin" in capsys.readouterr().err


@pytest.mark.usefixtures("capsys")
def test_export_needs_a_target() -> None:
    assert cli.main(["export", "x.json"]) == EXIT_USAGE
    assert cli.main(["export", "x.json", "--chrome", "a", "--prometheus", "b"]) == EXIT_USAGE


@pytest.mark.usefixtures("capsys")
def test_export_missing_input_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    assert cli.main(["export", "/nonexistent.json", "--chrome", str(out)]) == EXIT_INPUT


def test_fail_on_maps_severity_to_exit_code(starved_report: Report) -> None:
    r = starved_report
    worst = r.worst_severity()
    assert worst is not None
    assert _common.exit_code_for(r, None) == EXIT_OK
    assert _common.exit_code_for(r, worst) == EXIT_FINDINGS
    assert _common.exit_code_for(r, "info") == EXIT_FINDINGS
    quiet = r.to_dict()
    quiet["findings"] = [f for f in quiet["findings"] if f["severity"] == "info"]
    assert _common.exit_code_for(Report(quiet), "warning") == EXIT_OK


def test_emit_report_prints_text_or_json(tmp_path: Path, capsys, starved_report: Report) -> None:
    import argparse

    r = starved_report
    args = argparse.Namespace(
        format="json", json=str(tmp_path / "r.json"), html=str(tmp_path / "r.html"), fail_on="info"
    )
    assert _common.emit_report(r, args) == EXIT_FINDINGS
    assert json.loads(capsys.readouterr().out) == r.to_dict()
    assert Report.load(tmp_path / "r.json").to_dict() == r.to_dict()
    assert "<svg" in (tmp_path / "r.html").read_text()
    args.format = "text"
    _common.emit_report(r, args)
    assert capsys.readouterr().out == r.summary()


def test_demo_without_the_bundled_recording_says_so(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setattr(demo, "demo_path", lambda: tmp_path / "demo.gpudiag")
    assert cli.main(["demo"]) == EXIT_UNAVAILABLE
    assert "bundled demo recording is missing" in capsys.readouterr().err


def fake_library(monkeypatch, tmp_path: Path) -> Path:
    """An empty injection library in place of the packaged one: without a GPU it never loads,
    so `gpudiag run --` tests exercise the CLI around the program."""
    lib = tmp_path / "libgpudiag.so"
    lib.write_bytes(b"")
    monkeypatch.setattr(run_cmd, "library_path", lambda: lib)
    return lib


@pytest.mark.usefixtures("capsys")
def test_run_needs_a_target() -> None:
    assert cli.main(["run"]) == EXIT_USAGE
    assert cli.main(["run", "--"]) == EXIT_USAGE
    assert cli.main(["run", "no_such_script.py"]) == EXIT_USAGE


def test_run_program_without_the_library_is_unavailable(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setattr(run_cmd, "library_path", lambda: tmp_path / "missing.so")
    assert cli.main(["run", "--", "true"]) == EXIT_UNAVAILABLE
    assert "injection library is missing" in capsys.readouterr().err


def test_run_program_sets_the_injection_environment(monkeypatch, tmp_path, capsys) -> None:
    lib = fake_library(monkeypatch, tmp_path)
    env_dump = tmp_path / "env.txt"
    record = tmp_path / "prog.gpudiag"
    program = f"env > {env_dump}"  # a program that is not Python: the injection alone
    code = cli.main(["run", "--record", str(record), "--", "sh", "-c", program])
    env = dict(line.split("=", 1) for line in env_dump.read_text().splitlines() if "=" in line)
    assert env["CUDA_INJECTION64_PATH"] == str(lib)
    assert env["NVTX_INJECTION64_PATH"] == str(lib)
    assert env["GPUDIAG_RECORD"] == str(record.resolve())
    # No GPU here: the injection never loads, so there is no recording, and the CLI says why;
    # the program's clean exit stays 0 (a service manager must not see a failure), said plainly
    # to be no all-clear.
    assert code == EXIT_OK
    err = capsys.readouterr().err
    assert "wrote no recording" in err
    assert "nothing was recorded (no recording): no events were observed" in err
    assert "no all-clear" in err


@pytest.mark.usefixtures("capsys")
def test_run_unknown_program_is_a_usage_error(monkeypatch, tmp_path) -> None:
    fake_library(monkeypatch, tmp_path)
    assert cli.main(["run", "--", "/no/such/program"]) == EXIT_USAGE


def test_run_python_script_under_a_session(monkeypatch, tmp_path, fake_backend, capsys) -> None:
    from gpudiag import _session

    monkeypatch.setattr(_session, "_create_native", fake_backend)
    script = tmp_path / "train.py"
    script.write_text(
        "import sys, gpudiag\n"
        "assert sys.argv[1:] == ['--epochs', '1'], sys.argv\n"
        "for i in range(3):\n"
        "    gpudiag.step()\n"
        "sys.exit(3)\n"
    )
    code = cli.main(
        ["run", "--no-torch", "--record", str(tmp_path / "t.gpudiag"), str(script), "--epochs", "1"]
    )
    assert code == EXIT_PROGRAM_FAILED  # not 3, which would read as an input error
    backend = fake_backend.last
    assert backend.options.record_path == str(tmp_path / "t.gpudiag")
    assert backend.names().count("step_begin") == 3
    assert "stop" in backend.names()
    err = capsys.readouterr().err
    assert "the program failed with status 3" in err  # the program's own status is printed
    assert json.loads((tmp_path / "t.report.json").read_text())["notes"]


def _run_script(tmp_path: Path, body: str, *options: str) -> int:
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(body))
    return cli.main(
        ["run", "--no-torch", *options, "--record", str(tmp_path / "p.gpudiag"), str(script)]
    )


def test_run_script_that_raises_fails_with_its_report_and_a_traceback_of_its_own(
    tmp_path, capsys
) -> None:
    code = _run_script(
        tmp_path,
        """
        import gpudiag
        def train():
            for i in range(3):
                gpudiag.step()
            raise ValueError("boom")
        train()
        """,
    )
    assert code == EXIT_PROGRAM_FAILED
    err = capsys.readouterr().err
    traceback_text = err[: err.index("ValueError: boom")]
    assert traceback_text.startswith("Traceback (most recent call last):")
    assert 'prog.py", line 7, in <module>' in traceback_text
    assert "runpy" not in traceback_text  # neither runpy's frames nor gpudiag's runner
    assert "gpudiag" not in traceback_text.replace("import gpudiag", "")
    assert "gpudiag 0.1.0 diagnosis" in err or "diagnosis" in err  # the report is printed
    assert (tmp_path / "p.report.json").is_file()
    assert "the program failed with status 1; exit code 5" in err


def test_run_script_that_exits_with_status_zero_succeeds(tmp_path, capsys) -> None:
    body = "import sys, gpudiag\nfor i in range(4):\n    gpudiag.step()\nsys.exit(0)\n"
    assert _run_script(tmp_path, body) == EXIT_OK
    assert "failed" not in capsys.readouterr().err


def test_run_says_when_the_memory_options_had_no_effect(tmp_path, capsys) -> None:
    body = "import gpudiag\nfor i in range(3):\n    gpudiag.step()\n"
    oom = str(tmp_path / "oom.pickle")
    assert _run_script(tmp_path, body, "--memory-history", "100", "--oom-snapshot", oom) == EXIT_OK
    err = capsys.readouterr().err
    assert "gpudiag: --memory-history had no effect: the program never initialised CUDA" in err
    assert "gpudiag: --oom-snapshot had no effect" in err
    notes = json.loads((tmp_path / "p.report.json").read_text())["notes"]
    assert sum(n.startswith(("--memory-history", "--oom-snapshot")) for n in notes) == 2


def test_run_script_that_records_nothing_is_no_all_clear(tmp_path, capsys) -> None:
    assert _run_script(tmp_path, "x = 1\n") == EXIT_OK  # the program's clean exit stands
    err = capsys.readouterr().err
    assert "nothing was observed: the report holds 0 events" in err
    assert "nothing was recorded (the report holds 0 events): no events were observed" in err
    # ... unless the program failed: then that is the news, and the exit code.
    assert _run_script(tmp_path, "raise SystemExit('bad config')\n") == EXIT_PROGRAM_FAILED
    err = capsys.readouterr().err
    assert "bad config" in err  # printed as the interpreter would
    assert err.rstrip().endswith("the program failed with status 1; exit code 5")


def test_module_entry_point_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gpudiag", "--version"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0
    assert result.stdout.strip() == f"gpudiag {gpudiag.__version__}"


def test_progress_bar_waits_then_draws(monkeypatch) -> None:
    import io

    stream = io.StringIO()
    bar = _common.ProgressBar(stream, enabled=True)
    bar(10, 100)
    assert stream.getvalue() == ""  # too early: short imports stay quiet
    monkeypatch.setattr(_common.ProgressBar, "DELAY_S", 0.0)
    bar = _common.ProgressBar(stream, enabled=True)
    bar(50, 100)
    bar.close()
    assert "50.0 %" in stream.getvalue()
    assert stream.getvalue().endswith("\n")


def _recording_program(tmp_path: Path, processes: int) -> Path:
    """A Python program of `processes` processes, each marking a step: each records itself (the
    session gpudiag run's bootstrap starts in every Python process), as <stem>-<pid>."""
    script = tmp_path / "ranks.py"
    script.write_text(
        textwrap.dedent(f"""
        import subprocess, sys
        import gpudiag
        gpudiag.step(0)
        gpudiag.step(1)
        if len(sys.argv) == 1:
            for _ in range({processes - 1}):
                subprocess.run([sys.executable, __file__, "child"], check=True)
    """)
    )
    return script


def test_run_program_with_one_process_leaves_the_recording_asked_for(
    monkeypatch, tmp_path, capsys
) -> None:
    fake_library(monkeypatch, tmp_path)
    record = tmp_path / "one.gpudiag"
    cli.main(
        ["run", "--record", str(record), "--", sys.executable, str(_recording_program(tmp_path, 1))]
    )
    assert record.is_file()
    assert sorted(p.name for p in tmp_path.glob("one*.gpudiag")) == ["one.gpudiag"]
    assert f"recording {record}" in capsys.readouterr().err


def test_run_program_with_several_processes_keeps_one_recording_each(
    monkeypatch, tmp_path, capsys
) -> None:
    fake_library(monkeypatch, tmp_path)
    record = tmp_path / "job.gpudiag"
    cli.main(
        ["run", "--record", str(record), "--", sys.executable, str(_recording_program(tmp_path, 3))]
    )
    per_process = sorted(tmp_path.glob("job-*.gpudiag"))
    assert len(per_process) == 3
    assert not record.exists()
    assert "3 recordings (one per process)" in capsys.readouterr().err


def _graceful_service(tmp_path: Path) -> Path:
    """A service that shuts down gracefully on SIGTERM/SIGHUP/SIGINT: it writes which signal it
    got, takes a moment to drain, and exits with 0 (or 7 for SIGHUP, to see the status pass)."""
    script = tmp_path / "service.py"
    script.write_text(
        textwrap.dedent(f"""
        import pathlib, signal, sys, time
        out = pathlib.Path({str(tmp_path / "shutdown.txt")!r})
        def stop(signum, frame):
            time.sleep(0.3)  # drains its queue: must not be cut short
            out.write_text(signal.Signals(signum).name)
            sys.exit(7 if signum == signal.SIGHUP else 0)
        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(s, stop)
        pathlib.Path({str(tmp_path / "ready")!r}).write_text("")
        while True:
            time.sleep(0.05)
    """)
    )
    return script


@pytest.mark.parametrize(
    ("signum", "expected"), [(signal.SIGTERM, 0), (signal.SIGHUP, 7), (signal.SIGINT, 0)]
)
def test_run_passes_signals_on_and_waits_for_the_programs_own_shutdown(
    monkeypatch, tmp_path, capsys, signum, expected
) -> None:
    fake_library(monkeypatch, tmp_path)
    monkeypatch.setattr(_program_signals, "_in_terminal_foreground", lambda: False)
    service = _graceful_service(tmp_path)

    def send_when_ready() -> None:
        deadline = time.monotonic() + 30
        while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signum)  # to gpudiag, as a service manager would

    before = signal.getsignal(signum)
    sender = threading.Thread(target=send_when_ready)
    sender.start()
    code = cli.main(
        ["run", "--record", str(tmp_path / "s.gpudiag"), "--", sys.executable, str(service)]
    )
    sender.join()
    assert (tmp_path / "shutdown.txt").read_text() == signal.Signals(signum).name
    err = capsys.readouterr().err
    if expected == 0:
        # A clean shutdown: its Python session recorded nothing, which is no all-clear, and
        # the exit code is the program's 0.
        assert code == EXIT_OK
        assert "nothing was observed" in err
        assert "no events were observed, so this is no all-clear" in err
    else:
        assert code == EXIT_PROGRAM_FAILED
        assert "the program failed with status 7" in err  # the program's own status
    assert signal.getsignal(signum) == before  # gpudiag's handlers are gone again


def test_run_exits_with_the_status_of_a_program_ended_by_a_signal(
    monkeypatch, tmp_path, capsys
) -> None:
    fake_library(monkeypatch, tmp_path)
    program = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    record = str(tmp_path / "k.gpudiag")
    assert cli.main(["run", "--record", record, "--", sys.executable, "-c", program]) == 137
    assert "ended by signal 9 (SIGKILL); exit code 137" in capsys.readouterr().err


def test_run_reports_the_diagnosis_so_far_while_a_python_program_runs(tmp_path, capsys) -> None:
    script = tmp_path / "slow.py"
    script.write_text(
        "import time, gpudiag\nfor i in range(8):\n    gpudiag.step()\n    time.sleep(0.1)\n"
    )
    record = tmp_path / "slow.gpudiag"
    code = cli.main(
        ["run", "--no-torch", "--report-every", "0.1", "--record", str(record), str(script)]
    )
    assert code == 0
    err = capsys.readouterr().err
    assert "gpudiag: after " in err  # at least one line of the diagnosis so far
    assert " events: " in err


def test_run_reports_while_a_launched_program_runs(monkeypatch, tmp_path, capsys) -> None:
    fake_library(monkeypatch, tmp_path)
    script = tmp_path / "service.py"
    script.write_text(
        textwrap.dedent("""
        import time
        import gpudiag
        for i in range(10):
            gpudiag.step(i)
            time.sleep(0.1)
    """)
    )
    record = tmp_path / "svc.gpudiag"
    code = cli.main(
        ["run", "--report-every", "0.2", "--record", str(record), "--", sys.executable, str(script)]
    )
    assert code == 0
    err = capsys.readouterr().err
    progress = [line for line in err.splitlines() if line.startswith("gpudiag: after ")]
    assert progress, err  # the recording so far is read while the program runs


def _usr1_program(tmp_path: Path, handles: bool) -> Path:
    """Runs 1 s; with `handles`, notes each SIGUSR1 (as gpudiag's injected handler would dump)."""
    script = tmp_path / "usr1.py"
    handler = (
        "signal.signal(signal.SIGUSR1, lambda *_: out.write_text('dumped'))\n" if handles else ""
    )
    script.write_text(
        "import pathlib, signal, time\n"
        f"out = pathlib.Path({str(tmp_path / 'usr1.txt')!r})\n"
        + handler
        + f"pathlib.Path({str(tmp_path / 'ready')!r}).write_text('')\n"
        "time.sleep(1.0)\n"
    )
    return script


@pytest.mark.parametrize("handles", [True, False])
def test_run_window_passes_sigusr1_on_only_to_a_program_that_handles_it(
    monkeypatch, tmp_path, capsys, handles
) -> None:
    fake_library(monkeypatch, tmp_path)
    program = _usr1_program(tmp_path, handles)

    def send_when_ready() -> None:
        deadline = time.monotonic() + 30
        while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGUSR1)

    sender = threading.Thread(target=send_when_ready)
    sender.start()
    # -I: no gpudiag in the program (its bootstrap would install a SIGUSR1 handler for --window)
    record = str(tmp_path / "u.gpudiag")
    code = cli.main(
        ["run", "--window", "600", "--record", record, "--", sys.executable, "-I", str(program)]
    )
    sender.join()
    err = capsys.readouterr().err
    assert code == EXIT_OK  # no GPU here: the program ran to its clean end, no recording
    if handles:
        assert (tmp_path / "usr1.txt").read_text() == "dumped"
    else:
        assert not (tmp_path / "usr1.txt").exists()
        assert "SIGUSR1 not passed on" in err  # and the program was not killed by it


def test_analyze_of_a_recording_of_nothing_is_no_all_clear(tmp_path, capsys) -> None:
    record = tmp_path / "empty.gpudiag"
    gpudiag.start(record, torch=False, capture_gpu=False, nvml_hz=0)
    gpudiag.stop()
    assert cli.main(["analyze", str(record)]) == EXIT_INPUT
    assert "nothing was observed: the report holds 0 events" in capsys.readouterr().err
