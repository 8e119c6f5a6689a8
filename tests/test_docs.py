"""The README stays a door (≤ 150 lines) and no relative link in README.md or docs/*.md points
at a file that does not exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
"""A markdown link's target: ``[text](target)``."""


def relative_links(page: Path) -> list[str]:
    """Targets of the page's links that are neither URLs nor same-page anchors, anchor cut."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    targets = [t.split("#", 1)[0] for t in LINK.findall(text)]
    return [t for t in targets if t and not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def test_readme_is_at_most_150_lines() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; move detail to docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_point_at_existing_files(page: Path) -> None:
    missing = [t for t in relative_links(page) if not (page.parent / t).exists()]
    assert missing == [], f"{page.name} links to missing files: {missing}"


def test_the_link_pattern_sees_links_and_skips_urls_and_anchors(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("[a](docs/x.md#y) [b](https://e.org) [c](#top) [d](../z.md)\n"
                    "```\n[e](in-code.md)\n```\n", encoding="utf-8")
    assert relative_links(page) == ["docs/x.md", "../z.md"]
