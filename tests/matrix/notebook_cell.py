# SPDX-License-Identifier: Apache-2.0
"""The `%%gpudiag` row: an IPython shell loads the extension and runs the workload's loop in a
`%%gpudiag` cell, as a notebook does; the report the magic left in `_gpudiag_report` is saved.

    python notebook_cell.py PROBLEM --out DIR
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("problem")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--device", default="cpu")
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "gpudiag")
    setup = shell.run_cell(
        f"import sys; sys.path.insert(0, {str(HERE)!r})\n"
        "import workload\n"
        f"plan = workload.prepare({a.problem!r}, {a.device!r})\n"
    )
    if not setup.success:
        return 1
    early = "raise workload.PlantedCrash('planted crash before the first batch')\n"
    body = early if a.problem == "crash_early" else "truth = workload.train_loop(plan)\n"
    shell.run_cell_magic("gpudiag", f"--text --record {a.out / 'session.gpudiag'}", body)
    report = shell.user_ns.get("_gpudiag_report")
    if report is not None:
        report.save(a.out / "report.json")
    plan = shell.user_ns["plan"]
    truth = dict(shell.user_ns.get("truth") or {})
    truth["steps_run"] = plan.steps_run
    (a.out / "truth.json").write_text(
        json.dumps({**truth, "share": shell.user_ns["workload"].loop_share(truth)}) + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
