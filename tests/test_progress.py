"""The progress line: announced off a terminal, a bar in place on one."""

import io
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from coded_shuffle._progress import Progress, say


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_only_the_announcement():
    err = io.StringIO()
    with Progress("walking the permutation", total=10, stream=err) as bar:
        for _ in range(10):
            bar.advance()
    assert err.getvalue() == "walking the permutation ...\n"


def test_on_a_terminal_a_bar_that_ends_full():
    err = Terminal()
    with Progress("packing", total=4, stream=err, unit="cycles") as bar:
        bar.update(2)
        bar.advance(2)
    text = err.getvalue()
    assert text.startswith("\rpacking: [")
    assert text.endswith("\n")
    last = text.rstrip("\n").split("\r")[-1]
    assert "4/4 cycles 100%" in last
    assert "#" * Progress.WIDTH in last


def test_without_total_a_count():
    err = Terminal()
    with Progress("reading", stream=err, unit="records") as bar:
        bar.advance(7)
    assert "7 records" in err.getvalue().split("\r")[-1]


def test_silent_when_asked():
    err = Terminal()
    with Progress("x", total=1, stream=err, enabled=False, announce=False) as bar:
        bar.advance()
    assert err.getvalue() == ""


def test_close_twice_writes_once():
    err = Terminal()
    bar = Progress("x", total=1, stream=err)
    bar.start()
    bar.close()
    bar.close()
    assert err.getvalue().count("\n") == 1


def test_progress_exceptions():
    with pytest.raises(ValueError, match="'total' must be at least 0, not -1"):
        Progress("x", total=-1)


def test_clear_erases_the_bar_once_and_the_next_update_redraws():
    err = Terminal()
    bar = Progress("x", total=4, stream=err)
    bar.start()
    bar.clear()
    bar.clear()  # nothing drawn any more: writes nothing
    assert err.getvalue().count("\r\x1b[K") == 1 and err.getvalue().endswith("\r\x1b[K")
    bar.update(1)  # drawn again at once, whatever the interval
    assert err.getvalue().split("\r")[-1].startswith("x: [")
    bar.close()
    bar.clear()  # closed: nothing to erase
    assert err.getvalue().endswith("\n")


def test_clear_off_a_terminal_writes_nothing():
    err = io.StringIO()
    with Progress("x", total=1, stream=err) as bar:
        bar.clear()
    assert err.getvalue() == "x ...\n"


class Writes:
    """A stream that keeps each ``write`` call apart."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def write(self, text: str) -> None:
        self.calls.append(text)

    def flush(self) -> None:
        self.calls.append("<flush>")


def test_a_line_goes_out_in_one_write_then_a_flush():
    out = Writes()
    say("rank 2: no answer from worker 1 within 3 s", out)  # type: ignore[arg-type]
    assert out.calls == ["rank 2: no answer from worker 1 within 3 s\n", "<flush>"]


def test_unbuffered_ranks_sharing_a_pipe_never_cut_into_each_others_lines():
    """Three processes, unbuffered (``PYTHONUNBUFFERED``, where ``print`` writes a line's text and
    its newline apart), each write 2,000 lines to one pipe: every line read is whole."""
    code = (
        "import sys; from coded_shuffle._progress import say\n"
        + "for i in range(2000): say(f'rank {sys.argv[1]}: line {i} ' + 'x' * 60)"
    )
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    r, w = os.pipe()
    procs = [subprocess.Popen([sys.executable, "-c", code, str(k)], stderr=w, env=env) for k in range(3)]
    os.close(w)
    timer = threading.Timer(60, lambda: [p.kill() for p in procs])  # a bound on the read below
    timer.start()
    with os.fdopen(r, encoding="utf-8") as pipe:
        lines = pipe.read().splitlines()
    timer.cancel()
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
    assert len(lines) == 6000
    assert all(re.fullmatch(r"rank [012]: line \d+ x{60}", line) for line in lines)


def test_the_package_writes_its_lines_through_say():
    """No module prints to standard error with ``print`` (its text and newline would go out apart
    when unbuffered): every line goes through :func:`coded_shuffle._progress.say`."""
    root = Path(__file__).resolve().parent.parent / "coded_shuffle"
    found = [
        f"{path.relative_to(root)}:{n}"
        for path in sorted(root.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "file=sys.stderr" in line
    ]
    assert found == []
