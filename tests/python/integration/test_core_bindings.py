# SPDX-License-Identifier: Apache-2.0
"""gpudiag._core: the stub matches the module, errors map to the GpudiagError family, and the
offline entry points fail cleanly on bad input."""

from __future__ import annotations

import ast
import gzip
from pathlib import Path

import pytest

import gpudiag
from gpudiag import _core

STUB = Path(gpudiag.__file__).with_name("_core.pyi")
HELPERS = {"_Enum"}  # stub-only base class


def _stub_names() -> set[str]:
    tree = ast.parse(STUB.read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_stub_lists_exactly_the_module_names() -> None:
    module = {n for n in dir(_core) if not n.startswith("_")}
    stub = {n for n in _stub_names() - HELPERS if not n.startswith("_")}
    assert module - stub == set(), "bound but missing from _core.pyi"
    assert stub - module == set(), "in _core.pyi but not bound"


def test_stub_lists_class_members() -> None:
    tree = ast.parse(STUB.read_text())
    for node in tree.body:
        if not isinstance(node, ast.ClassDef) or not hasattr(_core, node.name):
            continue
        declared = {
            n.name if isinstance(n, ast.FunctionDef) else n.target.id  # type: ignore[union-attr]
            for n in node.body
            if isinstance(n, (ast.FunctionDef, ast.AnnAssign))
        }
        declared = {n for n in declared if not n.startswith("_")}  # __init__ is no member
        cls = getattr(_core, node.name)
        actual = {n for n in dir(cls) if not n.startswith("_")}
        if hasattr(cls, "__members__"):  # enum: its values, plus name/value from _Enum
            actual -= {"name", "value"}
        assert actual == declared, node.name


@pytest.mark.parametrize(
    ("code", "cls", "builtin"),
    [
        ("invalid_argument", gpudiag.InvalidArgumentError, ValueError),
        ("not_found", gpudiag.NotFoundError, FileNotFoundError),
        ("unavailable", gpudiag.UnavailableError, RuntimeError),
        ("corrupt_data", gpudiag.CorruptDataError, ValueError),
        ("unsupported", gpudiag.UnsupportedError, ValueError),
        ("io_error", gpudiag.IoError, OSError),
        ("resource_exhausted", gpudiag.ResourceExhaustedError, RuntimeError),
        ("failed_precondition", gpudiag.FailedPreconditionError, RuntimeError),
        ("internal", gpudiag.InternalError, RuntimeError),
    ],
)
def test_every_status_code_has_its_exception(code, cls, builtin) -> None:
    from gpudiag._errors import error_from_status

    err = error_from_status(code, "msg")
    assert type(err) is cls
    assert isinstance(err, builtin)
    assert isinstance(err, gpudiag.GpudiagError)
    assert err.code == code == _core.status_code_name(getattr(_core.StatusCode, code))


def test_missing_file_raises_not_found_from_cpp() -> None:
    with pytest.raises(gpudiag.NotFoundError, match=r"/nonexistent/x\.json"):
        gpudiag.analyze("/nonexistent/x.json")


def test_unrecognised_content_is_an_input_error(tmp_path: Path) -> None:
    bad = tmp_path / "random.bin"
    bad.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(gpudiag.GpudiagError) as e:
        gpudiag.analyze(bad)
    assert e.value.exit_code == 3
    assert "random.bin" in str(e.value)


def test_truncated_gzip_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "trace.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents": [' + b'{"ph": "X"},' * 1000)[:200])
    # Either refused as input, or what could be read is reported and marked as cut short.
    refused: gpudiag.GpudiagError | None = None
    try:
        report = gpudiag.analyze(path)
    except gpudiag.GpudiagError as e:
        refused = e
    if refused is not None:
        assert refused.exit_code == 3
    else:
        assert report.to_dict()["capture"]["truncated"] is True


def test_analyze_rejects_bad_arguments() -> None:
    with pytest.raises(gpudiag.InvalidArgumentError):
        gpudiag.analyze([])
    with pytest.raises(gpudiag.InvalidArgumentError):
        gpudiag.analyze("x", window="sometimes")


def test_progress_callback_errors_propagate(tmp_path: Path) -> None:
    # Whatever the importer does with the file, a progress callback that raises must surface as
    # its own exception (Ctrl-C during a long import), not as an analysis failure.
    path = tmp_path / "trace.json"
    path.write_text('{"traceEvents": []}')

    def progress(_done: int, _total: int) -> None:
        raise KeyboardInterrupt

    try:
        gpudiag.analyze(path, progress=progress)
    except KeyboardInterrupt:
        pass
    except gpudiag.GpudiagError:
        pass  # the importer refused the file before reporting progress


def test_analyze_job_combines_rank_reports() -> None:
    ranks = []
    for rank in (1, 0):
        r = _core.Report()
        source = _core.SourceInfo()
        source.rank = rank
        r.source = source
        ranks.append(r)
    job = gpudiag.Report.from_native(_core.analyze_job(ranks))
    assert [r.source["rank"] for r in job.ranks] == [0, 1]
    with pytest.raises(gpudiag.InvalidArgumentError):
        _core.analyze_job([])


def test_event_payloads_are_views_into_the_event() -> None:
    e = _core.Event()
    e.kind = _core.EventKind.counter
    e.counter.counter = _core.CounterKind.framework_reserved_bytes
    e.counter.value = 42.0
    assert e.counter.value == 42.0
    assert e.counter.counter == _core.CounterKind.framework_reserved_bytes
    assert _core.event_kind_name(e.kind) == "counter"


def test_capabilities_say_what_is_available() -> None:
    caps = gpudiag.capabilities()
    assert caps.version == gpudiag.__version__
    assert caps.level in _core.CaptureLevel.__members__
    text = str(caps)
    assert "capture level" in text
    assert "PyTorch" in text
    assert caps.to_dict()["level"] == caps.level


def test_status_is_a_deprecated_name_of_capabilities() -> None:
    with pytest.warns(DeprecationWarning, match=r"gpudiag.capabilities\(\)"):
        old = gpudiag.status()
    assert isinstance(old, gpudiag.Capabilities)
    with pytest.warns(DeprecationWarning, match=r"\.level"):
        assert old.capture_level == old.level
    with pytest.warns(DeprecationWarning, match="Capabilities"):
        gpudiag.Status(version="x", level="no_gpu")


def test_enums_are_bound_from_the_cpp_name_tables() -> None:
    # CounterKind::kCaptureOverheadNs was once missing from a hand-written list.
    assert "capture_overhead_ns" in _core.CounterKind.__members__
    for name, value in _core.EventKind.__members__.items():
        assert _core.event_kind_name(value) == name
    assert list(_core.InputFormat.__members__) == [
        "unknown",
        "recording",
        "kineto_json",
        "torch_snapshot",
        "report_json",
        "nsight_sqlite",
        "flight_recorder",
    ]
    assert _core.input_format_name(_core.InputFormat.kineto_json) == "kineto_json"


def test_allocation_sites_follow_the_cpp_rule() -> None:
    frames = [
        _core.StackFrame("/x/site-packages/torch/nn/linear.py", "forward", 3),
        _core.StackFrame("/home/me/train.py", "step", 12),
    ]
    assert _core.allocation_site(frames) == "me/train.py:12 step"
