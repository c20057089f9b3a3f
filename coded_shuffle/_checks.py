"""Argument checks shared by the public entry points (lowest layer, imports nothing of ours).

Every message has one shape: ``Argument 'K' must be at least 1, not 0.``
"""

from __future__ import annotations

import math
import numbers
import operator
from typing import Any

import numpy as np


def check_int(value: Any, name: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``value`` as a Python int, or raise naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"Argument {name!r} must be an int, not {type(value).__name__}.")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"Argument {name!r} must be at least {minimum}, not {value}.")
    if maximum is not None and value > maximum:
        raise ValueError(f"Argument {name!r} must be at most {maximum}, not {value}.")
    return value


def check_number(value: Any, name: str, *, positive: bool = False, unit: str = "") -> float:
    """Return ``value`` as a float if it is a finite real number at least 0 (above 0 with
    ``positive``), or raise naming ``name``; ``unit`` (``" of Mbit/s"``) follows "number" in the
    message."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"Argument {name!r} must be a number{unit}, not {type(value).__name__}.")
    try:
        v = float(value)
    except OverflowError:  # a Python int or Fraction past the float range
        v = math.inf
    if not math.isfinite(v) or v < 0 or (positive and v == 0):
        kind = "positive" if positive else "non-negative"
        raise ValueError(f"Argument {name!r} must be a {kind} finite number{unit}, not {value!r}.")
    return v


def check_choice(value: Any, name: str, choices: Any) -> str:
    """Return ``value`` if it is one of ``choices``, or raise naming ``name``."""
    if not isinstance(value, str):
        raise TypeError(f"Argument {name!r} must be a str, not {type(value).__name__}.")
    if value not in choices:
        listed = ", ".join(repr(c) for c in sorted(choices))
        raise ValueError(f"Argument {name!r} must be one of {listed}, not {value!r}.")
    return value


def check_seconds(value: Any, name: str) -> float:
    """Return ``value`` as a float of seconds if it is a positive number below ``10**9`` (a finite
    deadline), or raise naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e9:
        raise ValueError(f"Argument {name!r} must be a positive number of seconds, not {value!r}.")
    return float(value)


def _python_ints(value: Any) -> np.ndarray | None:
    """``value`` as an object array when it is a rectangular nest of Python ints, else None."""
    if not isinstance(value, (list, tuple)):
        return None
    try:
        arr = np.array(value, dtype=object)
    except (ValueError, TypeError):
        return None
    if arr.size and all(type(v) is int for v in arr.flat):
        return arr
    return None


def check_int_array(value: Any, name: str, *, ndim: int) -> np.ndarray:
    """Return ``value`` as a numpy integer array of ``ndim`` dimensions, or raise naming ``name``."""
    if isinstance(value, np.ndarray):
        arr = value
    else:
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"Argument {name!r} must be a rectangular array: {exc}") from None
        if arr.dtype.kind == "f":
            # Python ints past int64 beside small ones: numpy reads [2**63, 1] as float64, rounding
            # them (and the rounded values would wrap in a cast). Read them again as they are.
            ints = _python_ints(value)
            if ints is not None:
                arr = ints
    if arr.dtype == object and arr.size and all(type(v) is int for v in arr.flat):
        wide = [v for v in arr.flat if not -(2**63) <= v < 2**63]  # Python ints past int64
        if wide:
            raise ValueError(f"Argument {name!r} must hold integers in [-2**63, 2**63), not {wide[0]}.")
        arr = arr.astype(np.int64)
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) >= 2**63:
        raise ValueError(f"Argument {name!r} must hold integers below 2**63, not {int(arr.max())}.")
    if arr.dtype == object or arr.dtype.kind not in "iub":
        if arr.dtype.kind == "f" and arr.size and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            big = float(np.max(np.abs(arr)))
            if big >= 2.0**63:
                raise ValueError(f"Argument {name!r} must hold integers below 2**63, not {big:g}.")
            arr = arr.astype(np.int64)
        elif arr.dtype.kind == "f" and arr.size == 0:
            arr = arr.astype(np.int64)
        else:
            raise ValueError(f"Argument {name!r} must hold integers, not {arr.dtype} values.")
    if arr.dtype.kind == "b":
        raise ValueError(f"Argument {name!r} must hold integers, not booleans.")
    if arr.ndim != ndim:
        raise ValueError(f"Argument {name!r} must have {ndim} dimension(s), not {arr.ndim}.")
    return arr


def check_racks(racks: Any, K: int, *, name: str = "racks") -> tuple[int, ...] | None:
    """``racks`` as a tuple of hosts a rack that add up to ``K`` (each at least 1), or None; raise
    naming ``name`` otherwise."""
    if racks is None:
        return None
    try:
        sizes = tuple(operator.index(h) for h in racks)
    except TypeError:
        msg = f"Argument {name!r} must be a sequence of ints (hosts a rack), not {racks!r}."
        raise TypeError(msg) from None
    if sum(sizes) != K or min(sizes, default=0) < 1:
        msg = f"Argument {name!r} must hold the K = {K} workers, each rack at least 1, not {sizes}."
        raise ValueError(msg)
    return sizes
