"""``mpiexec -n K+1 python -m mpi4py tests/loader/mpi_loader_prog.py DATA.npy OUT EPOCHS START SEED ORDER
[FAULT]``.

The program of the MPI tests of :mod:`coded_shuffle.loader`: rank 0 serves the epochs of
``DATA.npy`` and writes the transition reports to ``OUT/reports.json``; worker ``k`` writes the
ids and records of each epoch's batch, as it received them, and the samples the loader's decode
made of them (:func:`reverse`), to ``OUT/w{k}_e{t}.npz``. The test
compares them with the rows of the file, indexed directly.

``FAULT`` corrupts what worker 0 receives: ``once`` every payload byte of its first delivery
(the repairs must fix it), ``always`` every delivery (the job must fail, not hang). Or worker 1
stops early after its batch of the second epoch: ``break`` (leaves its loop), ``close``
(``loader.close()``), ``with`` (the end of a ``with`` block), ``exit`` (``sys.exit(0)`` inside
the loop), ``raise`` (an exception, caught outside the loop); the master writes
``OUT/stopped.json`` (who stopped, the reports so far) and every rank ``OUT/end_{rank}``.
A last argument ``storage=M`` makes every worker store ``M`` batches. An argument
``variable=DIR`` first runs, in the same launch, a job on the files of ``DIR`` (one record a
file, of variable sizes: :class:`~coded_shuffle.records.FileRecords`), its batches cut by bytes
(``balance="bytes"``): worker ``k`` writes each epoch's ids, the records' bytes end to end, their
lengths and the decoded samples to ``OUT/v{k}_e{t}.npz``, the master the reports to
``OUT/variable.json``. An argument ``vstorage=DIR`` then runs, in the same launch, that job on the
files of ``DIR`` with a storage of 2 batches (each record cut by its own length):
``OUT/vs{k}_e{t}.npz`` and ``OUT/vstorage.json``. An argument ``held=DIR`` then runs, in the
same launch, two jobs with ``cache_dir=DIR`` on the rows of ``DATA.npy``: epochs ``START`` and
``START + 1``, then (worker 0's file cut short, the last worker's removed, each by its own rank)
epoch ``START + 2`` started from what the files hold: worker ``k`` writes its batch to
``OUT/h{k}.npz`` and its notes to ``OUT/h{k}.json``, the master ``held_start`` and the report to
``OUT/held.json``; then the same with a storage of 2 batches in ``DIR-storage`` (the last
worker's file removed, a host lost; epochs ``START + 2``, ``START + 3`` restarted, then
``START + 4`` with every file, then ``START + 5`` without workers 0's and 1's):
``OUT/s{k}_e{t}.npz``, ``OUT/stored.json``, ``OUT/kept.json``, ``OUT/two.json``. With both
``variable=DIR`` and ``held=HELD``, two jobs on the files of ``DIR`` with ``cache_dir=HELD-var``
(:func:`variable_held_job`), and with ``vstorage=BIG`` too, the same on the files of ``BIG``
storing 2 batches in ``HELD-vstorage``. An argument
``recut=BIG.npy`` then runs, in the same launch, jobs storing 2 batches of the rows of ``BIG.npy``
(and of ``DATA.npy``, and with ``vstorage=DIR`` of the files of ``DIR``) relaunched on another
number of workers (:func:`recut_job`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def worked(loader: Any) -> bool:
    """Run ``loader`` to its end in this rank's role: serve (the master) or read every batch (a
    worker); whether this rank is a worker."""
    if loader.is_master:
        loader.serve()
        return False
    for _ in loader:
        pass
    return True


def reverse(record: Any) -> bytes:
    """The loader's decode: a record's bytes, reversed (a sample that is not the row itself)."""
    return record.tobytes()[::-1]


def variable_job(
    files: str, out_dir: Path, epochs: int, start: int, seed: int, storage: int = 1, name: str = "v"
) -> None:
    """The job on the files of ``files`` (records of variable sizes), batches cut by bytes, each
    worker storing ``storage`` batches; the files named ``name``."""
    import numpy as np

    from coded_shuffle.loader import MPILoader
    from coded_shuffle.records import FileRecords
    from coded_shuffle.transport import MPITransport

    link = MPITransport()
    source = FileRecords(files) if link.is_master else None
    loader = MPILoader(source, epochs=epochs, start_epoch=start, seed=seed, transport=link, decode=reverse,
                       balance="bytes", storage=storage)  # fmt: skip
    if loader.is_master:
        reports = json.dumps([r.to_dict() for r in loader.serve()])
        (out_dir / ("variable.json" if storage == 1 else "vstorage.json")).write_text(reports)
        return
    for batch in loader:
        assert batch.variable and all(not r.flags.writeable for r in batch.records)
        samples = list(batch)  # (id, decode(record)) pairs
        np.savez(
            out_dir / f"{name}{batch.worker}_e{batch.epoch}.npz", ids=batch.ids, lengths=batch.lengths,
            records=np.concatenate(list(batch.records)), decoded=batch.decoded,
            sample_ids=np.array([i for i, _ in samples]),
            samples=np.frombuffer(b"".join(x for _, x in samples), np.uint8),
        )  # fmt: skip


def held_job(data: str, folder: Path, out_dir: Path, start: int, seed: int) -> None:
    """Two jobs with ``cache_dir=folder``, the second started from what the first left in the files."""
    import numpy as np

    from coded_shuffle.loader import MPILoader
    from coded_shuffle.transport import MPITransport

    link = MPITransport()
    source = data if link.is_master else None
    first = MPILoader(source, epochs=2, start_epoch=start, seed=seed, transport=link, cache_dir=folder)
    if worked(first):
        mine = folder / f"worker-{first.worker}.cache"
        if first.worker == 0:  # cut short: treated as absent
            mine.write_bytes(mine.read_bytes()[:-7])
        elif first.worker == link.K - 1:  # gone
            mine.unlink()
    again = MPILoader(source, epochs=1, start_epoch=start + 2, seed=seed, transport=link, cache_dir=folder)
    if again.is_master:
        reports = [r.to_dict() for r in again.serve()]
        start_ = vars(again.held_start) if again.held_start is not None else None
        (out_dir / "held.json").write_text(json.dumps({"start": start_, "reports": reports}))
        return
    for batch in again:
        np.savez(out_dir / f"h{batch.worker}.npz", ids=batch.ids, records=batch.records, epoch=batch.epoch)
    (out_dir / f"h{again.worker}.json").write_text(json.dumps(again.cache_notes))


def variable_held_job(
    files: str, folder: Path, out_dir: Path, start: int, seed: int, storage: int = 1, name: str = "vh"
) -> None:
    """Two jobs on the files of ``files`` (records of variable sizes, batches cut by bytes, each
    worker storing ``storage`` batches) with ``cache_dir=folder``: epochs ``start``, ``start + 1``
    from a folder that does not exist yet, then (with one batch a worker the first byte of the
    first record in worker 0's file altered; the last worker's file removed; each by its own rank)
    epoch ``start + 2`` from what the files hold: worker ``k`` writes its batch to
    ``OUT/{name}{k}.npz`` and its notes to ``OUT/{name}{k}.json``, the master both ``held_start``
    and the report to ``OUT/{name}.json``."""
    import struct

    import numpy as np

    from coded_shuffle.loader import MPILoader
    from coded_shuffle.records import FileRecords
    from coded_shuffle.transport import MPITransport

    link = MPITransport()
    source = FileRecords(files) if link.is_master else None
    kw: dict[str, Any] = {
        "seed": seed,
        "transport": link,
        "cache_dir": folder,
        "balance": "bytes",
        "decode": reverse,
        "storage": storage,
    }
    first = MPILoader(source, epochs=2, start_epoch=start, **kw)
    if worked(first):
        mine = folder / f"worker-{first.worker}.cache"
        if first.worker == 0 and storage == 1:  # one record altered: dropped, delivered again
            raw = bytearray(mine.read_bytes())
            raw[struct.unpack_from("<Q", raw, 88)[0]] ^= 1
            mine.write_bytes(bytes(raw))
        elif first.worker == link.K - 1:  # gone
            mine.unlink()
    again = MPILoader(source, epochs=1, start_epoch=start + 2, **kw)
    if again.is_master:
        reports = [r.to_dict() for r in again.serve()]
        starts = [{k: v for k, v in vars(x.held_start).items() if k != "transition"} for x in (first, again)]
        (out_dir / f"{name}.json").write_text(json.dumps({"starts": starts, "reports": reports}))
        return
    for batch in again:
        samples = list(batch)
        np.savez(
            out_dir / f"{name}{batch.worker}.npz", ids=batch.ids, lengths=batch.lengths,
            records=np.concatenate(list(batch.records)), decoded=batch.decoded,
            sample_ids=np.array([i for i, _ in samples]),
            samples=np.frombuffer(b"".join(x for _, x in samples), np.uint8),
        )  # fmt: skip
    (out_dir / f"{name}{again.worker}.json").write_text(json.dumps(again.cache_notes))


def storage_job(data: str, folder: Path, out_dir: Path, start: int, seed: int) -> None:
    """Jobs storing 2 batches with ``cache_dir=folder``: epochs ``start``, ``start + 1``, then (the
    last worker's file removed: its host lost) ``start + 2``, ``start + 3`` restarted from the
    files, then ``start + 4`` restarted from them all, then ``start + 5`` with the files of
    workers 0 and 1 removed."""
    import numpy as np

    from coded_shuffle.loader import MPILoader
    from coded_shuffle.transport import MPITransport

    link = MPITransport()
    source = data if link.is_master else None
    kw = {"seed": seed, "transport": link, "cache_dir": folder, "storage": 2}
    first = MPILoader(source, epochs=2, start_epoch=start, **kw)
    if worked(first) and first.worker == link.K - 1:
        (folder / f"worker-{first.worker}.cache").unlink()
    # then every file kept, then workers 0 and 1 lost at once
    for name, t, epochs in (("stored", start + 2, 2), ("kept", start + 4, 1), ("two", start + 5, 1)):
        again = MPILoader(source, epochs=epochs, start_epoch=t, **kw)
        if again.is_master:
            reports = [r.to_dict() for r in again.serve()]
            got = {k: v for k, v in vars(again.held_start).items() if k != "transition"}
            (out_dir / f"{name}.json").write_text(json.dumps({"start": got, "reports": reports}))
            continue
        for batch in again:
            np.savez(out_dir / f"s{batch.worker}_e{batch.epoch}.npz", ids=batch.ids, records=batch.records)
        if name == "kept" and again.worker in (0, 1):
            (folder / f"worker-{again.worker}.cache").unlink()


def recut_job(data: str, small: str, out_dir: Path, start: int, seed: int, sized: str | None = None) -> None:
    """Jobs storing 2 batches of ``data`` with a ``cache_dir``, relaunched on another number of
    workers: ``K`` (every worker rank) for epoch ``start + 1``, only the last worker's file left,
    then ``K - 1`` (the ranks but the last) for ``start + 2``, ``start + 3`` in ``OUT/recut-a``;
    then ``K - 1`` for ``start + 1`` and ``K`` for ``start + 2``, ``start + 3`` in
    ``OUT/recut-b``; then the first of them on ``small`` (records stored whole) in
    ``OUT/recut-c``; with ``sized`` (a folder of files, records of many sizes) the jobs of
    ``recut-a`` and ``recut-b`` on them in ``OUT/recut-d`` and ``OUT/recut-e``. Before each
    relaunch the files are copied to ``recut-X-before``, and after its first epoch to
    ``recut-X-cut`` (the storage cut again); the master writes ``held_start`` and the reports to
    ``OUT/recut-X.json``, worker ``k`` its batches to ``OUT/rX{k}_e{t}.npz`` and its notes to
    ``OUT/rX{k}.json``."""
    import shutil

    import numpy as np
    from mpi4py import MPI

    from coded_shuffle.loader import MPILoader
    from coded_shuffle.records import FileRecords
    from coded_shuffle.transport import MPITransport

    world = MPI.COMM_WORLD
    fewer = world.Split(0 if world.rank < world.size - 1 else MPI.UNDEFINED, world.rank)

    def job(comm: Any, name: str, t: int, snap: bool) -> None:
        if comm == MPI.COMM_NULL:
            return
        link = MPITransport(comm)
        folder = out_dir / f"recut-{name}"
        path = {"c": small, "d": sized, "e": sized}.get(name, data)
        source: Any = None
        if link.is_master:
            source = FileRecords(path) if name in ("d", "e") else path
        kw = {"seed": seed, "transport": link, "cache_dir": folder, "storage": 2}
        loader = MPILoader(source, epochs=1 + snap, start_epoch=t, **kw)
        if loader.is_master:
            reports = [r.to_dict() for r in loader.serve()]
            start_ = loader.held_start.to_dict() if snap else None  # type: ignore[union-attr]
            (out_dir / f"recut-{name}.json").write_text(json.dumps({"start": start_, "reports": reports}))
            return
        for batch in loader:
            where = out_dir / f"r{name}{batch.worker}_e{batch.epoch}.npz"
            if batch.variable:
                np.savez(where, ids=batch.ids, records=np.concatenate(list(batch.records)))
            else:
                np.savez(where, ids=batch.ids, records=batch.records)
            if snap and batch.epoch == t:  # the storage cut again, as this worker's file holds it
                (out_dir / f"recut-{name}-cut").mkdir(exist_ok=True)
                mine = f"worker-{loader.worker}.cache"
                shutil.copy(folder / mine, out_dir / f"recut-{name}-cut" / mine)
        (out_dir / f"r{name}{loader.worker}.json").write_text(json.dumps(loader.cache_notes))

    def between(name: str, keep: int | None) -> None:
        world.Barrier()
        if world.rank == 0:
            folder = out_dir / f"recut-{name}"
            for path in folder.glob("worker-*.cache"):
                if keep is not None and path.name != f"worker-{keep}.cache":
                    path.unlink()
            shutil.copytree(folder, out_dir / f"recut-{name}-before")
        world.Barrier()

    job(world, "a", start + 1, False)
    between("a", world.size - 2)  # only the last worker's file is left
    job(fewer, "a", start + 2, True)
    world.Barrier()
    job(fewer, "b", start + 1, False)
    between("b", None)
    job(world, "b", start + 2, True)
    world.Barrier()
    job(world, "c", start + 1, False)
    between("c", world.size - 2)
    job(fewer, "c", start + 2, True)
    if sized is None:
        return
    world.Barrier()
    job(world, "d", start + 1, False)
    between("d", world.size - 2)
    job(fewer, "d", start + 2, True)
    world.Barrier()
    job(fewer, "e", start + 1, False)
    between("e", None)
    job(world, "e", start + 2, True)


def main(argv: list[str]) -> int:
    import numpy as np

    from coded_shuffle.codec import parse_frame
    from coded_shuffle.loader import MPILoader
    from coded_shuffle.transport import MPITransport

    data, out, epochs, start, seed, order, *rest = argv
    storage = next((int(x.split("=")[1]) for x in rest if x.startswith("storage=")), 1)
    variable = next((x.split("=", 1)[1] for x in rest if x.startswith("variable=")), None)
    vstorage = next((x.split("=", 1)[1] for x in rest if x.startswith("vstorage=")), None)
    held = next((x.split("=", 1)[1] for x in rest if x.startswith("held=")), None)
    recut = next((x.split("=", 1)[1] for x in rest if x.startswith("recut=")), None)
    rest = [x for x in rest if not x.startswith(("storage=", "variable=", "vstorage=", "held=", "recut="))]
    fault = rest[0] if rest else "none"
    if variable is not None:
        variable_job(variable, Path(out), int(epochs), int(start), int(seed))
    if vstorage is not None:
        variable_job(vstorage, Path(out), int(epochs), int(start), int(seed), storage=2, name="vs")
    if held is not None:
        held_job(data, Path(held), Path(out), int(start), int(seed))
        storage_job(data, Path(held + "-storage"), Path(out), int(start), int(seed))
        if variable is not None:
            variable_held_job(variable, Path(held + "-var"), Path(out), int(start), int(seed))
        if vstorage is not None:
            variable_held_job(vstorage, Path(held + "-vstorage"), Path(out), int(start), int(seed), 2, "vsh")
    if recut is not None:
        recut_job(recut, data, Path(out), int(start), int(seed), vstorage)

    class FaultyLink(MPITransport):
        """Worker 0 receives its deliveries with every payload byte flipped."""

        deliveries = 0

        def receive_each(self, worker: int) -> Iterator[Any]:  # receive() is the list of these
            self.deliveries += 1
            hit = worker == 0 and (fault == "always" or (fault == "once" and self.deliveries == 1))
            for f in super().receive_each(worker):
                n = parse_frame(f).payload_bytes if hit else 0
                if not n:
                    yield f
                    continue
                g = f.copy()
                g[g.size - n :] ^= 0x5A
                yield g

    link = FaultyLink()
    # Only the master reads the file: the workers get their rows from it.
    source = data if link.is_master else None
    loader = MPILoader(
        source, epochs=int(epochs), start_epoch=int(start), seed=int(seed), order=order, transport=link,
        storage=storage, multicast=os.environ.get("CS_MULTICAST"), decode=reverse,
    )  # fmt: skip
    out_dir = Path(out)
    stops = ("break", "close", "with", "exit", "raise")
    if loader.is_master:
        reports = loader.serve()
        assert loader.reports == reports  # the loader keeps what serve returned
        name = "stopped.json" if fault in stops else "reports.json"
        what = {"stopped_by": loader.stopped_by, "reports": [r.to_dict() for r in reports]}
        (out_dir / name).write_text(json.dumps(what if fault in stops else what["reports"]))
        (out_dir / "end_0").write_text("")
        return 0
    me = loader.worker
    stopper = fault in stops and me == 1

    def save(batch: Any) -> None:
        assert not batch.records.flags.writeable
        name = out_dir / f"w{batch.worker}_e{batch.epoch}.npz"
        samples = list(batch)  # (id, decode(record)) pairs, the loader's decode applied
        np.savez(
            name, ids=batch.ids, records=batch.records, decoded=batch.decoded,
            sample_ids=np.array([i for i, _ in samples]),
            samples=np.frombuffer(b"".join(x for _, x in samples), np.uint8),
        )  # fmt: skip

    def end() -> None:
        (out_dir / f"end_{me + 1}").write_text(json.dumps({"stopped_by": loader.stopped_by}))

    if stopper and fault == "with":
        with loader:
            for batch in loader:
                save(batch)
                if batch.epoch == int(start) + 1:
                    break
        end()
        return 0
    try:
        for batch in loader:
            save(batch)
            if stopper and batch.epoch == int(start) + 1:
                if fault == "close":
                    loader.close()
                    end()
                    return 0
                if fault == "exit":
                    (out_dir / f"end_{me + 1}").write_text("{}")
                    sys.exit(0)
                if fault == "raise":
                    raise KeyError("stop")
                break
    except KeyError:
        pass
    end()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
