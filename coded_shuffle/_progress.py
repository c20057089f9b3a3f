"""Progress on standard error for long steps (lowest layer, imports nothing of ours).

A long step announces itself on one line before it starts, so that a user never waits on a
silent command; on a terminal it then redraws a bar in place as it advances, at most ten times
a second. Off a terminal (a pipe, a file, a test) it prints the announcement alone, never the bar.

>>> import io
>>> err = io.StringIO()
>>> with Progress("packing cycles", total=3, stream=err) as bar:
...     for _ in range(3):
...         bar.advance()
>>> err.getvalue()
'packing cycles ...\\n'
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TextIO


class Progress:
    """Announce a long step and, on a terminal, show how far it has got.

    Parameters
    ----------
    what : str
        What the step does, printed before it starts (``"compiling kernels"``).
    total : int, optional
        Units of work in all; without it the bar shows the count and the elapsed time only.
    stream : file, optional
        Where to write; standard error by default.
    enabled : bool, optional
        Draw the bar; by default only when ``stream`` is a terminal.
    announce : bool
        Print the announcement line (default); ``False`` for a bar alone, or nothing at all.
    unit : str
        Name of a unit of work, shown after the count (``"points"``).
    """

    WIDTH = 30
    INTERVAL = 0.1

    def __init__(
        self,
        what: str,
        total: int | None = None,
        *,
        stream: TextIO | None = None,
        enabled: bool | None = None,
        announce: bool = True,
        unit: str = "",
    ) -> None:
        if total is not None and total < 0:
            raise ValueError(f"Argument 'total' must be at least 0, not {total}.")
        self.what = what
        self.total = total
        self.stream = sys.stderr if stream is None else stream
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self.announce = announce
        self.unit = unit
        self.done = 0
        self._start = 0.0
        self._drawn = 0.0
        self._open = False
        self._shown = False

    def __enter__(self) -> Progress:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def start(self) -> None:
        """Print the announcement and draw an empty bar."""
        self._start = time.perf_counter()
        self._open = True
        if self.announce and not self.enabled:
            print(f"{self.what} ...", file=self.stream, flush=True)
        if self.enabled:
            self._draw()

    def advance(self, n: int = 1) -> None:
        """Count ``n`` more units done."""
        self.update(self.done + n)

    def update(self, done: int) -> None:
        """Set the units done so far to ``done``."""
        self.done = done
        if self.enabled and time.perf_counter() - self._drawn >= self.INTERVAL:
            self._draw()

    def clear(self) -> None:
        """Erase the bar from its line, so that a line of output can take it; the next update
        draws the bar again (a no-op when no bar is drawn)."""
        if self._shown:
            print("\r\x1b[K", end="", file=self.stream, flush=True)
            self._shown = False
            self._drawn = 0.0

    def close(self) -> None:
        """Draw the final state and end the line (only once)."""
        if not self._open:
            return
        self._open = False
        if self.enabled:
            self._draw()
            print(file=self.stream, flush=True)
            self._shown = False

    @property
    def seconds(self) -> float:
        """Seconds since the step started."""
        return time.perf_counter() - self._start

    def _draw(self) -> None:
        self._drawn = time.perf_counter()
        elapsed = self._drawn - self._start
        unit = f" {self.unit}" if self.unit else ""
        if self.total:
            frac = min(self.done / self.total, 1.0)
            fill = int(self.WIDTH * frac)
            bar = f"[{'#' * fill}{'.' * (self.WIDTH - fill)}] "
            bar += f"{self.done}/{self.total}{unit} {100 * frac:.0f}%"
            if 0 < frac < 1:
                bar += f", {elapsed:.0f} s, about {elapsed * (1 - frac) / frac:.0f} s left"
            else:
                bar += f", {elapsed:.0f} s"
        else:
            bar = f"{self.done}{unit}, {elapsed:.0f} s"
        print(f"\r{self.what}: {bar}\x1b[K", end="", file=self.stream, flush=True)
        self._shown = True


def say(line: str, stream: TextIO | None = None) -> None:
    """Write ``line`` and its newline to standard error (or ``stream``) in one write, flushed.

    ``print`` writes a line's text and its newline apart when Python runs unbuffered (``-u`` or
    ``PYTHONUNBUFFERED``, which many container images set); the ranks of a job share one
    standard error, so another rank's line could land inside this one.

    >>> import io
    >>> err = io.StringIO()
    >>> say("rank 1: done", err)
    >>> err.getvalue()
    'rank 1: done\\n'
    """
    out = sys.stderr if stream is None else stream
    out.write(line + "\n")
    out.flush()
