"""Relative links in README.md and docs/*.md point to files and headings that exist."""

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"`+[^`]*`+")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            out.append(line)
    return out


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, blanks to hyphens."""
    text = heading.replace("`", "").strip().lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of the headings of ``page``; a repeated heading gets ``-1``, ``-2``, ..."""
    found, count = set(), {}
    for line in prose_lines(page.read_text(encoding="utf-8")):
        m = HEADING.match(line)
        if m:
            base = slug(m.group(1))
            n = count.get(base, 0)
            count[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def test_slug():
    assert slug("Coded shuffling or a direct exchange between workers?") == (
        "coded-shuffling-or-a-direct-exchange-between-workers"
    )
    assert slug("`py1e` without a global sort") == "py1e-without-a-global-sort"
    assert slug("Wire format, version 2") == "wire-format-version-2"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page):
    prose = "\n".join(CODE_SPAN.sub("", line) for line in prose_lines(page.read_text(encoding="utf-8")))
    targets = LINK.findall(prose)  # link texts may run over a line break
    problems = []
    for target in targets:
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            problems.append(f"{target}: no such file")
        elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
            problems.append(f"{target}: no heading with the anchor #{anchor}")
    assert not problems, "\n".join(problems)


def test_readme_wheel_name_is_this_version():
    # The install hint names the wheel a build of this checkout writes.
    import coded_shuffle

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    names = set(re.findall(r"coded_shuffle-([0-9][^-]*)-py3-none-any\.whl", text))
    assert names == {coded_shuffle.__version__}


def test_readme_rate_sample_is_what_the_command_prints(capsys, monkeypatch):
    """The table and notes under the README's first ``rate`` command, as the command prints them
    (the sample once lacked the ``gap`` column and the notes)."""
    import io

    from coded_shuffle.cli import main

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("echo '[[2,1,2],[2,1,2],[1,3,1]]' | coded-shuffle rate --matrix -\n", 1)[1]
    shown = []
    for line in block.splitlines():
        if not line.startswith("# "):
            break
        shown.append(line[2:])
    monkeypatch.setattr("sys.stdin", io.StringIO("[[2,1,2],[2,1,2],[1,3,1]]"))
    assert main(["rate", "--matrix", "-"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert [s.rstrip() for s in shown] == [p.rstrip() for p in printed] and len(shown) == 4
