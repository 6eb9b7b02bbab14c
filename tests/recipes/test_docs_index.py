"""docs/index.md stays a true map: every docs page listed, every module it names exists."""

from __future__ import annotations

import re

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
