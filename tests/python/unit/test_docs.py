# SPDX-License-Identifier: Apache-2.0
"""The front door stays true: every relative link of the README and the docs leads to a file (and
an anchor to a heading there), the README's excerpt of the demo's output is what the demo prints
(tests/golden/demo_recording.txt), and the README stays short enough to read first."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
PAGES = [README, ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\]\(([^)\s]+)\)")

pytestmark = pytest.mark.skipif(not README.exists(), reason="not run from a source checkout")


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as
    hyphens, a repeated heading numbered ("-1", "-2")."""
    anchors: set[str] = set()
    for line in FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        heading = re.match(r"#+\s+(.*)", line)
        if heading is None:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
        anchor, n = slug, 0
        while anchor in anchors:
            n += 1
            anchor = f"{slug}-{n}"
        anchors.add(anchor)
    return anchors


def _broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no heading with that anchor")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_leads_somewhere(page: Path) -> None:
    assert _broken_links(page) == []


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[here](#title), [gone](missing.md), [nowhere](#elsewhere)\n")
    assert _broken_links(page) == [
        "missing.md: no such file",
        "#elsewhere: no heading with that anchor",
    ]


def test_the_readme_excerpt_is_what_the_demo_prints() -> None:
    """Each line of the excerpt is a line of the demo's output (or its start, where the excerpt
    cuts it with " ..."), in the output's order; a line "..." stands for lines left out."""
    section = README.read_text(encoding="utf-8").split("## What it says", 1)[1]
    excerpt = section.split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    golden = (ROOT / "tests/golden/demo_recording.txt").read_text(encoding="utf-8").splitlines()
    at = 0
    for line in excerpt:
        if line.strip() == "...":
            continue
        cut = line.endswith(" ...")
        start = (line[: -len(" ...")] if cut else line).replace(
            "gpudiag 0.1.0 ", "gpudiag <version> "
        )
        found = next((i for i in range(at, len(golden)) if golden[i].startswith(start)), None)
        assert found is not None, f"not in the demo's output after line {at}: {line!r}"
        assert cut or golden[found] == start, f"{golden[found]!r} is cut without ' ...'"
        at = found + 1


def test_the_readme_is_short() -> None:
    """What a newcomer reads first: the details live in docs/ (issue 39)."""
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 200
