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
    with pytest.raises(gpudiag.FailedPreconditionError):
        gpudiag.start(torch=False, _backend_factory=fake_backend)  # one session at a time
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
    with pytest.raises(gpudiag.InvalidArgumentError):
        magic("--frobnicate", "")
    notebook.unload_ipython_extension(ip)
