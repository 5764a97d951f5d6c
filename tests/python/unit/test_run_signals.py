# SPDX-License-Identifier: Apache-2.0
"""`gpudiag run -- program` as a service manager drives it: a signal to the whole process group
reaches the program once, and the program does not outlive a killed gpudiag. gpudiag runs in a
process of its own here, leader of its own group, as under a supervisor (no terminal)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import gpudiag

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux signals")

PACKAGE_ROOT = str(Path(gpudiag.__file__).resolve().parent.parent)


def _counting_service(tmp_path: Path) -> Path:
    """A service that counts the stop signals it gets, drains for 0.5 s after the first (a
    second one meanwhile is what would cut a real drain short), writes the counts, exits 0."""
    script = tmp_path / "service.py"
    script.write_text(
        textwrap.dedent(f"""
        import os, pathlib, signal, time
        counts = {{"TERM": 0, "INT": 0}}
        def count(signum, frame):
            counts[signal.Signals(signum).name[3:]] += 1
        for s in (signal.SIGTERM, signal.SIGINT):
            signal.signal(s, count)
        pathlib.Path({str(tmp_path / "pid")!r}).write_text(str(os.getpid()))
        while not any(counts.values()):
            time.sleep(0.01)
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            time.sleep(0.01)
        pathlib.Path({str(tmp_path / "counts")!r}).write_text(
            " ".join(f"{{k}}={{v}}" for k, v in sorted(counts.items())))
    """)
    )
    return script


def _start_gpudiag(tmp_path: Path, program: Path) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
    record = str(tmp_path / "svc.gpudiag")
    # -I: the program is plain Python, without gpudiag's bootstrap (it would record nothing here)
    command = [sys.executable, "-m", "gpudiag", "run", "--record", record, "--"]
    return subprocess.Popen(
        [*command, sys.executable, "-I", str(program)],
        env=env,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # gpudiag leads a process group (and has no terminal)
    )


def _program_pid(tmp_path: Path) -> int:
    path, deadline = tmp_path / "pid", time.monotonic() + 60
    while not (path.exists() and path.read_text()) and time.monotonic() < deadline:
        time.sleep(0.02)
    return int(path.read_text())


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_gpudiags_process_group_reaches_the_program_once(tmp_path, signum) -> None:
    gpudiag_run = _start_gpudiag(tmp_path, _counting_service(tmp_path))
    _program_pid(tmp_path)
    os.killpg(gpudiag_run.pid, signum)  # kill -- -PGID, as a supervisor stops a process group
    _, err = gpudiag_run.communicate(timeout=60)
    name = signal.Signals(signum).name[3:]
    other = "INT" if name == "TERM" else "TERM"
    assert (tmp_path / "counts").read_text() == " ".join(sorted([f"{name}=1", f"{other}=0"]))
    # A clean shutdown that recorded nothing: the program's 0, said to be no all-clear.
    assert gpudiag_run.returncode == 0, err
    assert "nothing was recorded" in err


def _alive(pid: int) -> bool:
    """The process runs (a zombie, waiting for its new parent to reap it, has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_the_program_does_not_outlive_a_killed_gpudiag(tmp_path) -> None:
    gpudiag_run = _start_gpudiag(tmp_path, _counting_service(tmp_path))
    program = _program_pid(tmp_path)
    gpudiag_run.kill()  # kill -9: gpudiag can pass nothing on
    gpudiag_run.communicate(timeout=60)
    deadline = time.monotonic() + 10
    while _alive(program) and time.monotonic() < deadline:
        time.sleep(0.02)
    alive = _alive(program)
    if alive:
        os.kill(program, signal.SIGKILL)
    assert not alive, "the program kept running after gpudiag was killed"
    # It got SIGTERM, a stop request: its own shutdown ran.
    assert (tmp_path / "counts").read_text() == "INT=0 TERM=1"
