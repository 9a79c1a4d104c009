"""Comments say why, not how fast it was, and cite what a reader can open (docs/testing.md,
"How the suite stays quick and steady"): no Python file of the project cites a tracker issue
by number or a file outside the repository (extraction notes, a shared folder), and no comment or docstring
quotes seconds or bytes. Timings belong in docs/benchmarks.md and in commit messages; papers
are cited by the names of docs/design.md's table of sources, with their sections.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: the project's Python folders that are scanned
SCANNED = ("anonymizer", "checks", "serialpub", "state", "dags", "benchmarks", "tests")

#: files being rebuilt on other branches when this test was added; each is scanned once it
#: is merged, and this set is then emptied (a file listed here may not stay listed)
PENDING_REBUILD: frozenset[str] = frozenset()

#: citations a reader of the repository cannot follow, anywhere in a file
CITATIONS = {
    "an issue number": re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE),
    "the extraction notes": re.compile(r"\bseed\d{3}"),
    "a notes folder": re.compile(r"\bnotes/\w"),
    "a section of the extraction notes": re.compile(r"\bnotes\s*§", re.IGNORECASE),
    "a folder beside the repository": re.compile(r"\.\./shared\b|\bshared/papers\b"),
}

#: a quantity of time or memory, inside a comment or docstring
FIGURE = re.compile(r"\b\d+(?:[.,]\d+)?\s?(?:s|ms|µs|us|sec|seconds?|min|minutes?|bytes?|KB|kB|KiB|MB|MiB|GB|GiB)\b")


def comment_lines(source: str) -> list[tuple[int, str]]:
    """(line, text) of every ``#`` comment and every module, class and function docstring."""
    found = [
        (tok.start[0], tok.string)
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            text = first.value.value if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) else None
            if isinstance(text, str) and first is not None:
                found += [(first.lineno + i, line) for i, line in enumerate(text.splitlines())]
    return found


def violations(source: str) -> list[str]:
    """One line per citation or quoted figure in ``source`` (a Python file's text)."""
    out = [
        f"{n}: cites {what}: {line.strip()[:100]}"
        for n, line in enumerate(source.splitlines(), start=1)
        for what, pattern in CITATIONS.items()
        if pattern.search(line)
    ]
    out += [
        f"{n}: quotes {match.group(0)!r} in a comment: {text.strip()[:100]}"
        for n, text in comment_lines(source)
        if (match := FIGURE.search(text))
    ]
    return sorted(out)


def scanned_files() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for folder in SCANNED for p in (ROOT / folder).rglob("*.py"))


def test_the_scan_finds_each_kind_of_violation() -> None:
    # written at run time, so that this file does not hold what it looks for
    planted = "\n".join(
        [
            '"""A module (see ' + "Issue" + " 12 and " + "seed" + '000.md)."""',
            "x = 1  # was 3." + "5 s before, and 40 " + "MB",
            "def f():",
            '    """Holds 2 ' + "GiB at 50M." + '"""',
            "# from ../" + "sha" + "red/papers/" + "no" + "tes/x.md",
            "# the block form (" + "no" + "tes " + "§A.6)",
        ]
    )
    found = violations(planted)
    assert any("an issue number" in v for v in found), found
    assert any("the extraction notes" in v for v in found), found
    assert any("a notes folder" in v for v in found), found
    assert any("a folder beside the repository" in v for v in found), found
    assert any("a section of the extraction notes" in v for v in found), found
    assert [v.split(":")[0] for v in found if "quotes" in v] == ["2", "4"], found
    assert violations("x = 1  # one pass over the rows, not two\n") == []


def test_the_pending_files_exist() -> None:
    # a name that matches nothing would hide a typo, or a file renamed on its branch
    assert sorted(p for p in PENDING_REBUILD if not (ROOT / p).is_file()) == []


def test_no_issue_citations_outside_files_or_figures_in_comments() -> None:
    found = [
        f"{path}:{line}"
        for path in scanned_files()
        if path not in PENDING_REBUILD
        for line in violations((ROOT / path).read_text(encoding="utf-8"))
    ]
    assert not found, "\n".join(found)


def test_the_docs_cite_no_issue_numbers() -> None:
    pages = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
    found = [
        f"{page.relative_to(ROOT)}:{n}: {line.strip()[:100]}"
        for page in pages
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1)
        if CITATIONS["an issue number"].search(line)
    ]
    assert not found, "\n".join(found)


def test_one_word_per_concept_cell_not_combo() -> None:
    # docs/concepts.md: a distinct combination of QI leaves is a *cell* everywhere; the word
    # is built at run time so that this file does not hold what it looks for
    word = re.compile("com" + "bo", re.IGNORECASE)
    found = [
        f"{path}:{n}"
        for folder in ("anonymizer", "checks", "serialpub", "state", "dags")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if word.search(line)
    ]
    assert found == [], found


def test_no_module_of_the_package_over_500_lines() -> None:
    # a longer module holds more than one job (docs/design.md): move a responsibility out
    long = {
        str(p.relative_to(ROOT)): n
        for p in sorted((ROOT / "serialpub").rglob("*.py"))
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 500
    }
    assert long == {}, long
