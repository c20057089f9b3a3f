"""Exceptions of coded_shuffle.

Bad arguments raise the built-in :class:`TypeError` or :class:`ValueError`, naming the
argument at fault. Failures of the domain (a plan that does not deliver, a symbol that
cannot be decoded, a transport that broke) raise a subclass of :class:`CodedShuffleError`.
"""

from __future__ import annotations

__all__ = [
    "CodedShuffleError",
    "InvalidPlanError",
    "DecodeError",
    "IntegrityError",
    "TransportError",
    "RankTimeout",
]


class CodedShuffleError(Exception):
    """Base class of every domain error raised by coded_shuffle."""


class InvalidPlanError(CodedShuffleError):
    """A delivery plan does not deliver every moved point exactly once, decodably."""


class DecodeError(CodedShuffleError):
    """A worker cannot decode a symbol from its cache and what it has already decoded."""


class IntegrityError(CodedShuffleError):
    """A decoded record does not match the checksum fixed when the dataset was loaded."""


class TransportError(CodedShuffleError):
    """A transport failed to carry symbols between the master and the workers."""


class RankTimeout(TransportError):
    """A rank did not answer within the job's timeout (it stopped, froze, or its host went away)."""
