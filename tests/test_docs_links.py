"""The README stays a newcomer's page (issue 28 item 10) and every relative link in it and in docs/ leads somewhere."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def _links(page: Path) -> list[tuple[str, str]]:
    """Relative link targets of a Markdown page, with their anchors ('' when none)."""
    return [(m[1], m[2] or "") for m in LINK.finditer(page.read_text()) if "://" not in m[1]]


def _anchors(page: Path) -> set[str]:
    """GitHub-style anchors of a page's headings."""
    out = set()
    for line in page.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add("#" + re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def test_readme_reads_in_two_screens():
    """What it is, the screenshot, the two commands, three ways to a real job, keys, commands, links: under 800 words."""
    text = (REPO / "README.md").read_text()
    assert len(text.split()) <= 800
    assert "bash scripts/test.sh" in text  # the CI contract (.ci/run)
    assert ".venv/bin/pip install -q -e . && .venv/bin/cmdare-tui" in text
    for page in ("sources", "panes", "commands", "security", "models", "performance", "architecture"):
        assert f"(docs/{page}.md)" in text


def test_every_relative_link_resolves():
    """README.md and docs/*.md: each relative link names a file that exists, and its anchor a heading there."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    for page in pages:
        for target, anchor in _links(page):
            dest = (page.parent / target).resolve()
            assert dest.exists(), f"{page.name}: {target}"
            if anchor and dest.suffix == ".md":
                assert anchor in _anchors(dest), f"{page.name}: {target}{anchor}"
