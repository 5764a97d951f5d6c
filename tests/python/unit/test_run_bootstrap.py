# SPDX-License-Identifier: Apache-2.0
"""`gpudiag run -- <program>`: the session each Python process of the program starts at
interpreter start (gpudiag._bootstrap), and how it keeps out of the way of the program, of the
CUDA injection and of the system's own sitecustomize. Real runs of small Python programs."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

import gpudiag
from gpudiag import cli
from gpudiag._errors import EXIT_OK
from gpudiag.cli import run as run_cmd


def _fake_library(monkeypatch: pytest.MonkeyPatch, path: Path) -> Path:
    """`path` as the injection library (without a GPU it never loads)."""
    if not path.exists():
        path.write_bytes(b"")
    monkeypatch.setattr(run_cmd, "library_path", lambda: path)
    return path


def _program(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(body))
    return script


def _run(tmp_path: Path, script: Path, *options: str) -> int:
    record = tmp_path / "run.gpudiag"
    command = ["run", "--no-torch", *options, "--record", str(record)]
    return cli.main([*command, "--", sys.executable, str(script)])


def test_each_python_process_records_itself_without_the_injection(
    monkeypatch, tmp_path, capsys
) -> None:
    _fake_library(monkeypatch, tmp_path / "libgpudiag.so")
    seen = tmp_path / "seen.json"
    script = _program(
        tmp_path,
        f"""
        import json, os, gpudiag
        s = gpudiag.current_session()
        json.dump({{"injection": os.environ.get("CUDA_INJECTION64_PATH"),
                    "nvtx": os.environ.get("NVTX_INJECTION64_PATH"),
                    "record": str(s.record_path) if s else None}}, open({str(seen)!r}, "w"))
        for i in range(3):
            gpudiag.step(i)
        """,
    )
    assert _run(tmp_path, script, "--memory-history", "100") == EXIT_OK
    seen_by_program = json.loads(seen.read_text())
    # Its session records it as the injection would name the file, and CUDA will not load the
    # injection into it (two copies of gpudiag would write the same file).
    assert seen_by_program["record"].endswith(".gpudiag")
    assert Path(seen_by_program["record"]).name.startswith("run-")
    assert seen_by_program["injection"] is None
    assert seen_by_program["nvtx"] is None
    assert gpudiag.analyze(tmp_path / "run.gpudiag").input["events"] > 0
    # The process says what an option could not do in it (it never initialised CUDA).
    assert "gpudiag: --memory-history had no effect" in capsys.readouterr().err
    notes = json.loads((tmp_path / "run.report.json").read_text())["notes"]
    assert any(n.startswith("--memory-history had no effect") for n in notes)


def test_idle_processes_leave_no_recording_and_forked_children_keep_the_parents(
    monkeypatch, tmp_path, capsys
) -> None:
    _fake_library(monkeypatch, tmp_path / "libgpudiag.so")
    script = _program(
        tmp_path,
        """
        import os, subprocess, sys, gpudiag
        if len(sys.argv) > 1:
            sys.exit(0)  # a helper process that does nothing worth a report
        subprocess.run([sys.executable, __file__, "idle"], check=True)
        pid = os.fork()
        if pid == 0:
            sys.exit(0)  # a forked child runs the exit handlers it inherited
        os.waitpid(pid, 0)
        for i in range(3):
            gpudiag.step(i)
        """,
    )
    assert _run(tmp_path, script) == EXIT_OK
    assert "recording " + str(tmp_path / "run.gpudiag") in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.glob("run*.gpudiag")) == ["run.gpudiag"]
    assert gpudiag.analyze(tmp_path / "run.gpudiag").input["events"] > 0


def test_a_process_that_cannot_start_gpudiag_gets_the_injection_back_and_says_why(
    monkeypatch, tmp_path, capsys
) -> None:
    library = _fake_library(monkeypatch, tmp_path / "libgpudiag.so")
    seen = tmp_path / "seen.json"
    # The program (whose session took the injection out of its environment) starts a Python
    # process that imports another gpudiag version: that one must be left to the injection.
    script = _program(
        tmp_path,
        f"""
        import json, os, subprocess, sys, gpudiag
        if len(sys.argv) > 1:
            json.dump(os.environ.get("CUDA_INJECTION64_PATH"), open({str(seen)!r}, "w"))
            sys.exit(0)
        options = json.loads(os.environ["GPUDIAG_RUN_PYTHON"])
        options["version"] = "0.0.0+other"
        env = dict(os.environ, GPUDIAG_RUN_PYTHON=json.dumps(options))
        subprocess.run([sys.executable, __file__, "child"], env=env, check=True)
        for i in range(3):
            gpudiag.step(i)
        """,
    )
    assert _run(tmp_path, script) == EXIT_OK
    assert json.loads(seen.read_text()) == str(library)
    err = capsys.readouterr().err
    assert "no session in python" in err
    assert "not 0.0.0+other as gpudiag run does" in err
    assert not list(tmp_path.glob("*.notes"))  # read, printed and removed


def test_a_process_the_injected_library_is_loaded_into_keeps_its_session(
    monkeypatch, tmp_path, capsys
) -> None:
    from gpudiag import _core

    # Stands for Python embedded in a CUDA program: the injected library is mapped already
    # (here _core, which every process that imports gpudiag maps), so no second session starts.
    _fake_library(monkeypatch, Path(_core.__file__))
    script = _program(tmp_path, "import gpudiag\nassert gpudiag.current_session() is None\n")
    # A clean exit with nothing recorded is the program's own 0, said to be no all-clear.
    assert _run(tmp_path, script) == EXIT_OK
    err = capsys.readouterr().err
    assert "wrote no recording" in err
    assert "no all-clear" in err


def test_the_sitecustomize_it_hides_still_runs(monkeypatch, tmp_path) -> None:
    _fake_library(monkeypatch, tmp_path / "libgpudiag.so")
    other = tmp_path / "site"
    other.mkdir()
    marker = tmp_path / "marker"
    (other / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(other), os.environ.get("PYTHONPATH", "")])
    )
    script = _program(tmp_path, "import gpudiag\nfor i in range(3):\n    gpudiag.step(i)\n")
    assert _run(tmp_path, script) == EXIT_OK
    assert marker.read_text() == "ran"
