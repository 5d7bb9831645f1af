"""The README and the docs pages: the README stays short, every link between them lands on a file
and a heading that exist, and the committed results page is the report rule's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from psp.report.pages import FLOOR_NOTE, PAGE_INTRO

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a Markdown page's headings: lowercased, punctuation dropped, spaces
    as hyphens (code fences skipped)."""
    found, fenced = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def test_readme_is_at_most_200_lines():
    assert len((REPO / "README.md").read_text(encoding="utf-8").splitlines()) <= 200


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_land_on_a_file_and_heading(page):
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):  # an absolute URL
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name}: {target}: no such file"
        if anchor:
            assert anchor in anchors(linked), f"{page.name}: {target}: no such heading"


def test_every_docs_page_is_linked_from_the_readme():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for page in (REPO / "docs").glob("*.md"):
        assert f"(docs/{page.name}" in readme, f"docs/{page.name} is not linked from the README"


def test_committed_results_page_is_the_report_rules():
    """docs/results.md is a copy of a full run's results/results.md, written by the current
    page writer: its opening is the writer's, and it holds every paper table."""
    page = (REPO / "docs/results.md").read_text(encoding="utf-8")
    assert page.startswith(f"# Results\n\n{PAGE_INTRO}\n\n{FLOOR_NOTE}\n\n")
    for title in (
        "## Table 1: training data",
        "## Table 2: English STS",
        "## Table 3: SemEval-2017 STS",
        "## Table 4: Tatoeba",
        "## Mining quality",
        "## Table 5: encoding speed",
    ):
        assert f"\n{title}" in page
    assert "![" not in page
