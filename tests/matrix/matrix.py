# SPDX-License-Identifier: Apache-2.0
"""Runs the cells of the entry-point matrix (cells.py) and judges them.

Each cell is one run of a workload through its entry point in a directory of its own; the
verdict is read from the report's JSON, the exit code, the report's first line (its `headline`)
and, for the pytest row, pytest's junit XML. test_matrix.py runs the CPU cells; the GPU machine's
device check runs the GPU cells with this file as a script:

    python3 tests/matrix/matrix.py --gpu [--jobs N] [--out DIR]    exit 0 all passed, 1 a cell
                                                                   failed, 77 no CUDA device

GPUDIAG_MATRIX_PROGRAM names the C++ workload built with gpudiag (default
build/ci/tests/matrix/gpudiag_matrix_program); its plain build (gpudiag_matrix_plain) is looked
for beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

from cells import CELLS, Cell, Expect

PY = sys.executable
CELL_TIMEOUT_S = 300
TRAINER_MODULES = {"lightning": "lightning", "hf": "transformers", "notebook": "IPython"}


@dataclass
class Outcome:
    """What one cell's run left behind."""

    exit_code: int | None = None
    report: dict[str, Any] | None = None
    loop: dict[str, Any] | None = None  # what the workload measured of itself
    output: str = ""  # stdout and stderr, for the failure message
    pytest: dict[str, tuple[str, str]] = field(default_factory=dict)  # test: (outcome, message)
    skip: str | None = None  # the cell could not run here, and why
    seconds: float = 0.0


# ---- locating what the cells run ------------------------------------------------------------------


def program(plain: bool = False) -> Path | None:
    """The C++ workload (marked, or the plain build beside it); None when not built."""
    path = Path(program_hint(plain)).resolve()
    return path if path.is_file() and os.access(path, os.X_OK) else None


def has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def skip_reason(cell: Cell) -> str | None:
    """Why this cell cannot run on this machine, or None."""
    needs_program = cell.row in ("cpp_session", "c_api", "run_program")
    plain = cell.row == "run_program"
    if needs_program and program(plain) is None:
        return (
            f"the C++ matrix program is not built ({program_hint(plain)}); build the target "
            "gpudiag_matrix_program / gpudiag_matrix_plain or set GPUDIAG_MATRIX_PROGRAM"
        )
    if cell.row == "pytest" and not has_module("pytest"):
        return "pytest is not installed"
    module = TRAINER_MODULES.get(cell.row)
    if module is not None and not has_module(module):
        return f"{module} is not installed"
    if not needs_program and not has_module("torch"):
        return "torch is not installed"
    return None


def program_hint(plain: bool) -> str:
    given = os.environ.get("GPUDIAG_MATRIX_PROGRAM")
    marked = Path(given) if given else ROOT / "build/ci/tests/matrix/gpudiag_matrix_program"
    return str(marked.with_name("gpudiag_matrix_plain") if plain else marked)


# ---- running a cell -------------------------------------------------------------------------------


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"  # two cells at once on two cores: keep each to one thread
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("GPUDIAG_RECORD", None)
    # The cells run in directories of their own: a relative PYTHONPATH (a build tree's) must
    # still lead to the same gpudiag.
    paths = env.get("PYTHONPATH", "").split(os.pathsep)
    env["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in paths if p)
    return env


def _execute(command: list[str], cwd: Path) -> tuple[int, str]:
    try:
        done = subprocess.run(
            command,
            cwd=cwd,
            env=_environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=CELL_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        out = e.output.decode(errors="replace") if isinstance(e.output, bytes) else ""
        return 124, out + f"\n[matrix] timed out after {CELL_TIMEOUT_S} s"
    return done.returncode, done.stdout.decode(errors="replace")


def _load(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _gpudiag_run(out: Path, extra: list[str]) -> list[str]:
    return [PY, "-m", "gpudiag", "run", "--record", str(out / "run.gpudiag"), "--json",
            str(out / "report.json"), "--fail-on", "warning", *extra]  # fmt: skip


def command_for(cell: Cell, out: Path, device: str) -> list[str]:
    workload = str(HERE / "workload.py")
    col, dev = cell.column, ["--device", device]
    if cell.row in ("session_explicit", "session_auto", "lightning", "hf"):
        entry = {"session_explicit": "explicit", "session_auto": "auto"}.get(cell.row, cell.row)
        return [PY, workload, col, entry, "--out", str(out), *dev]
    if cell.row in ("run_script", "run_nested"):
        entry = "plain" if cell.row == "run_script" else "nested"
        return _gpudiag_run(out, [workload, col, entry, "--out", str(out), *dev])
    if cell.row == "run_python":
        return _gpudiag_run(out, ["--", PY, workload, col, "plain", "--out", str(out), *dev])
    if cell.row == "notebook":
        return [PY, str(HERE / "notebook_cell.py"), col, "--out", str(out), *dev]
    files = ["--truth", str(out / "truth.json"), *dev]
    if cell.row == "run_program":
        return _gpudiag_run(out, ["--", str(program(plain=True)), col, *files])
    api = ["--c-api"] if cell.row == "c_api" else []
    record = ["--record", str(out / "program.gpudiag"), "--report", str(out / "report.json")]
    return [str(program()), col, *api, *record, *files]


def run_cell(cell: Cell, out: Path) -> Outcome:
    """Runs one cell in `out` (a fresh directory)."""
    device = "cuda" if cell.gpu else "cpu"
    began = time.monotonic()
    reason = skip_reason(cell)
    if reason is not None:
        return Outcome(skip=reason)
    if cell.row == "pytest":
        outcome = _pytest_row(device, out.parent / f"pytest-row-{device}")
    else:
        out.mkdir(parents=True, exist_ok=True)
        code, output = _execute(command_for(cell, out, device), out)
        if code == 77 and cell.gpu:
            return Outcome(skip="no CUDA device", exit_code=code, output=output)
        outcome = Outcome(exit_code=code, output=output, loop=_load(out / "truth.json"))
        outcome.report = _load(out / "report.json")
        if outcome.report is None and (out / "program.gpudiag").exists():
            outcome.report = _analyze(out / "program.gpudiag")  # what an aborted program left
    outcome.seconds = time.monotonic() - began
    return outcome


def _analyze(recording: Path) -> dict[str, Any] | None:
    import gpudiag

    try:
        return gpudiag.analyze(str(recording)).to_dict()
    except gpudiag.GpudiagError as e:
        return {"analyze_error": str(e)}


_pytest_runs: dict[str, Future[Outcome]] = {}
_pytest_lock = threading.Lock()


def _pytest_row(device: str, where: Path) -> Outcome:
    """The pytest row's cells share one pytest run of marked_tests.py (one interpreter)."""
    with _pytest_lock:
        future = _pytest_runs.get(device)
        owner = future is None
        if owner:
            future = Future()
            _pytest_runs[device] = future
    assert future is not None
    if owner:
        try:
            future.set_result(_run_marked_tests(where))
        except Exception as e:  # noqa: BLE001 - handed to every cell of the row
            future.set_exception(e)
    return future.result()


def _plugin_arguments() -> list[str]:
    """-p gpudiag.pytest_plugin where gpudiag runs from a build tree (no entry point)."""
    from importlib.metadata import entry_points

    try:
        plugins = list(entry_points(group="pytest11"))
    except TypeError:  # Python 3.9
        plugins = list(entry_points().get("pytest11", ()))  # type: ignore[attr-defined]
    return [] if any(ep.name == "gpudiag" for ep in plugins) else ["-p", "gpudiag.pytest_plugin"]


def _run_marked_tests(where: Path) -> Outcome:
    where.mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / "marked_tests.py", where / "test_marked.py")
    (where / "pytest.ini").write_text("[pytest]\n")
    junit = where / "junit.xml"
    code, output = _execute(
        [
            PY,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            *_plugin_arguments(),
            f"--junitxml={junit}",
            "test_marked.py",
        ],
        where,
    )
    result = Outcome(exit_code=code, output=output)
    try:
        tree = ET.parse(junit)
    except (OSError, ET.ParseError):
        return result
    for case in tree.iter("testcase"):
        outcome, message = "passed", ""
        for kind in ("skipped", "failure", "error"):
            node = case.find(kind)
            if node is not None:
                outcome = {"failure": "failed"}.get(kind, kind)
                message = node.get("message", "")
        result.pytest[case.get("name", "")] = (outcome, message)
    return result


# ---- judging a cell -------------------------------------------------------------------------------


def _steps(report: dict[str, Any]) -> float | None:
    for section in report.get("sections", []):
        if section.get("id") == "timeline":
            figure = section.get("figures", {}).get("steps")
            if figure is not None:
                return float(figure.get("value"))
    return None


def _all_clear(headline: str) -> bool:
    """A headline that reads as "nothing wrong" without naming what was not observed."""
    return headline.startswith("No problems found") and "not observed" not in headline


def _judge_headline(e: Expect, report: dict[str, Any], printed: str | None) -> list[str]:
    """`printed`: what the run printed, where it prints the text report (`gpudiag run`)."""
    headline = str(report.get("headline", ""))
    if not headline:
        return ["the report has no headline"]
    problems = []
    if e.headline == "nothing_observed" and report.get("input", {}).get("events", 0) == 0:
        if not headline.startswith("Nothing was observed"):
            problems.append(f"0 events, yet the headline is {headline!r}")
    elif _all_clear(headline):
        problems.append(f"the headline is an all-clear: {headline!r}")
    elif e.headline == "names_unobserved" and "not observed" not in headline:
        problems.append(f"the headline does not name what was not observed: {headline!r}")
    if printed is not None and headline not in printed.splitlines():
        problems.append("the printed report has no line that is its headline")
    return problems


def _judge_input(e: Expect, report: dict[str, Any], loop: dict[str, Any] | None) -> list[str]:
    found = {f["id"]: f for f in report.get("findings", [])}
    finding = found.get("input_bound")
    if e.input_bound == "absent":
        return [] if finding is None else [f"unexpected input_bound: {finding.get('title')}"]
    if e.input_bound is None:
        return []
    if finding is None:
        measured = (loop or {}).get("share")
        return [f"no input_bound finding (the loop measured its own wait share: {measured})"]
    problems = []
    wanted = ("critical",) if e.input_bound == "critical" else ("warning", "critical")
    if finding["severity"] not in wanted:
        problems.append(f"input_bound is {finding['severity']}, wanted {' or '.join(wanted)}")
    share = finding.get("figures", {}).get("share", {}).get("value")
    if e.share is not None and (share is None or not e.share[0] <= share <= e.share[1]):
        problems.append(f"input_bound share {share} outside {e.share}")
    mine = (loop or {}).get("share")
    comparable = e.share_vs_loop is not None and mine is not None and share is not None
    if comparable and abs(share - mine) > e.share_vs_loop:
        problems.append(f"input_bound share {share:.3f}, the loop measured {mine:.3f}")
    return problems


def _judge_report(e: Expect, out: Outcome, prints_report: bool) -> list[str]:
    report = out.report
    if report is None:
        return ["no report was written"]
    if "analyze_error" in report:
        return [f"the recording it left cannot be analysed: {report['analyze_error']}"]
    problems = _judge_input(e, report, out.loop)
    found = [f["id"] for f in report.get("findings", [])]
    if e.no_findings and found:
        problems.append(f"findings where none were expected: {found}")
    problems += [f"no {f} finding (found {found})" for f in e.findings if f not in found]
    problems += [f"an unexpected {f} finding" for f in e.absent if f in found]
    observed = report.get("observed")
    if (e.observed or e.not_observed) and observed is None:
        problems.append("the report has no `observed` list")
    elif observed is not None:
        problems += [f"`observed` lacks {k}: {observed}" for k in e.observed if k not in observed]
        problems += [f"`observed` has {k}" for k in e.not_observed if k in observed]
    if e.headline is not None:
        problems += _judge_headline(e, report, out.output if prints_report else None)
    if e.steps_before_crash:
        steps, ran = _steps(report), (out.loop or {}).get("steps_run")
        least = 1 if e.steps_before_crash == "flushed" else (ran or 0) - 2
        if steps is None or ran is None or not least <= steps <= ran:
            problems.append(f"{steps} steps counted; the loop finished {ran} before the crash")
    if e.partial and report.get("input", {}).get("complete", True):
        problems.append("the report does not say its input is partial")
    return problems


def judge(cell: Cell, out: Outcome) -> list[str]:
    """What is wrong with the outcome, against the cell's expected verdict ([] = it passes)."""
    e = cell.expect
    assert e is not None, f"{cell.id} is not applicable: {cell.na}"
    if e.pytest_outcome is not None:
        name = f"test_{cell.column}"
        outcome, message = out.pytest.get(name, ("missing", ""))
        wanted = "skipped" if e.pytest_outcome == "skipped_unchecked" else e.pytest_outcome
        if outcome != wanted:
            return [f"{name} {outcome} ({message}), wanted {wanted}"]
        if e.pytest_outcome == "skipped_unchecked" and "not checked" not in message:
            return [f"{name} skipped without saying its limit was not checked: {message!r}"]
        return []
    problems = []
    if e.exit_code is not None and out.exit_code != e.exit_code:
        problems.append(f"exit code {out.exit_code}, wanted {e.exit_code}")
    if e.no_report:
        if out.report is not None:
            problems.append("a report was written where none can be")
        return problems
    return problems + _judge_report(e, out, prints_report=cell.row.startswith("run_"))


def explain(cell: Cell, out: Outcome, problems: list[str]) -> str:
    tail = "\n".join(out.output.splitlines()[-25:])
    return (
        f"{cell.id}: {'; '.join(problems)}\n  expected: {cell.expect.describe() if cell.expect else ''}"
        f"\n  ran {out.seconds:.1f} s, exit {out.exit_code}; output's last lines:\n{tail}"
    )


# ---- the GPU machine's entry ----------------------------------------------------------------------


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def main() -> int:
    p = argparse.ArgumentParser(description="Run the matrix's GPU cells (tests/gpu/README.md).")
    p.add_argument("--gpu", action="store_true", required=True)
    p.add_argument("--jobs", type=int, default=8)
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args()
    cells = [c for c in CELLS if c.gpu and c.expect is not None]
    if not cuda_available():
        print(f"MATRIX no CUDA device: {len(cells)} GPU cells need one")
        return 77
    base = a.out or Path(tempfile.mkdtemp(prefix="gpudiag-matrix-"))
    failed = 0
    with ThreadPoolExecutor(max_workers=a.jobs) as pool:
        futures = {c: pool.submit(run_cell, c, base / c.id) for c in cells}
        for c, future in futures.items():
            out = future.result()
            if out.skip is not None:
                print(f"MATRIX SKIP {c.id}: {out.skip}")
                continue
            problems = judge(c, out)
            if problems and c.pending is not None:
                print(f"MATRIX PENDING {c.id} ({out.seconds:.0f}s): {'; '.join(problems)}")
            elif problems:
                failed += 1
                print("MATRIX FAIL " + explain(c, out, problems))
            else:
                print(f"MATRIX PASS {c.id} ({out.seconds:.0f}s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
