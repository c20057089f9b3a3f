"""What every plot shares: the formats a plot is written in, its figure (matplotlib imported only
then) and the check of its path."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["FORMATS"]

#: File extensions the plots are written in.
FORMATS = (".png", ".svg")

_MISSING = "matplotlib is not installed: pip install 'coded_shuffle[plot]'"


def _figure(**kwargs: Any) -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError(_MISSING) from None
    return Figure(**kwargs)


def _check_path(path: object) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"Argument 'path' must be a str or path, not {type(path).__name__}.")
    out = os.fspath(path)
    ext = os.path.splitext(out)[1].lower()
    if ext not in FORMATS:
        got = repr(ext) if ext else "no extension"
        raise ValueError(f"Argument 'path' must end in one of {', '.join(FORMATS)}, not {got}.")
    folder = os.path.dirname(out)
    if folder and not os.path.isdir(folder):
        raise ValueError(
            f"Argument 'path' must be in an existing folder, not {out!r} (no folder {folder!r})."
        )
    return out
