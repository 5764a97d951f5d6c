#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Golden outputs: every renderer, run through the CLI on real inputs, compared with the outputs
committed under tests/golden/ (tests/python/unit/test_golden.py).

    tools/update_golden.py            rewrite tests/golden/ from the installed gpudiag
    tools/update_golden.py --check    compare only; print a unified diff of what changed

The inputs are files of ../shared/corpus (real recordings of other people's programs, read in
place, never copied) and the demo recording bundled with the package. Each case names its input,
and each output is written to tests/golden/<case>.<output>. Outputs are normalised only where
they depend on the machine that ran the renderer: the corpus folder's path and gpudiag's version.
A reviewer reads `git diff tests/golden` to see what a change did to every output.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"
CORPUS = Path(os.environ.get("GPUDIAG_CORPUS_DIR", ROOT.parent / "shared" / "corpus")).resolve()
DEMO = ROOT / "python" / "gpudiag" / "data" / "demo.gpudiag"

# case name -> input files (corpus-relative, or the demo recording). Small inputs, each chosen for
# what it exercises: a recent Kineto trace with syncs, a 2021 trace with [memory] events and a
# DataLoader stall, a CPU-only profile (steps, no GPU work), an Nsight Systems export, a torch snapshot with its allocation history, a
# two-rank job, and the bundled recording (health counters, steps, phases).
CASES: dict[str, list[str]] = {
    "kineto_pr1318": ["kineto_traces/kineto_pr1318_before_fix_trace.json"],
    "kineto_event_sync": ["kineto_traces/hta_cuda_event_sync_multi_stream_trace.json.gz"],
    "kineto_resnet50_nw0": [
        "kineto_traces/kineto_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz"
    ],
    "kineto_cpu_only": ["kineto_traces/hta_cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"],
    "nsight_con_kernel": ["nsight_sqlite/extrap_con_kernel.sqlite"],
    "snapshot_silmont2000": ["memory_snapshots/silmont2000_cs336a2_mem_snapshot.pickle"],
    "job_two_ranks": [
        "kineto_traces/hta_sampled_rank-0.json.gz",
        "kineto_traces/hta_sampled_rank-1.json.gz",
    ],
    "demo_recording": ["<demo>"],
    # `gpudiag compare` of a pair, before then after: ResNet-50 with DataLoader(num_workers=0),
    # then 4. A pair has only the outputs EXTRA names (PAIRS).
    "compare_resnet50_nw0_nw4": [
        "kineto_traces/kineto_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz",
        "kineto_traces/kineto_resnet50_num_workers_4_worker0.1623212756351.pt.trace.json.gz",
    ],
}
PAIRS = {"compare_resnet50_nw0_nw4"}
# Cases whose input is partial by design: their reports say what is missing and the CLI exits 3
# (the input-error code) for them; exiting 0 would mean the missing part went unsaid.
# job_two_ranks: two ranks of a 128-rank job.
PARTIAL = {"job_two_ranks"}

# output suffix -> how to make it from the case's inputs (argv after `gpudiag`, and whether the
# result is a file the command writes rather than its stdout)
Output = Callable[[list[str], Path], list[str]]
OUTPUTS: dict[str, Output] = {
    "txt": lambda inputs, _out: ["analyze", *inputs],
    "json": lambda inputs, _out: ["analyze", *inputs, "--format", "json"],
    "html": lambda inputs, out: ["analyze", *inputs, "--html", str(out)],
    "prom": lambda inputs, _out: ["export", *inputs, "--prometheus", "-"],
}
# Outputs only some inputs have: a timeline (Chrome trace) and an allocation history (what-if).
EXTRA: dict[str, dict[str, Output]] = {
    "kineto_pr1318": {"trace.json": lambda inputs, out: ["export", *inputs, "--chrome", str(out)]},
    "compare_resnet50_nw0_nw4": {
        "html": lambda inputs, out: ["compare", *inputs, "--output", str(out)],
    },
    "snapshot_silmont2000": {
        "whatif.txt": lambda inputs, _out: ["whatif", *inputs],
        "whatif.json": lambda inputs, _out: ["whatif", *inputs, "--format", "json"],
    },
}
WRITES_FILE = {"html", "trace.json"}


def inputs_of(case: str) -> list[str] | None:
    paths = []
    for name in CASES[case]:
        path = DEMO if name == "<demo>" else CORPUS / name
        if not path.exists():
            return None
        paths.append(str(path))
    return paths


def normalise(text: str) -> str:
    from gpudiag import __version__

    text = text.replace(str(CORPUS), "<corpus>").replace(str(DEMO), "<demo>")
    return text.replace(f'"{__version__}"', '"<version>"').replace(
        f"gpudiag {__version__}", "gpudiag <version>"
    )


def render(case: str, suffix: str, make: Output, inputs: list[str]) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"out.{suffix}"
        argv = [sys.executable, "-m", "gpudiag", *make(inputs, out)]
        done = subprocess.run(
            argv, capture_output=True, text=True, check=False, env={**os.environ, "COLUMNS": "100"}
        )
        # 0 (3 for a partial input's report), or 1 under --fail-on (not used): any other code is
        # a broken renderer
        expected = 3 if case in PARTIAL and suffix != "prom" else 0
        if done.returncode != expected:
            raise RuntimeError(
                f"{case}.{suffix}: {' '.join(argv[3:])} exited {done.returncode}:\n{done.stderr}"
            )
        text = out.read_text(encoding="utf-8") if suffix in WRITES_FILE else done.stdout
    if suffix.endswith("json"):  # stable key order and layout, whatever the writer's
        text = json.dumps(json.loads(text), indent=1, sort_keys=True) + "\n"
    return normalise(text)


def outputs() -> list[tuple[str, str, Output]]:
    pairs = [
        (case, suffix, make)
        for case in CASES
        if case not in PAIRS
        for suffix, make in OUTPUTS.items()
    ]
    pairs += [
        (case, suffix, make) for case, extra in EXTRA.items() for suffix, make in extra.items()
    ]
    return pairs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare only, print diffs")
    args = parser.parse_args()
    changed = 0
    for case, suffix, make in outputs():
        inputs = inputs_of(case)
        if inputs is None:
            print(f"skip {case}: its input is not in {CORPUS}", file=sys.stderr)
            continue
        path = GOLDEN / f"{case}.{suffix}"
        text = render(case, suffix, make, inputs)
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        if text == old:
            continue
        changed += 1
        if args.check:
            sys.stdout.writelines(
                difflib.unified_diff(
                    old.splitlines(keepends=True),
                    text.splitlines(keepends=True),
                    f"a/{path.relative_to(ROOT)}",
                    f"b/{path.relative_to(ROOT)}",
                )
            )
        else:
            GOLDEN.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    if args.check and changed:
        print(
            f"{changed} golden output(s) differ: review, then run tools/update_golden.py",
            file=sys.stderr,
        )
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
