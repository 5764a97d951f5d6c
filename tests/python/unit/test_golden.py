# SPDX-License-Identifier: Apache-2.0
"""Every renderer (text, JSON, HTML, Prometheus, Chrome trace, what-if) on real inputs, against
the outputs committed under tests/golden/. A difference is either a regression or an intended
change: regenerate with tools/update_golden.py and review `git diff tests/golden`."""

from __future__ import annotations

import difflib
import importlib.util
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[3] / "tools" / "update_golden.py"
_spec = importlib.util.spec_from_file_location("update_golden", TOOL)
assert _spec is not None
assert _spec.loader is not None
golden = importlib.util.module_from_spec(_spec)
sys.modules["update_golden"] = golden
_spec.loader.exec_module(golden)


@pytest.mark.parametrize(
    ("case", "suffix", "make"), golden.outputs(), ids=[f"{c}.{s}" for c, s, _ in golden.outputs()]
)
def test_output_matches_golden(case: str, suffix: str, make: golden.Output) -> None:
    inputs = golden.inputs_of(case)
    if inputs is None:
        pytest.skip(f"{case}: its input is not in {golden.CORPUS}")
    path = golden.GOLDEN / f"{case}.{suffix}"
    assert path.exists(), f"{path} is missing: run tools/update_golden.py"
    expected = path.read_text(encoding="utf-8")
    actual = golden.render(case, suffix, make, inputs)
    if actual != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                actual.splitlines(keepends=True),
                str(path),
                "now",
                n=2,
            )
        )
        pytest.fail(
            f"{case}.{suffix} differs from its golden output "
            f"(regenerate with tools/update_golden.py if intended):\n{diff[:6000]}"
        )
