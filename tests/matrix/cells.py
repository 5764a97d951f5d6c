# SPDX-License-Identifier: Apache-2.0
"""The entry-point matrix: every documented way into gpudiag (rows) against planted problems
(columns), and the verdict each cell must get.

A cell is a real run: the workload (workload.py: PyTorch, Lightning, transformers on CPU;
matrix_program.cpp: C++) with one planted problem, driven through one entry point, then judged on
the report's JSON (findings, figures, ``observed``, ``headline``, ``input``), the exit code and
the report's first line, never on its prose. ``test_matrix.py`` runs the CPU cells in CI;
``tests/gpu/device_check.sh`` runs the GPU cells (``python3 tests/matrix/matrix.py --gpu``);
``tools/gen_entry_matrix.py`` writes this table to docs/entry_matrix.md.

PENDING names the cells that fail today and why (work in progress elsewhere); they run as strict
xfails, so a cell that starts passing fails until its entry is removed here.
"""

from __future__ import annotations

from dataclasses import dataclass

# ---- the axes -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    id: str
    title: str  # how the docs table names it
    how: str  # what the cell runs, for the docs


@dataclass(frozen=True)
class Column:
    id: str
    title: str
    planted: str  # what the workload does, for the docs


ROWS = (
    Row(
        "session_explicit",
        "`gpudiag.session` + `gpudiag.step()`",
        "the loop in `with gpudiag.session(record=...)`, `gpudiag.step()` after each batch; "
        "the report saved from `s.report()`",
    ),
    Row(
        "session_auto",
        "`gpudiag.session`, automatic steps",
        "the same loop without `gpudiag.step()`: steps from the optimizer hook",
    ),
    Row(
        "run_script",
        "`gpudiag run script.py`",
        "a plain PyTorch script (no gpudiag call), `gpudiag run --json R --fail-on warning`",
    ),
    Row(
        "run_nested",
        "`gpudiag run script.py`, script with its own session",
        "the `gpudiag.session` script of the first row, under `gpudiag run`",
    ),
    Row("run_python", "`gpudiag run -- python script.py`", "the plain script as a child process"),
    Row(
        "notebook",
        "`%%gpudiag` (IPython)",
        "`%load_ext gpudiag`, the loop in a `%%gpudiag --record R` cell of an IPython shell; "
        "`_gpudiag_report` saved",
    ),
    Row(
        "lightning",
        "`gpudiag.lightning_callback()`",
        "a Lightning `Trainer(callbacks=[gpudiag.lightning_callback()])` in a session",
    ),
    Row(
        "hf",
        "`gpudiag.hf_callback()`",
        "a Hugging Face `Trainer(callbacks=[gpudiag.hf_callback()])` in a session",
    ),
    Row(
        "pytest",
        "pytest markers",
        "`@pytest.mark.gpu_limit_leaks` / `gpu_limit_memory` tests run by pytest (junit XML)",
    ),
    Row(
        "cpp_session",
        "C++ `gpudiag::Session`",
        "matrix_program: steps and input waits marked through `gpudiag::Session`",
    ),
    Row(
        "c_api",
        "C API (`gpudiag.h`)",
        "matrix_program --c-api: the same through `gpudiag_session_*`",
    ),
    Row(
        "run_program",
        "`gpudiag run -- ./program`",
        "the same program built without gpudiag (NVTX-named steps where NVTX is installed)",
    ),
)

COLUMNS = (
    Column(
        "input90",
        "input-bound ~90 %",
        "the Dataset sleeps 9x a step's compute, measured first (`num_workers=0`); C++: the "
        "loop sleeps between its input-wait marks",
    ),
    Column("input40", "input-bound ~40 %", "the same with 2/3 of a step's compute"),
    Column(
        "keepup",
        "workers keep up",
        "2 DataLoader workers, `prefetch_factor=8`, `persistent_workers=True`, batches that "
        "cost nothing to make, a wider model (about 7x the compute per step); C++: a producer "
        "thread keeps 16 batches ready",
    ),
    Column(
        "sync",
        "host sync every step",
        "`loss.item()` after each step (Hugging Face: the Trainer logs the loss each step); "
        "C++: waits for a result each step (from the device with `--device cuda`)",
    ),
    Column(
        "growth",
        "host memory growth",
        "each step keeps 1 MiB more in a list (16 MiB of device memory on a GPU)",
    ),
    Column(
        "crash",
        "crash mid-run",
        "raises half-way through; C++: `std::abort()` after at least 0.7 s",
    ),
    Column("crash_early", "crash before any step", "raises (C++: aborts) before the first batch"),
    Column("clean", "nothing wrong", "the same loop with nothing planted"),
)

# ---- verdicts -----------------------------------------------------------------------------------

NOT_ON_CPU = ("gpu_activity", "device_memory")  # evidence a CPU run cannot have


@dataclass(frozen=True)
class Expect:
    """What a cell's run must produce. Fields left at None are not checked."""

    # input_bound: "critical", "warning+" (warning or critical), "absent"
    input_bound: str | None = None
    share: tuple[float, float] | None = None  # input_bound's share figure within
    share_vs_loop: float | None = None  # |share - the loop's own measurement| at most
    no_findings: bool = False
    findings: tuple[str, ...] = ()  # finding ids that must be present
    absent: tuple[str, ...] = ()  # ... and that must not
    observed: tuple[str, ...] = ()  # evidence kinds the report must list in `observed`
    not_observed: tuple[str, ...] = ()  # ... and must not
    # headline: "names_unobserved" (not a bare all-clear; names what was not observed),
    # "not_all_clear" (anything but "No problems found..."), "nothing_observed" (0 events).
    headline: str | None = None
    # steps_before_crash: "all" = the steps the loop finished before the crash (within 2);
    # "flushed" = at least one and at most those (an aborted process loses what its session
    # had not yet written: up to a flush period, 250 ms)
    steps_before_crash: str | None = None
    partial: bool = False  # the report says its input is incomplete
    exit_code: int | None = None
    no_report: bool = False  # the run writes no report (a refusal)
    pytest_outcome: str | None = None  # "skipped_unchecked", "failed", "passed"

    def describe(self) -> str:
        """The verdict in a few words, for the docs table."""
        parts: list[str] = []
        if self.exit_code is not None:
            parts.append(f"exit {self.exit_code}")
        if self.no_report:
            parts.append("no report")
        if self.input_bound == "critical":
            parts.append("`input_bound` CRITICAL")
        elif self.input_bound == "warning+":
            parts.append("`input_bound` WARNING+")
        elif self.input_bound == "absent":
            parts.append("no `input_bound`")
        if self.share is not None:
            parts.append(f"share {self.share[0]:.2f}-{self.share[1]:.2f}")
        if self.share_vs_loop is not None:
            parts.append(f"within {self.share_vs_loop:.2f} of the loop's own")
        if self.no_findings:
            parts.append("no findings")
        parts += [f"`{f}`" for f in self.findings]
        parts += [f"no `{f}`" for f in self.absent]
        if self.observed:
            parts.append("observed: " + ", ".join(self.observed))
        if self.not_observed:
            parts.append("not observed: " + ", ".join(self.not_observed))
        parts += {
            "names_unobserved": ["headline names what was not observed"],
            "not_all_clear": ["headline not an all-clear"],
            "nothing_observed": ['headline "Nothing was observed"'],
        }.get(self.headline or "", [])
        if self.steps_before_crash == "all":
            parts.append("the steps before the crash counted")
        elif self.steps_before_crash == "flushed":
            parts.append("the steps written before the abort counted")
        if self.partial:
            parts.append("partial input said")
        parts += {
            "skipped_unchecked": ["reported skipped: limit not checked"],
            "failed": ["test fails"],
            "passed": ["test passes"],
        }.get(self.pytest_outcome or "", [])
        return "; ".join(parts)


@dataclass(frozen=True)
class Cell:
    row: str
    column: str
    gpu: bool = False  # runs only on the GPU machine (tests/gpu/device_check.sh)
    expect: Expect | None = None
    na: str | None = None  # not applicable, and why
    pending: str | None = None  # fails today, and why (a strict xfail)

    @property
    def id(self) -> str:
        return f"{self.row}-{self.column}" + ("-gpu" if self.gpu else "")


# ---- the CPU verdicts, by column ----------------------------------------------------------------

_INPUT = {
    "observed": ("steps", "input_waits"),
    "not_observed": NOT_ON_CPU,
    "headline": "not_all_clear",
}
_UNSEEN = {"no_findings": True, "not_observed": NOT_ON_CPU, "headline": "names_unobserved"}
# The share bounds hold when a loaded machine computes at half or double the speed measured
# before the loop (the sleep is sized from that measurement).
CPU = {
    "input90": Expect(input_bound="critical", share=(0.65, 0.99), share_vs_loop=0.12, **_INPUT),
    "input40": Expect(input_bound="warning+", share=(0.15, 0.70), share_vs_loop=0.12, **_INPUT),
    "keepup": Expect(
        input_bound="absent",
        no_findings=True,
        observed=("steps", "input_waits"),
        not_observed=NOT_ON_CPU,
        headline="names_unobserved",
    ),
    "sync": Expect(**_UNSEEN),
    "growth": Expect(**_UNSEEN),
    "crash": Expect(steps_before_crash="all", headline="not_all_clear", not_observed=NOT_ON_CPU),
    "crash_early": Expect(headline="nothing_observed"),
    "clean": Expect(**_UNSEEN),
}
# `gpudiag run --fail-on warning`: 1 for a finding at WARNING or worse, 5 when the program failed,
# 128 + N when signal N ended it (the C++ workload's crashes abort).
SIGABRT_EXIT = 128 + 6
# `gpudiag run --fail-on warning`: 1 for a finding at WARNING or worse, 5 when the program failed.
RUN_EXIT = {"input90": 1, "input40": 1, "crash": 5, "crash_early": 5}


def _with(expect: Expect, **changes: object) -> Expect:
    values = {k: getattr(expect, k) for k in expect.__dataclass_fields__}
    values.update(changes)
    return Expect(**values)  # type: ignore[arg-type]


def _run_expect(column: str) -> Expect:
    return _with(CPU[column], exit_code=RUN_EXIT.get(column, 0))


TRAINER_NA = {
    "crash_early": "a trainer fails before its first batch the same way the session row does "
    "(a session that ends with no event): covered there",
}
NA = {
    "pytest": {
        "input90": "the markers limit a test's device memory; they time nothing",
        "input40": "the markers limit a test's device memory; they time nothing",
        "keepup": "the markers limit a test's device memory; they time nothing",
        "sync": "the markers do not look at synchronizations",
        "crash_early": "a test that fails at once is the crash column's case",
    },
    "lightning": TRAINER_NA,
    "hf": TRAINER_NA,
    "session_auto": {
        "crash_early": "identical to the explicit-step row before any step (the step source "
        "never comes into play)",
    },
    "run_nested": {
        "crash_early": "identical to `gpudiag run script.py`: the nested session is never reached",
    },
}

# ---- what fails today, and why ------------------------------------------------------------------

PENDING: dict[str, str] = {}


def _pending(row: str, columns: tuple[str, ...] | None, why: str) -> None:
    for c in columns or tuple(col.id for col in COLUMNS):
        PENDING[f"{row}-{c}"] = why


# ---- the cells ----------------------------------------------------------------------------------


def _cpu_cell(row: str, column: str) -> Cell:
    why = NA.get(row, {}).get(column)
    if why is not None:
        return Cell(row, column, na=why)
    pending = PENDING.get(f"{row}-{column}")
    if row in ("run_script", "run_nested", "run_python"):
        return Cell(row, column, expect=_run_expect(column), pending=pending)
    if row == "run_program":
        # Without CUDA the injected library never loads: no recording, said plainly, and the
        # program's clean exit stays 0 (a service manager must not see a graceful stop fail).
        # The crash columns abort (SIGABRT): a program ended by signal N gives 128 + N.
        code = SIGABRT_EXIT if column.startswith("crash") else 0
        return Cell(row, column, expect=Expect(exit_code=code, no_report=True), pending=pending)
    if row == "pytest":
        outcome = "failed" if column == "crash" else "skipped_unchecked"
        return Cell(row, column, expect=Expect(pytest_outcome=outcome), pending=pending)
    if row in ("cpp_session", "c_api") and column == "crash":
        # The process aborts: its recording, read afterwards, is what it left.
        crash = _with(CPU[column], partial=True, steps_before_crash="flushed")
        return Cell(row, column, expect=crash, pending=pending)
    if row in ("cpp_session", "c_api") and column == "crash_early":
        return Cell(row, column, expect=Expect(headline="nothing_observed"), pending=pending)
    return Cell(row, column, expect=CPU[column], pending=pending)


_GPU_SYNC = Expect(
    findings=("host_sync_stall",), observed=("steps", "gpu_activity"), headline="not_all_clear"
)
_GPU_GROWTH = Expect(
    findings=("memory_leak",), observed=("steps", "device_memory"), headline="not_all_clear"
)


def _gpu_cells() -> list[Cell]:
    """The cells whose problem only a GPU shows: the same workloads with --device cuda."""
    cells: list[Cell] = []
    for row in (
        "session_explicit",
        "run_script",
        "run_python",
        "cpp_session",
        "c_api",
        "run_program",
    ):
        cells.append(
            Cell(row, "sync", gpu=True, expect=_GPU_SYNC, pending=PENDING.get(f"{row}-sync"))
        )
        cells.append(
            Cell(row, "growth", gpu=True, expect=_GPU_GROWTH, pending=PENDING.get(f"{row}-growth"))
        )
    cells.append(
        Cell(
            "run_program",
            "clean",
            gpu=True,
            expect=Expect(observed=("gpu_activity",), absent=("host_sync_stall", "memory_leak")),
        )
    )
    cells.append(
        Cell(
            "run_program",
            "crash",
            gpu=True,
            expect=Expect(exit_code=SIGABRT_EXIT, headline="not_all_clear"),
            pending=PENDING.get("run_program-crash"),
        )
    )
    cells.append(Cell("pytest", "growth", gpu=True, expect=Expect(pytest_outcome="failed")))
    cells.append(Cell("pytest", "clean", gpu=True, expect=Expect(pytest_outcome="passed")))
    return cells


CELLS: tuple[Cell, ...] = tuple(
    [_cpu_cell(r.id, c.id) for r in ROWS for c in COLUMNS] + _gpu_cells()
)


def cell(cell_id: str) -> Cell:
    for c in CELLS:
        if c.id == cell_id:
            return c
    raise KeyError(cell_id)
