"""``mpiexec -n K+1 python -m mpi4py tests/mpi_loader_prog.py DATA.npy OUT EPOCHS START SEED ORDER [FAULT]``.

The program of the MPI tests of :mod:`coded_shuffle.loader`: rank 0 serves the epochs of
``DATA.npy`` and writes the transition reports to ``OUT/reports.json``; worker ``k`` writes the
ids and records of each epoch's batch, as it received them, to ``OUT/w{k}_e{t}.npz``. The test
compares them with the rows of the file, indexed directly.

``FAULT`` corrupts what worker 0 receives: ``once`` every payload byte of its first delivery
(the repairs must fix it), ``always`` every delivery (the job must fail, not hang).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def main(argv: list[str]) -> int:
    import numpy as np

    from coded_shuffle.codec import parse_frame
    from coded_shuffle.loader import MPILoader
    from coded_shuffle.transport import MPITransport

    data, out, epochs, start, seed, order, *rest = argv
    fault = rest[0] if rest else "none"

    class FaultyLink(MPITransport):
        """Worker 0 receives its deliveries with every payload byte flipped."""

        deliveries = 0

        def receive(self, worker: int) -> list[Any]:
            frames = super().receive(worker)
            self.deliveries += 1
            if worker != 0 or fault == "none" or (fault == "once" and self.deliveries > 1):
                return frames
            bad = []
            for f in frames:
                g = f.copy()
                n = parse_frame(f).payload_bytes
                if n:
                    g[g.size - n :] ^= 0x5A
                bad.append(g)
            return bad

    link = FaultyLink()
    # Only the master reads the file: the workers get their rows from it.
    source = data if link.is_master else None
    loader = MPILoader(
        source, epochs=int(epochs), start_epoch=int(start), seed=int(seed), order=order, transport=link
    )
    out_dir = Path(out)
    if loader.is_master:
        reports = loader.serve()
        (out_dir / "reports.json").write_text(json.dumps([r.to_dict() for r in reports]))
        return 0
    for batch in loader:
        assert not batch.records.flags.writeable
        name = out_dir / f"w{batch.worker}_e{batch.epoch}.npz"
        np.savez(name, ids=batch.ids, records=batch.records, decoded=batch.decoded)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
