"""The docs a newcomer reads stay short, linked and whole.

README.md is the front page (at most 300 lines), docs/performance.md the current figures (at
most 400); every link between the pages resolves to a file (and a heading, where it names
one); every page under docs/ is reachable from the README; BENCHMARKS.md only points to its
successor; and what `make demo DEMO_EXIT=1` requires is written in one place.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
# [text](target): a Markdown link or image; targets with a scheme are outside the repository.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _slug(heading: str) -> str:
    """The anchor a Markdown renderer gives a heading: lower case, punctuation dropped,
    spaces as hyphens."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(m.group(1)) for m in re.finditer(r"^#+ (.*)$", path.read_text(), re.M)}


def _local_links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return [t for t in LINK.findall(text) if not re.match(r"^[a-z]+:", t)]


def test_readme_is_a_front_page() -> None:
    assert _lines(README) <= 300, "README.md is over 300 lines: move the detail to docs/"


def test_performance_page_is_the_current_figures_only() -> None:
    assert _lines(DOCS / "performance.md") <= 400, (
        "docs/performance.md is over 400 lines: keep one current table per area; the "
        "history belongs in git")


def test_readme_keeps_the_two_commands() -> None:
    text = README.read_text()
    assert "make demo" in text and "make test" in text


def test_every_docs_link_in_the_readme_is_a_file() -> None:
    links = [t for t in _local_links(README) if t.startswith("docs/")]
    assert len(links) >= 10
    for target in links:
        assert (ROOT / target.split("#", 1)[0]).is_file(), f"README links to missing {target}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_between_pages_resolves(page: Path) -> None:
    for target in _local_links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        assert dest.exists(), f"{page.name} links to missing {target}"
        if anchor and dest.suffix == ".md":
            assert anchor in _anchors(dest), f"{page.name} links to missing heading {target}"


def test_every_page_is_reachable_from_the_readme() -> None:
    linked = {(ROOT / t.split("#", 1)[0]).resolve() for t in _local_links(README)}
    for page in sorted(DOCS.glob("*.md")):
        assert page.resolve() in linked, f"README does not link {page.relative_to(ROOT)}"


def test_benchmarks_md_is_a_pointer() -> None:
    stub = ROOT / "BENCHMARKS.md"
    assert _lines(stub) <= 3 and "docs/performance.md" in stub.read_text()
    text = (DOCS / "performance.md").read_text()
    for name in ("Reproduce", "Where the thresholds come from", "Verifiable index",
                 "Tile rows on SQLite"):  # the sections code comments still name
        assert re.search(rf"^#+ {re.escape(name)}$", text, re.M), name


def test_the_demo_is_described_in_one_place() -> None:
    """What DEMO_EXIT=1 requires is on docs/demo.md alone, so a change to the demo changes
    one page; the README links there."""
    criterion = "no honest claim was refuted"
    holders = [p.name for p in PAGES if criterion in " ".join(p.read_text().split())]
    assert holders == ["demo.md"], holders
    assert "docs/demo.md" in README.read_text()


def test_every_benchmark_command_in_the_docs_names_a_script_and_its_options() -> None:
    """The commands that regenerate the figures run: each names a script in benchmarks/
    (tests/test_benchmarks.py runs every one with --tiny) and only options it declares."""
    seen = 0
    for page in PAGES:
        for m in re.finditer(r"benchmarks/([\w.]+\.(?:py|sh))([^`\n]*)", page.read_text()):
            script = ROOT / "benchmarks" / m.group(1)
            assert script.is_file(), f"{page.name} names a missing benchmarks/{m.group(1)}"
            declared = set(re.findall(r"""["'](--[a-z][a-z-]*)["']""", script.read_text()))
            for option in re.findall(r"(?<![\w-])--[a-z][a-z-]*", m.group(2)):
                if script.suffix == ".py":
                    assert option in declared, f"{page.name}: {m.group(1)} has no {option}"
            seen += 1
    assert seen >= 15
