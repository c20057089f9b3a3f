"""Coded data shuffling across processes: the thin entry of :mod:`coded_shuffle.mpi_program`.

    mpiexec -n K+1 python -m mpi4py mpi/shuffle.py --points N --record-bytes B --transitions E --seed S \\
        --mode coded|uncoded|exchange|split|both|all [--strategy greedy|lp|exact] [--link-mbps R] \\
        [--json FILE]

The same as ``mpiexec -n K+1 python -m mpi4py -m coded_shuffle.mpi_program ...``, which an
installed package runs without a source tree (``coded-shuffle run``). See docs/mpi.md.
"""

import sys

from coded_shuffle.mpi_program import main

if __name__ == "__main__":
    sys.exit(main())
