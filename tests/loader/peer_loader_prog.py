"""``prog.py mpi|torch DATA.npy OUT EPOCHS STORAGE [stop]``: the program of the tests of
:class:`coded_shuffle.loader.PeerLoader`, under ``mpiexec -n K`` or ``torchrun``.

Every rank iterates the loader of ``DATA.npy`` and writes the ids and records of each epoch's
batch to ``OUT/w{k}_e{t}.npz``; rank 0 writes the transitions' reports to ``OUT/reports.json``.
With ``stop``, worker 1 leaves its loop after its second epoch; every rank then writes
``OUT/end_{k}.json`` (who stopped, as it learned it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def reverse(record: Any) -> bytes:
    """The loader's decode: a record's bytes, reversed (a sample that is not the row itself)."""
    return record.tobytes()[::-1]


def main(argv: list[str]) -> int:
    import numpy as np

    kind, data, out, epochs, storage, *rest = argv
    if kind == "torch":
        import torch.distributed as dist

        dist.init_process_group("gloo")
    from coded_shuffle.loader import PeerLoader

    loader = PeerLoader(data, epochs=int(epochs), seed=4, storage=int(storage), timeout=60, decode=reverse)
    k = loader.worker
    for n, batch in enumerate(loader):
        samples = list(batch)  # (id, decode(record)) pairs
        np.savez(
            Path(out) / f"w{k}_e{batch.epoch}.npz", ids=batch.ids, records=batch.records,
            sample_ids=np.array([i for i, _ in samples]),
            samples=np.frombuffer(b"".join(x for _, x in samples), np.uint8),
        )  # fmt: skip
        if rest and rest[0] == "stop" and k == 1 and n == 1:
            break
    if k == 0:
        (Path(out) / "reports.json").write_text(json.dumps([r.to_dict() for r in loader.reports]))
    if rest:
        (Path(out) / f"end_{k}.json").write_text(json.dumps(loader.stopped_by))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
