"""The progress line: announced off a terminal, a bar in place on one."""

import io

import pytest

from coded_shuffle._progress import Progress


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
