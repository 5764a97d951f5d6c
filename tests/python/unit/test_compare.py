# SPDX-License-Identifier: Apache-2.0
"""`gpudiag compare`, `gpudiag baseline` and gpudiag.compare() on real before/after pairs of the
corpus: the verdict both ways, the exit codes of --fail-on, baselines kept and compared against,
the HTML and notebook display, and the errors a user meets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gpudiag
from conftest import RANK_TRACES, STARVED_TRACE, corpus_file
from gpudiag import cli
from gpudiag._errors import EXIT_INPUT, EXIT_OK, EXIT_USAGE, EXIT_VERDICT

# ResNet-50 with DataLoader(num_workers=0), then num_workers=4: the same program, its input
# pipeline fixed.
FIXED_TRACE = "kineto_traces/kineto_resnet50_num_workers_4_worker0.1623212756351.pt.trace.json.gz"


@pytest.fixture
def pair() -> tuple[str, str]:
    return str(corpus_file(STARVED_TRACE)), str(corpus_file(FIXED_TRACE))


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# The step time spent waiting for the next batch (docs/compare.md).
INPUT_WAIT = "critical_path_input_ns"


def test_fixing_the_input_pipeline_is_an_improvement_decided_by_the_input_wait(
    pair: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _cli(capsys, "compare", *pair, "--format", "json")
    assert code == EXIT_OK
    doc = json.loads(out)
    assert doc["verdict"] == "improvement"
    assert doc["comparable"] is True
    assert INPUT_WAIT in doc["deciding"]
    code, text, _ = _cli(capsys, "compare", *pair)
    assert code == EXIT_OK
    assert doc["headline"] in text
    assert doc["headline"].startswith("Improvement")


def test_the_reverse_order_is_a_regression_and_fails_the_gate(
    pair: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    before, after = pair
    code, out, err = _cli(capsys, "compare", after, before, "--fail-on", "regression")
    assert code == EXIT_VERDICT
    comparison = gpudiag.compare(after, before)
    assert comparison.headline in out
    assert f"the verdict is regression (--fail-on): exit code {EXIT_VERDICT}" in err
    assert comparison.verdict == "regression"
    assert INPUT_WAIT in [d["key"] for d in comparison.deciding]
    # The gate passes the improvement, and the verdicts it does not name.
    assert cli.main(["compare", before, after, "--fail-on", "regression"]) == EXIT_OK
    assert cli.main(["compare", after, before, "--fail-on", "mixed,inconclusive"]) == EXIT_OK
    capsys.readouterr()


def test_a_run_against_itself_is_unchanged(pair: tuple[str, str]) -> None:
    report = gpudiag.analyze(pair[0])
    comparison = gpudiag.compare(report, pair[0])
    assert comparison.verdict == "unchanged"
    assert comparison.deciding == []
    assert comparison.to_dict()["verdict"] == "unchanged"


def test_comparison_views_are_its_json_document(pair: tuple[str, str]) -> None:
    comparison = gpudiag.compare(*pair)
    doc = json.loads(comparison.to_json())
    assert doc == comparison.to_dict()
    assert doc["verdict"] == comparison.verdict
    assert doc["comparable"] == comparison.comparable
    assert doc["reasons"] == comparison.reasons
    assert doc["deltas"] == comparison.deltas
    assert [d["key"] for d in comparison.deciding] == doc["deciding"]
    assert comparison.headline in comparison.text
    assert str(comparison) == comparison.summary()
    assert "improvement" in repr(comparison)


def test_html_shows_the_verdict_and_what_decided_it(
    pair: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    comparison = gpudiag.compare(*pair)
    fragment = comparison._repr_html_()
    assert "<script" not in fragment
    assert 'class="verdict v-improvement"' in fragment
    for delta in comparison.deciding:
        assert str(delta["label"]) in fragment
    page = tmp_path / "compare.html"
    code, out, _ = _cli(capsys, "compare", *pair, "--output", str(page))
    assert code == EXIT_OK
    assert out.strip() == comparison.headline  # the file gets the page, the log its headline
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert comparison.save_html(tmp_path / "api.html").read_text(encoding="utf-8") == (
        page.read_text(encoding="utf-8")
    )


def test_a_notebook_displays_a_comparison_as_html(pair: tuple[str, str]) -> None:
    formatters = pytest.importorskip("IPython.core.formatters")
    shown, _ = formatters.DisplayFormatter().format(gpudiag.compare(*pair))
    assert "gpudiag comparison" in shown["text/html"]
    assert "improvement" in shown["text/plain"]  # the repr


# ---- baselines -------------------------------------------------------------------------------


def test_a_baseline_is_kept_listed_and_compared_against(
    pair: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = str(tmp_path / "baselines")
    before, after = pair
    code, out, _ = _cli(capsys, "baseline", "save", "main", before, "--dir", folder)
    assert code == EXIT_OK
    kept = Path(folder) / "main.json"
    assert gpudiag.detect_format(kept) == "report_json"  # the report, never the trace
    assert gpudiag.Report.load(kept).to_dict() == gpudiag.analyze(before).to_dict()
    # A baseline is an input too: kept again under another name.
    assert _cli(capsys, "baseline", "save", "release", "main", "--dir", folder)[0] == EXIT_OK
    assert (Path(folder) / "release.json").read_bytes() == kept.read_bytes()
    code, out, _ = _cli(capsys, "baseline", "list", "--dir", folder, "--format", "json")
    assert [b["name"] for b in json.loads(out)["baselines"]] == ["main", "release"]
    code, out, _ = _cli(capsys, "baseline", "list", "--dir", folder)
    assert "main" in out
    assert before in out
    code, out, _ = _cli(
        capsys, "compare", "main", after, "--baseline-dir", folder, "--fail-on", "regression"
    )
    assert code == EXIT_OK
    assert "Improvement" in out
    code, out, _ = _cli(
        capsys, "compare", after, "main", "--baseline-dir", folder, "--fail-on", "regression"
    )
    assert code == EXIT_VERDICT


def test_a_kept_baseline_is_replaced_only_when_asked(
    pair: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = str(tmp_path)
    before, after = pair
    assert cli.main(["baseline", "save", "main", before, "--dir", folder]) == EXIT_OK
    kept = (tmp_path / "main.json").read_bytes()
    code, _, err = _cli(capsys, "baseline", "save", "main", after, "--dir", folder)
    assert code == EXIT_USAGE
    assert "exists" in err
    # A failed analysis leaves the kept baseline as it was, --replace or not.
    code, _, err = _cli(
        capsys, "baseline", "save", "main", "/nonexistent/t.json", "--dir", folder, "--replace"
    )
    assert code == EXIT_INPUT
    assert (tmp_path / "main.json").read_bytes() == kept
    assert [p.name for p in tmp_path.iterdir()] == ["main.json"]  # no temporary file left
    assert cli.main(["baseline", "save", "main", after, "--dir", folder, "--replace"]) == EXIT_OK
    assert (tmp_path / "main.json").read_bytes() != kept
    capsys.readouterr()


def test_the_baseline_folder_comes_from_the_environment(
    pair: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["baseline", "save", "here", pair[0]]) == EXIT_OK
    assert (tmp_path / ".gpudiag-baselines" / "here.json").is_file()
    monkeypatch.setenv("GPUDIAG_BASELINE_DIR", str(tmp_path / "ci"))
    assert cli.main(["baseline", "save", "there", pair[0]]) == EXIT_OK
    assert (tmp_path / "ci" / "there.json").is_file()
    assert gpudiag.compare("there", pair[1]).verdict == "improvement"
    # ./NAME is the file of that name, never the baseline.
    code, _, err = _cli(capsys, "compare", "./there", pair[1])
    assert code == EXIT_INPUT
    assert "./there" in err


def test_partial_input_is_not_kept_as_a_baseline_unless_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ranks = [str(corpus_file(name)) for name in RANK_TRACES]  # two ranks of a 128-rank job
    code, _, err = _cli(capsys, "baseline", "save", "job", *ranks, "--dir", str(tmp_path))
    assert code == EXIT_INPUT
    assert "only part of the input" in err
    assert not (tmp_path / "job.json").exists()
    argv = ["baseline", "save", "job", *ranks, "--dir", str(tmp_path), "--allow-partial"]
    assert cli.main(argv) == EXIT_OK
    capsys.readouterr()


@pytest.mark.parametrize("name", ["../evil", "/tmp/x", ".hidden", "a b", "", "x" * 101])
def test_a_name_that_could_leave_its_folder_is_refused(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _cli(capsys, "baseline", "save", name, "x.json", "--dir", str(tmp_path))
    assert code == EXIT_USAGE
    assert "not a baseline name" in err
    assert list(tmp_path.iterdir()) == []


def test_an_input_that_is_neither_file_nor_baseline_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _cli(
        capsys, "compare", "nightly", "/nonexistent/after.json", "--baseline-dir", str(tmp_path)
    )
    assert code == EXIT_INPUT
    assert f"'nightly' is neither a file nor a baseline kept in {tmp_path}" in err
    code, _, err = _cli(capsys, "compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert code == EXIT_INPUT
    assert "a.json" in err


def test_an_unknown_verdict_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys, "compare", "a", "b", "--fail-on", "worse")
    assert code == EXIT_USAGE
    assert "not a verdict: 'worse'" in err


def test_an_empty_baseline_folder_lists_none(tmp_path: Path, capsys) -> None:
    code, out, _ = _cli(capsys, "baseline", "list", "--dir", str(tmp_path / "none"))
    assert code == EXIT_OK
    assert "no baselines in" in out


def test_compare_help_documents_its_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["compare", "--help"])
    out = capsys.readouterr().out
    assert f"\n  {EXIT_VERDICT} " in out
    assert f"\n  {EXIT_INPUT} " in out
    with pytest.raises(SystemExit):
        cli.main(["analyze", "--help"])
    assert f"\n  {EXIT_VERDICT} " not in capsys.readouterr().out
