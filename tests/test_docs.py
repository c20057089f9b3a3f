"""The docs against the code: relative links resolve, and the commands the docs show print what
the docs quote of them (run as written where cheap), and their lists of choices are the parsers'."""

import argparse
import json
import re
import sys
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


# Documented commands, run as the docs write them, against what the docs quote of their output.

SPACES = re.compile(r"\s+")


def code_spans(page: str) -> set[str]:
    """The inline code of ``page``'s prose, each with its runs of blanks and line breaks as one
    blank (as Markdown renders a code span that runs over a line break)."""
    prose = "\n".join(prose_lines((ROOT / page).read_text(encoding="utf-8")))
    return {SPACES.sub(" ", s.strip("`")).strip() for s in CODE_SPAN.findall(prose)}


def fenced_lines(page: str) -> set[str]:
    """The lines of ``page``'s fenced code blocks (its commands), stripped."""
    out, fenced = set(), False
    for line in (ROOT / page).read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif fenced:
            out.add(line.strip())
    return out


def printed(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """What ``coded-shuffle ARGV`` prints on standard output, blanks as :func:`code_spans` has them."""
    from coded_shuffle.cli import main

    capsys.readouterr()
    assert main([*argv, "--no-progress"] if argv[0] == "simulate" else argv) == 0
    return SPACES.sub(" ", capsys.readouterr().out)


def shows(quote: str, output: str) -> bool:
    """Whether ``output`` holds ``quote``, each ``...`` in it standing for any text."""
    pattern = ".*?".join(re.escape(part) for part in quote.split("..."))
    return re.search(pattern, output) is not None


# (page, the command as the page writes it, what the page quotes of its output)
QUOTED = [
    (
        "docs/cli.md",
        "coded-shuffle rate -K 8 -N 8000 --network master=1000,up=100,down=1000,multicast -B 1024",
        [
            "on the network ...",
            "bound 0.007234; predicted exchange 0.07234 (uplink), coded 0.02919 (master=downlink), "
            "uncoded 0.05704 (master), split 0.02239 (downlink=uplink); choice split: ...",
            "split 0.02239",
            "the split 69% coded",
        ],
    ),
    (
        "docs/cli.md",
        "coded-shuffle simulate -K 8 -N 8000 --mode auto --network master=1000,up=100,down=1000,multicast",
        ["mode = split (mode auto chose split: predicted 0.0224 s against coded 0.0292 s, ...)"],
    ),
    (
        "docs/cli.md",
        "coded-shuffle simulate --workers 8,6,8 -N 4800",
        ["8 -> 6 2773 2773 1.000 4215 2.84 1.23", "6 -> 8 2750 2750 1.000 4221"],
    ),
    (
        "docs/cli.md",
        "coded-shuffle simulate --workers 8,6,8 -N 960 -B 8192 --storage 2",
        ["8 -> 6 re-cut 9.14 9.14 0.28 0.28 8.86 15.73", "6 -> 8 re-cut 8.34 8.34 0.00 0.00 8.34 15.73"],
    ),
]


@pytest.mark.parametrize(("page", "command", "quotes"), QUOTED, ids=lambda v: v if isinstance(v, str) else "")
def test_quoted_output_is_what_the_command_prints(page, command, quotes, capsys):
    spans = code_spans(page)
    assert command in spans | fenced_lines(page), f"{page} no longer shows {command!r}"
    output = printed(command.split()[1:], capsys)
    for quote in quotes:
        assert quote in spans, f"{page} no longer quotes {quote!r}"
        assert shows(quote, output), f"{command} does not print {quote!r}:\n{output}"


def test_mode_auto_chooses_as_the_networks_section_says(capsys):
    """docs/cli.md: with slow uplinks and multicast the split, on a switch of equal ports the
    exchange, with a fast master and no multicast the uncoded unicast (the first transition's
    choice: one transition is enough)."""
    text = SPACES.sub(" ", (ROOT / "docs/cli.md").read_text(encoding="utf-8"))
    said = re.search(
        r"runs the (\w+) \(`mode = (\w+) .*?on `([^`]+)` it runs the (\w+), "
        r"on `([^`]+)` .*? the (\w+) unicast",
        text,
    )
    assert said, "the sentence of docs/cli.md on --mode auto moved"
    first, mode, equal, on_equal, fast, on_fast = said.groups()
    assert first == mode
    base = ["simulate", "-K", "8", "-N", "8000", "--mode", "auto", "--transitions", "1", "--network"]
    for spec, want in (("master=1000,up=100,down=1000,multicast", mode), (equal, on_equal), (fast, on_fast)):
        assert f"mode = {want} (mode auto chose {want}:" in printed([*base, spec], capsys), spec


def python_blocks(page: str) -> list[str]:
    """The fenced ``python`` blocks of ``page``."""
    return re.findall(r"^```python\n(.*?)^```", (ROOT / page).read_text(encoding="utf-8"), re.M | re.S)


PRINT_NOTE = re.compile(r"^\s*print\(.*\)\s+#\s*(.*)$")


#: The Python blocks whose every ``print(...)  # NOTE`` gives what it prints (those of the other
#: pages may say what a line means instead): the README's without torch, and docs/storage.md's.
NOTED_BLOCKS = [b for b in python_blocks("README.md") if "torch" not in b] + python_blocks("docs/storage.md")


@pytest.mark.parametrize("block", NOTED_BLOCKS, ids=lambda b: b.split("\n", 1)[0])
def test_python_blocks_print_what_their_notes_say(block, tmp_path, monkeypatch):
    """Each ``print(...)  # NOTE`` of :data:`NOTED_BLOCKS`, run as written: the lines that print
    writes, joined by ", ", are NOTE; a NOTE ``A, then B, ...`` is the first lines A and B of more
    (the README's loader once showed its second line as the first)."""
    monkeypatch.chdir(tmp_path)  # the blocks write their files in the current directory
    said: dict[int, list[str]] = {}

    def record(*args: object) -> None:
        said.setdefault(sys._getframe(1).f_lineno, []).append(" ".join(map(str, args)))

    exec(compile(block, "README.md", "exec"), {"print": record, "__name__": "readme"})
    notes = {n: PRINT_NOTE.match(line) for n, line in enumerate(block.splitlines(), start=1)}
    notes = {n: m.group(1) for n, m in notes.items() if m}
    assert notes, "a block without a note"
    for n, note in notes.items():
        lines = said.get(n, [])
        more = note.endswith(", ...")
        want = note.removesuffix(", ...").split(", then ") if more or ", then " in note else [note]
        got = lines[: len(want)] if more else lines
        assert got == want and (len(lines) > len(want)) == more, (note, lines)


def test_readme_storage_figures_are_the_first_transitions(capsys):
    """The README's figures of ``simulate -K 8 -N 8000 -B 2048 --storage 2``, against the same
    command's first transition and that of one batch stored (its uncoded column was once quoted
    from the one-batch run)."""
    text = SPACES.sub(" ", (ROOT / "README.md").read_text(encoding="utf-8"))
    command = "simulate -K 8 -N 8000 -B 2048 --storage 2"
    said = re.search(
        rf"`{command}` sends ([\d.]+) MB of pieces \(two a record\) at the first transition, against "
        r"([\d.]+) MB for every missing piece sent alone; with one batch stored, ([\d.]+) MB coded and "
        r"([\d.]+) MB uncoded",
        text,
    )
    assert said, "the README's sentence on --storage moved"
    figures = []
    for argv in (command.split(), command.split()[:-2]):
        row = json.loads(printed([*argv, "--transitions", "1", "--json"], capsys).split("\n", 1)[0])
        figures += [f"{row['coded_bytes'] / 1e6:.2f}", f"{row['uncoded_bytes'] / 1e6:.2f}"]
    assert list(said.groups()) == figures


def test_readme_random_epochs_comment(capsys):
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    (line,) = [s for s in text.splitlines() if s.startswith("coded-shuffle rate --workers 8 --points 100000")]
    command, note = line.split("#")
    coded, uncoded = re.fullmatch(r" random epochs: (\d+) against (\d+)", note).groups()
    first = printed(command.split()[1:], capsys)  # the first transition's row
    assert re.search(rf" 1 8 100000 permutation greedy {uncoded} \d+ {coded} ", first), first


def choices_of(parser: argparse.ArgumentParser) -> dict[str, list[set[str]]]:
    """Every option with choices of ``parser`` and its subcommands: its sets of choices."""
    out: dict[str, list[set[str]]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                for option, sets in choices_of(sub).items():
                    out.setdefault(option, []).extend(sets)
        elif action.choices and action.option_strings and action.help != argparse.SUPPRESS:
            for option in action.option_strings:
                out.setdefault(option, []).append(set(action.choices))
    return out


#: Old names a command still takes and the docs name apart (``alltoallv``: ``exchange``).
ALIASES = {"alltoallv"}
#: Where an option's values are listed as ``--OPTION a|b|c`` (``\|`` inside a table): the pages,
#: the MPI programs and the package's docstrings.
LISTING = [*PAGES, *sorted((ROOT / "mpi").glob("*.py")), *sorted((ROOT / "coded_shuffle").rglob("*.py"))]


def test_every_listed_choice_is_a_commands_own():
    """``--mode a|b|...``, ``--strategy ...`` and every other list of an option's values in the
    docs is the whole set of some command's choices of it (``coded-shuffle``'s commands and the
    MPI program's), taken from the parsers: a new mode or strategy is listed everywhere."""
    from coded_shuffle.cli import build_parser
    from coded_shuffle.cli.job import add_job_arguments

    program = argparse.ArgumentParser()
    add_job_arguments(program, launcher=False)
    known = choices_of(build_parser())
    for option, sets in choices_of(program).items():
        known.setdefault(option, []).extend(sets)
    listed = re.compile(r"(--[a-z][a-z-]*) ([a-z0-9][a-z0-9-]*(?:(?:\\\||\|)[a-z0-9][a-z0-9-]*)+)")
    problems, seen = [], 0
    for path in LISTING:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for option, values in listed.findall(line):
                if option not in known:
                    continue
                seen += 1
                given = set(values.replace("\\|", "|").split("|"))
                if not any(given == s - ALIASES for s in known[option]):
                    problems.append(f"{path.relative_to(ROOT)}:{n}: {option} {sorted(given)} is none of "
                                    f"{[sorted(s - ALIASES) for s in known[option]]}")  # fmt: skip
    assert seen >= 10 and not problems, "\n".join(problems)


def test_the_orders_listed_are_the_orders():
    from coded_shuffle.orders import EPOCH_ORDERS

    text = (ROOT / "docs/cli.md").read_text(encoding="utf-8")
    (row,) = [s for s in text.splitlines() if s.startswith("| `--order NAME` | the epoch order: ")]
    listed = re.findall(r"`([a-z0-9]+)`", row.split("(")[0])
    assert sorted(listed) == sorted(["auto", *EPOCH_ORDERS]) and len(set(listed)) == len(listed)


def test_the_plots_listed_are_the_plots():
    from coded_shuffle.cli import build_parser

    (plot,) = [a for a in build_parser("plot")._actions if isinstance(a, argparse._SubParsersAction)]
    (kinds,) = [a for a in plot.choices["plot"]._actions if isinstance(a, argparse._SubParsersAction)]
    text = (ROOT / "docs/cli.md").read_text(encoding="utf-8")
    (row,) = [s for s in text.splitlines() if s.startswith("| [`plot`](#plot) |")]
    listed = [s.split()[0] for s in re.findall(r"`([^`]+)`", row.split("|")[2].split(":")[0])]
    assert listed == list(kinds.choices)


def test_the_predicted_modes_listed_are_the_networks():
    from coded_shuffle.network import MODES

    text = SPACES.sub(" ", (ROOT / "docs/cli.md").read_text(encoding="utf-8"))
    listed = re.search(r"\(`predicted_seconds`, by mode: ((?:`\w+`, )*`\w+`);", text).group(1)
    assert set(re.findall(r"`(\w+)`", listed)) == set(MODES)


def test_every_module_of_the_package_is_in_the_layers_table():
    """docs/library.md's table of layers names each public module and subpackage of the package
    (it once lacked ``torch`` and ``network``)."""
    package = ROOT / "coded_shuffle"
    modules = {p.stem for p in package.glob("*.py")} | {p.parent.name for p in package.glob("*/__init__.py")}
    public = {m for m in modules if not m.startswith("_")}
    text = (ROOT / "docs/library.md").read_text(encoding="utf-8")
    table = text.split("## Layers", 1)[1].split("\n\n")[2]
    named = {n for row in table.splitlines()[2:] for n in re.findall(r"`(\w+)`", row.split("|")[1])}
    assert named == public


def test_the_loader_says_where_records_stay_whole():
    """The in-process loader's ``storage`` says below which size records stay whole: the size
    under which :func:`~coded_shuffle.engine.state.storage_pieces` makes one piece."""
    from coded_shuffle.engine.state import storage_pieces
    from coded_shuffle.loader import InProcessLoader

    doc = SPACES.sub(" ", InProcessLoader.__doc__ or "")
    B = int(re.search(r"whole below (\d+) bytes", doc).group(1))
    for K, M in ((8, 2), (16, 3), (64, 2)):
        assert storage_pieces(B - 1, K, M)[0] == 1 < storage_pieces(B, K, M)[0]


#: The modes of ``coded-shuffle run`` that need no network (``split`` and ``auto`` need one).
RUN_MODES = ("coded", "uncoded", "exchange", "both", "all")


def run_refusal(argv: list[str]) -> str | None:
    """The one line ``coded-shuffle run ARGV`` refuses before launch, or None (nothing launched)."""
    from coded_shuffle.cli import build_parser
    from coded_shuffle.cli._parser import UsageError
    from coded_shuffle.cli.job import check_job

    args = build_parser("run").parse_args(["run", "-K", "4", *argv])
    try:
        check_job(args, workers=4)
    except UsageError as exc:
        return str(exc)
    return None


def test_the_modes_said_to_take_storage_and_a_paced_link_are_those_run_takes():
    """docs/cli.md: ``--storage M`` with ``--mode coded`` or ``exchange``; the README: ``--link-mbps``
    with every mode, the exchange's sends paced at the workers' uplinks (once refused with it)."""
    cli = SPACES.sub(" ", (ROOT / "docs/cli.md").read_text(encoding="utf-8"))
    said = re.search(r"`--storage M` works as for `simulate`, with `--mode (\w+)` or `(\w+)`\.", cli)
    assert said, "the sentence of docs/cli.md on run --storage moved"
    takes = {m for m in RUN_MODES if run_refusal(["--storage", "2", "-B", "4096", "--mode", m]) is None}
    assert takes == set(said.groups())

    readme = SPACES.sub(" ", (ROOT / "README.md").read_text(encoding="utf-8"))
    said = re.search(
        r"`--link-mbps R` paces the master's link and each worker's uplink \(its sends of the exchange",
        readme,
    )
    assert said, "the README's sentence on --link-mbps moved"
    for mode in RUN_MODES:
        assert run_refusal(["--link-mbps", "100", "--mode", mode]) is None, mode


def test_the_lines_torch_md_quotes_of_a_lost_peer(monkeypatch, capsys):
    """docs/torch.md's "Failures" quotes the line a rank prints when a peer's connection closes
    (what the master says of a killed worker 1, and worker 0 of the master), against the line the
    transport prints on gloo's error, without a job (which rank prints it under ``torchrun`` is a
    race, tests/test_torch.py runs it)."""
    from coded_shuffle.transport import torch_dist

    class Gone:
        def wait(self, *timeout: object) -> None:
            raise RuntimeError("[gloo] Connection closed by peer [127.0.0.1]:29500")

    class Aborted(Exception):
        pass

    def abort(status: int) -> None:
        raise Aborted(status)

    monkeypatch.setattr(torch_dist.time, "sleep", lambda s: None)
    spans = code_spans("docs/torch.md")
    quote = "coded_shuffle.transport: error: the master (rank 0): lost rank 2 (worker 1): its connection"
    quote += " closed ..."
    assert quote in spans and "lost the master (rank 0)" in spans
    lines = []
    for rank, peer in ((0, 2), (1, 0)):
        link = object.__new__(torch_dist.TorchTransport)
        link.rank, link.root, link.abort = rank, 0, abort
        with pytest.raises(Aborted, match="1"):
            link._wait(Gone(), peer)
        lines.append(capsys.readouterr().err)
    assert shows(quote, lines[0]) and ": lost the master (rank 0): its connection closed" in lines[1]
