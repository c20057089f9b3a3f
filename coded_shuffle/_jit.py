"""The compiled kernels' machine code loaded from numba's cache without the compiler's registries.

numba loads a kernel cached on disk (``cache=True``) through ``Cache.load_overload``, which first
refreshes the target context: it imports every lowering registry of the compiler (about 200
modules of ``numba.np``, ``numba.cpython``, ``numba.typed`` ...) and installs them, so that a
compile could follow. Loading machine code needs none of it, only the C helpers and numba's
runtime (NRT) that the code calls, which the target context and ``rtsys.initialize`` provide. On
this machine the refresh is about 20 MB of private memory and 0.25 s of CPU in every process that
loads a kernel, a third of a worker rank's private memory before any record (docs/benchmarks.md,
"Hundreds of ranks on one host").

:func:`load_light` makes the kernels of a module load that way. A kernel that is not cached (or
not for these argument types) still compiles through numba's own path, which refreshes the
context then; a parallel kernel (its thread pool is started by the refresh's imports) keeps the
usual load; so does every kernel under a numba whose cache lacks the methods used here.
"""

from __future__ import annotations

import types
from typing import Any

__all__ = ["load_light"]


def _load(cache: Any, sig: Any, target_context: Any) -> Any:
    """numba's ``Cache.load_overload`` less the refresh: the runtime started, then the entry read."""
    from numba.core.runtime import rtsys

    rtsys.initialize(target_context)  # NRT's symbols (the arrays a kernel allocates); once a process
    with cache._guard_against_spurious_io_errors():
        return cache._load_overload(sig, target_context)


def load_light(namespace: dict[str, Any]) -> None:
    """Make each cached, non-parallel numba dispatcher of ``namespace`` load without the refresh.

    Examples
    --------
    >>> import numpy as np
    >>> from coded_shuffle import _kernels
    >>> load_light(vars(_kernels))  # as the module does at its import: nothing changes twice
    >>> _kernels.ordering_value(np.array([[0, 1], [5, 0]]), np.array([1, 0]))  # S[0, 1], 0 after 1
    1
    """
    from numba.core.caching import Cache
    from numba.core.registry import CPUDispatcher

    for value in namespace.values():
        cache = getattr(value, "_cache", None)
        if not isinstance(value, CPUDispatcher) or not isinstance(cache, Cache):
            continue  # not a kernel, or one without an on-disk cache
        if value.targetoptions.get("parallel") or not hasattr(cache, "_guard_against_spurious_io_errors"):
            continue
        cache.load_overload = types.MethodType(_load, cache)  # type: ignore[method-assign]
