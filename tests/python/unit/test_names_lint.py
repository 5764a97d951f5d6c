# SPDX-License-Identifier: Apache-2.0
"""Enum names are written once (libgpudiag/src/core/names.cpp): tools/lint.sh fails when a name
drifts between the C++ tables and headers, the bindings, python/gpudiag/_core.pyi and the docs.
Each case edits a copy of the sources and runs the real lint on it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
COPIED = ("tools", "libgpudiag", "bindings", "docs", "README.md", "python/gpudiag/_core.pyi")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    if not (ROOT / "tools" / "lint.sh").exists():
        pytest.skip("not run from a source checkout")
    for part in COPIED:
        src, dst = ROOT / part, tmp_path / part
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst)
        else:
            shutil.copy2(src, dst)
    return tmp_path


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(tree / "tools" / "lint.sh")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_the_checkout_is_clean(tree: Path) -> None:
    result = _lint(tree)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_stub_name_that_drifts_fails(tree: Path) -> None:
    _edit(
        tree / "python/gpudiag/_core.pyi", "    kineto_json: InputFormat", "    kineto: InputFormat"
    )
    result = _lint(tree)
    assert result.returncode == 1
    assert "_core.pyi: the enums differ from the name tables" in result.stdout


def test_a_hand_written_binding_list_fails(tree: Path) -> None:
    _edit(
        tree / "bindings/bind_report.cpp",
        'bind_enum<Severity>(m, "Severity");',
        'py::enum_<Severity>(m, "Severity").value("info", Severity::kInfo);',
    )
    result = _lint(tree)
    assert result.returncode == 1
    assert "a hand-written .value" in result.stdout
    assert "Severity must be bound once" in result.stdout


def test_an_enumerator_without_a_name_fails(tree: Path) -> None:
    _edit(
        tree / "libgpudiag/include/gpudiag/event.hpp",
        "    kUserAnnotation = 6,\n",
        "    kUserAnnotation = 6,\n    kPrefetch = 7,\n",
    )
    result = _lint(tree)
    assert result.returncode == 1
    assert (
        "RangeCategory's table does not match its enumerators (unnamed: ['kPrefetch']"
        in result.stdout
    )


def test_a_renamed_cpp_name_must_reach_the_stub_and_docs(tree: Path) -> None:
    _edit(
        tree / "libgpudiag/src/core/names.cpp",
        '{InputFormat::kKinetoJson, "kineto_json"}',
        '{InputFormat::kKinetoJson, "kineto_trace"}',
    )
    result = _lint(tree)
    assert result.returncode == 1
    assert "_core.pyi" in result.stdout
    assert "docs/names.md" in result.stdout
    subprocess.run(
        ["python3", str(tree / "tools" / "gen_names.py"), "--write", "--root", str(tree)],
        check=True,
    )
    assert "kineto_trace: InputFormat" in (tree / "python/gpudiag/_core.pyi").read_text()
    assert _lint(tree).returncode == 0
