"""The docs speak of the project only, and every family performance page opens with its table.

No machine paths, no references to files outside the repository, no internal issue numbers in
docs/*.md and docs/perf/*.md; each docs/perf/*.md page except method.md starts, after its title
and at most one short paragraph, with the current-results table (method.md says what the columns
mean).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md")) + sorted((ROOT / "docs" / "perf").glob("*.md"))
PERF_PAGES = [p for p in sorted((ROOT / "docs" / "perf").glob("*.md")) if p.name != "method.md"]

FORBIDDEN = [
    (re.compile(r"/work/|/tmp/|/root/"), "a machine path"),
    (re.compile(r"\.\./shared|shared/spec|\bDESIGN\.md\b"), "a file outside the repository"),
    (re.compile(r"§\s*\d"), "a section of a document outside the repository"),
    (re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE), "an internal issue number"),
    (re.compile(r"(?<![\w&/])#\d+\b"), "an internal issue number"),
]
COLUMNS = ["op", "case", "dtype", "ours", "torch", "×", "% of limit", "card", "date"]
MAX_INTRO_LINES = 8


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_docs_exist():
    assert PERF_PAGES, "no docs/perf pages found"
    assert any(p.name == "method.md" for p in DOCS)


@pytest.mark.parametrize("path", DOCS, ids=_rel)
def test_docs_name_nothing_outside_the_project(path):
    bad = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        for pattern, what in FORBIDDEN:
            m = pattern.search(line)
            if m:
                bad.append(f"{_rel(path)}:{n}: {what}: {m.group(0)!r}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("path", PERF_PAGES, ids=_rel)
def test_perf_page_opens_with_current_table(path):
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines) and not lines[i].strip():
        i += 1
    assert i < len(lines) and lines[i].startswith("# "), f"{_rel(path)}: no title line"
    i += 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    intro = 0
    while i < len(lines) and lines[i].strip() and not lines[i].lstrip().startswith(("|", "#")):
        intro += 1
        i += 1
    assert intro <= MAX_INTRO_LINES, f"{_rel(path)}: {intro} lines before the table (at most {MAX_INTRO_LINES})"
    while i < len(lines) and not lines[i].strip():
        i += 1
    assert i + 2 < len(lines), f"{_rel(path)}: no table after the title"
    head = _cells(lines[i])  # the fifth column names the page's peer (torch, Dao, ...)
    ok = len(head) == len(COLUMNS) and head[:4] == COLUMNS[:4] and head[5:] == COLUMNS[5:] and head[4]
    assert ok, f"{_rel(path)}:{i + 1}: table header is {head}, want {COLUMNS} (any peer name in the fifth column)"
    assert set(_cells(lines[i + 1])) <= {"---", ":---", "---:", ":---:"}, f"{_rel(path)}:{i + 2}: no separator row"
    rows = []
    for line in lines[i + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(line)
    assert rows, f"{_rel(path)}: the table has no rows"
    for row in rows:
        cells = _cells(row)
        assert len(cells) == len(COLUMNS), f"{_rel(path)}: {row!r} has {len(cells)} cells"
        card, date = cells[-2], cells[-1]
        assert card in {"H100", "H200", "CPU", "—"}, f"{_rel(path)}: card {card!r} in {row!r}"  # CPU: cpu.md's dev box
        assert date == "—" or re.fullmatch(r"\d{4}-\d{2}-\d{2}", date), f"{_rel(path)}: date {date!r} in {row!r}"
