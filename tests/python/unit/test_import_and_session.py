# SPDX-License-Identifier: Apache-2.0
"""Import side effects, session lifecycle and the notebook magic (with a fake session backend)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest

import gpudiag
from gpudiag import notebook


def _python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_import_touches_neither_torch_nor_cuda() -> None:
    out = _python("""
        import sys
        import gpudiag
        gpudiag.capabilities()
        print("torch" in sys.modules, any(m.startswith("torch") for m in sys.modules))
    """)
    assert out == "False False"


@pytest.mark.torch
def test_import_and_status_leave_cuda_uninitialised() -> None:
    pytest.importorskip("torch")
    out = _python("""
        import torch
        import gpudiag
        print(gpudiag.capabilities())
        print("initialized", torch.cuda.is_initialized())
    """)
    assert out.endswith("initialized False")


def test_session_lifecycle(fake_backend) -> None:
    s = gpudiag.Session(
        "run.gpudiag", torch=False, properties={"job": "x"}, _backend_factory=fake_backend
    )
    assert not s.running
    with pytest.raises(gpudiag.FailedPreconditionError):
        s.report()
    s.start()
    assert gpudiag.current_session() is s
    assert s.running
    gpudiag.step()
    with gpudiag.phase("forward"), s.input_wait():
        pass
    assert s.annotate("note", 5)
    assert s.record_counter("framework_reserved_bytes", 123.0, device=1)
    wid = gpudiag.watch_memory("2 GiB", lambda _used: None)
    backend = fake_backend.last
    assert backend.watches[wid][0] == 2 * 1024**3
    s.unwatch_memory(wid)
    report = gpudiag.stop()
    assert isinstance(report, gpudiag.Report)
    assert gpudiag.current_session() is None
    assert not s.running
    with pytest.raises(gpudiag.FailedPreconditionError):
        s.stop()
    assert backend.names()[0] == "start"
    assert backend.names()[-1] == "stop"
    assert ("job", "x") in backend.options.properties
    assert backend.options.record_path == "run.gpudiag"
    assert backend.counters() == [("framework_reserved_bytes", 123.0, 1)]
    assert backend.annotations() == {"note": 5}
    gpudiag.step()  # no session: ignored
    assert gpudiag.stop() is None
    assert gpudiag.report() is None


def test_a_session_started_while_another_runs_joins_it(fake_backend) -> None:
    outer = gpudiag.start("outer.gpudiag", torch=False, _backend_factory=fake_backend)
    backend = fake_backend.last
    with gpudiag.session(torch=False, _backend_factory=fake_backend) as inner:
        assert fake_backend.last is backend  # no second capture
        assert inner.joined is outer
        assert inner.running
        assert gpudiag.current_session() is inner
        inner.step()
        gpudiag.step()
        with inner.phase("forward"):
            pass
        watch = inner.watch_memory("1 GiB", lambda _used: None)
        assert "fake session" in inner.report().notes[0]  # the outer session's report so far
    assert not inner.running
    assert outer.running  # leaving the inner session does not end the run
    assert watch not in backend.watches  # its watch went with it
    assert backend.names().count("step_begin") == 2
    assert "phase_begin" in backend.names()
    assert "stop" not in backend.names()
    assert gpudiag.current_session() is outer
    gpudiag.stop()
    assert backend.names()[-1] == "stop"


def test_stop_stops_the_latest_session_first(fake_backend) -> None:
    outer = gpudiag.start(torch=False, _backend_factory=fake_backend)
    inner = gpudiag.start(torch=False, _backend_factory=fake_backend)
    gpudiag.stop()
    assert not inner.running
    assert outer.running
    gpudiag.stop()
    assert not outer.running
    assert gpudiag.current_session() is None


def test_a_joining_session_refuses_options_it_cannot_honour(fake_backend, capsys) -> None:
    from gpudiag._session import RUN_ORIGIN

    gpudiag.Session(torch=False, _backend_factory=fake_backend, _origin=RUN_ORIGIN).start()
    try:
        with pytest.raises(gpudiag.FailedPreconditionError) as e:
            gpudiag.start("mine.gpudiag", torch=False)
        message = str(e.value)
        assert "record='mine.gpudiag'" in message
        assert "`gpudiag run` started" in message
        assert "writes no recording" in message
        assert "pass --record PATH to `gpudiag run`" in message  # the fix
        with pytest.raises(gpudiag.FailedPreconditionError, match=r"window='all'.*window='steps'"):
            gpudiag.start(torch=False, window="all")
        with pytest.raises(gpudiag.FailedPreconditionError, match="does not instrument PyTorch"):
            gpudiag.start(torch=True)
        with pytest.raises(gpudiag.FailedPreconditionError, match="does not instrument PyTorch"):
            gpudiag.start(torch=False, oom_snapshot="oom.pickle")
        # Options left at their defaults, or equal to the running session's, join.
        gpudiag.start(torch=False, window="steps", nvml_hz=2.0).stop()
        # Properties cannot reach the running session's report: said, but no reason to fail.
        gpudiag.start(torch=False, properties={"model": "resnet"}).stop()
        assert "properties={'model': 'resnet'} are not in the report" in capsys.readouterr().err
    finally:
        gpudiag.stop()


def test_a_joined_session_gets_a_copy_of_the_recording(tmp_path, capsys) -> None:
    outer = gpudiag.start(tmp_path / "outer.gpudiag", torch=False, capture_gpu=False, nvml_hz=0)
    with gpudiag.session(
        tmp_path / "inner.gpudiag", torch=False, capture_gpu=False, nvml_hz=0
    ) as inner:
        for i in range(3):
            inner.step(i)
    assert "inner.gpudiag gets a copy of that recording" in capsys.readouterr().err
    assert not (tmp_path / "inner.gpudiag").exists()  # written when the outer session ends
    outer.stop()
    assert (tmp_path / "inner.gpudiag").read_bytes() == (tmp_path / "outer.gpudiag").read_bytes()
    assert gpudiag.analyze(tmp_path / "inner.gpudiag").input["events"] > 0


def test_bad_options_are_invalid_arguments() -> None:
    with pytest.raises(gpudiag.InvalidArgumentError):
        gpudiag.Session(torch="maybe")
    with pytest.raises(gpudiag.InvalidArgumentError):
        gpudiag.Session(window="weekly")
    with pytest.raises(gpudiag.InvalidArgumentError):
        gpudiag.Session(memory_history=0)
    with pytest.raises(gpudiag.FailedPreconditionError):
        gpudiag.watch_memory("1 GiB", print)


def test_live_sessions_unavailable_is_a_clear_error(monkeypatch) -> None:
    from gpudiag import _core, _session

    if hasattr(_core, "Session"):
        monkeypatch.delattr(_core, "Session")
    with pytest.raises(gpudiag.UnavailableError, match="offline analysis"):
        gpudiag.start(torch=False)
    assert gpudiag.current_session() is None
    assert not _session.native_sessions_available()


class FakeIPython:
    def __init__(self) -> None:
        self.magics: dict[str, Any] = {}
        self.user_ns: dict[str, Any] = {}
        self.ran: list[str] = []

    def register_magic_function(self, fn, magic_kind: str, magic_name: str) -> None:
        self.magics[(magic_kind, magic_name)] = fn

    def run_cell(self, cell: str) -> Any:
        self.ran.append(cell)
        gpudiag.step()
        return type("Result", (), {"error_in_exec": None})()


def test_cell_magic_runs_the_cell_in_a_session(monkeypatch, fake_backend, capsys) -> None:
    from gpudiag import _session

    pytest.importorskip("IPython")
    monkeypatch.setattr(_session, "_create_native", fake_backend)
    shown: list[Any] = []
    monkeypatch.setattr("IPython.display.display", shown.append)
    ip = FakeIPython()
    gpudiag.load_ipython_extension(ip)
    magic = ip.magics[("cell", "gpudiag")]
    magic("--no-torch --record nb.gpudiag", "x = 1")
    assert ip.ran == ["x = 1"]
    assert isinstance(shown[0], gpudiag.Report)
    assert '<div class="gpudiag">' in shown[0]._repr_html_()
    assert ip.user_ns["_gpudiag_report"] is shown[0]
    assert fake_backend.last.options.record_path == "nb.gpudiag"
    assert "step_begin" in fake_backend.last.names()
    magic("--no-torch --text", "y = 2")
    assert "gpudiag" in capsys.readouterr().out
    from IPython.core.error import UsageError

    with pytest.raises(UsageError):
        magic("--frobnicate", "")
    notebook.unload_ipython_extension(ip)


def test_cell_magic_with_a_bad_option_is_a_clean_usage_error(capsys) -> None:
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shell.run_cell("%load_ext gpudiag")
        result = shell.run_cell("%%gpudiag --bogus\nx = 1\n")
    finally:
        InteractiveShell.clear_instance()
    out = capsys.readouterr()
    text = out.out + out.err
    assert "UsageError: %%gpudiag: unrecognized arguments: --bogus" in text
    assert "usage: %%gpudiag [--record RECORD]" in text
    assert "InvalidArgumentError" not in text
    assert "Traceback" not in text
    assert result.error_in_exec is not None or result.error_before_exec is not None
