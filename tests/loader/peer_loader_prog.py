"""``prog.py mpi|torch DATA.npy OUT EPOCHS STORAGE [stop | variable=DIR [network=SPEC]]``: the program of the
tests of :class:`coded_shuffle.loader.PeerLoader`, under ``mpiexec -n K`` or ``torchrun``.

Every rank iterates the loader of ``DATA.npy`` and writes the ids and records of each epoch's
batch to ``OUT/w{k}_e{t}.npz``; rank 0 writes the transitions' reports to ``OUT/reports.json``.
With ``stop``, worker 1 leaves its loop after its second epoch; every rank then writes
``OUT/end_{k}.json`` (who stopped, as it learned it). With ``variable=DIR``, the same launch
first runs a job on the files of ``DIR`` (records of variable sizes, batches cut by bytes, every
rank storing ``STORAGE`` batches: with 2, each record cut into pieces by its own length): rank
``k`` writes each epoch's ids, the records' bytes end to end, their lengths and the decoded
samples to ``OUT/v{k}_e{t}.npz``, rank 0 the reports to ``OUT/variable.json``. With
``network=SPEC``, the loader of ``DATA.npy`` is given that network (its exchange's senders chosen
on its racks).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def reverse(record: Any) -> bytes:
    """The loader's decode: a record's bytes, reversed (a sample that is not the row itself)."""
    return record.tobytes()[::-1]


def save(path: Path, batch: Any, **more: Any) -> None:
    """A batch's ids and records as received, and the samples the loader's decode made of them."""
    import numpy as np

    samples = list(batch)  # (id, decode(record)) pairs
    np.savez(
        path, ids=batch.ids, sample_ids=np.array([i for i, _ in samples]),
        samples=np.frombuffer(b"".join(x for _, x in samples), np.uint8), **more,
    )  # fmt: skip


def variable_job(files: str, out: Path, epochs: int, storage: int) -> None:
    """The job on the files of ``files`` (records of variable sizes), batches cut by bytes."""
    import numpy as np

    from coded_shuffle.loader import PeerLoader
    from coded_shuffle.records import FileRecords

    records = FileRecords(files)
    loader = PeerLoader(records, epochs=epochs, seed=4, timeout=60, decode=reverse, balance="bytes",
                        storage=storage)  # fmt: skip
    for batch in loader:
        assert batch.variable
        save(out / f"v{loader.worker}_e{batch.epoch}.npz", batch, lengths=batch.lengths,
             records=np.concatenate(list(batch.records)))  # fmt: skip
    if loader.worker == 0:
        (out / "variable.json").write_text(json.dumps([r.to_dict() for r in loader.reports]))


def main(argv: list[str]) -> int:
    kind, data, out, epochs, storage, *rest = argv
    if kind == "torch":
        import torch.distributed as dist

        dist.init_process_group("gloo")
    from coded_shuffle.loader import PeerLoader

    if rest and rest[0].startswith("variable="):
        variable_job(rest.pop(0).split("=", 1)[1], Path(out), int(epochs), int(storage))
    network = None
    if rest and rest[0].startswith("network="):
        from coded_shuffle.network import Network

        network = Network.parse(rest.pop(0).split("=", 1)[1])

    loader = PeerLoader(data, epochs=int(epochs), seed=4, storage=int(storage), timeout=60, decode=reverse,
                        network=network)  # fmt: skip
    k = loader.worker
    for n, batch in enumerate(loader):
        save(Path(out) / f"w{k}_e{batch.epoch}.npz", batch, records=batch.records)
        if rest and rest[0] == "stop" and k == 1 and n == 1:
            break
    if k == 0:
        (Path(out) / "reports.json").write_text(json.dumps([r.to_dict() for r in loader.reports]))
    if rest:
        (Path(out) / f"end_{k}.json").write_text(json.dumps(loader.stopped_by))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
