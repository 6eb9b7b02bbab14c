"""docs/index.md stays a true map: every docs page listed, every module it names exists."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.paths import REPO

INDEX = REPO / "docs" / "index.md"


def test_every_docs_page_is_listed() -> None:
    text = INDEX.read_text()
    for page in sorted((REPO / "docs").glob("*.md")):
        if page.name != "index.md":
            assert f"]({page.name})" in text, f"docs/index.md does not list {page.name}"
    for link in re.findall(r"\]\(([^)#]+)\)", text):
        assert (INDEX.parent / link).exists(), f"docs/index.md links a missing {link}"


def test_every_module_in_the_architecture_table_exists() -> None:
    rows = [ln for ln in INDEX.read_text().splitlines() if re.match(r"^\| `\w+/` \|", ln)]
    assert len(rows) >= 8  # archive, zoo, engine, server, client, cloud, tui, cli
    for row in rows:
        package = re.match(r"^\| `(\w+)/`", row).group(1)  # type: ignore[union-attr]
        modules = re.findall(r"`([\w/]+(?:\.py|/))`", row.rsplit("|", 2)[1])
        assert modules, row
        for module in modules:
            assert (REPO / "mmsctl" / package / module).exists(), (
                f"mmsctl/{package}/{module} (docs/index.md)"
            )


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    """Every heading's anchor on *page* (outside code blocks), a repeat numbered as GitHub numbers it."""
    seen: dict[str, int] = {}
    fenced = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        heading = None if fenced else re.match(r"#{1,6} (.+)", line)
        if heading:
            slug = _slug(heading[1])
            seen[slug] = seen.get(slug, -1) + 1
            seen[f"{slug}-{seen[slug]}"] = 0 if seen[slug] else -1
    return {slug for slug, count in seen.items() if count >= 0}


def test_every_anchor_link_names_a_heading() -> None:
    """`page.md#anchor` (and `#anchor` on the same page) in docs/ and README.md: a renamed heading breaks none."""
    broken = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for target, anchor in re.findall(r"\]\(([^)#\s]*\.md|)#([^)\s]+)\)", page.read_text()):
            linked = (page.parent / target) if target else page
            if not linked.exists() or anchor not in _anchors(linked):
                broken.append(f"{page.relative_to(REPO)}: {target}#{anchor}")
    assert broken == []
