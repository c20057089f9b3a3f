"""The program of the tests of :mod:`coded_shuffle.torch`, under ``torchrun`` or ``mpiexec``.

``prog.py LAYOUT DATA OUT EPOCHS NUM_WORKERS DROP_LAST PREFETCH [STATE] [+ LAYOUT DATA OUT ...]``

- ``LAYOUT`` ``plain`` (``DATA/rows.npy``, a 2-D float32 array), ``struct`` (``DATA/rows.npy``,
  a structured array), ``files`` (``DATA/x.npy`` and ``DATA/y.npy``, features and labels) or
  ``wide`` (``DATA/wide.npy``, structured records of 2562 bytes, every worker storing 2 batches)
  or ``varfiles`` (``DATA/var/``, one record a file, of variable sizes, batches of equal bytes
  ``balance="bytes"``, collated by :func:`pad_collate`; ``field0`` is then the samples' bytes end
  to end, ``field1`` their lengths), or ``varbig`` (the same on ``DATA/bigvar/``, files of 2
  to 6 KiB, every worker storing 2 batches: each record cut into 2 pieces by its own length);
- every worker rank iterates a ``DataLoader(num_workers=NUM_WORKERS, batch_size=4)`` over its
  :class:`~coded_shuffle.torch.CodedIterableDataset` (``with_ids``) for each epoch, after
  ``set_epoch``, and writes what it got to ``OUT/w{k}_e{t}.npz``: the ids and each field's rows,
  in the order yielded, the number of steps, and whether every tensor was writable;
- ``STATE`` ``resume``: the job resumes from ``{"epoch": 1, "samples": 3}`` (``num_workers = 0``);
  ``bad``: each worker writes the messages of its bad inputs to ``OUT/bad_{k}.json`` and stops
  early after epoch 0; ``freeze``: worker 1 stops answering after epoch 0 (it sleeps), the
  job's bound on a wait 3 s; ``uninit``: ``torch.distributed`` is never initialized;
  ``persistent``: the workers' one DataLoader has ``persistent_workers``; each writes the
  refusal to ``OUT/persistent_{k}.txt``, then trains with a plain one; ``close``: worker 0
  stops early after epoch 0 (``close()``), ``destroy``: it breaks out of epoch 0 after its
  first step, calls ``destroy_process_group()`` and returns, while its prefetch thread is
  midway through the transition to epoch 1 (worker 1, without prefetch, asks for epoch 1 only
  a second later; with ``LAYOUT`` ``big``, ``DATA/big.npy`` of 4096 records of 1 KiB, the
  decoding takes two threads); the others train on, their empty epochs written as
  ``OUT/empty_w{k}_e{t}.json``; ``crash``: worker 0 raises after epoch 0; ``kill``: worker 1
  kills itself (SIGKILL) after epoch 0; ``master_error``: the master raises before it serves;
  ``exchange``: a job of peers (``scheme="exchange"``), every rank a worker that trains a
  ``DistributedDataParallel`` model over the default group on each batch; ``save``: each worker
  keeps its batches in ``DATA/cache`` (``cache_dir``), trains on epoch 0, then on two steps of
  epoch 1, writes its ``state_dict()`` to ``OUT/state_{k}.json`` and stops (``close()``); with
  ``LAYOUT`` ``wide`` (a storage of 2 batches), ``varfiles`` (its ``cache_dir`` ``DATA/vcache``)
  or ``varbig`` (``DATA/vbcache``) one step of epoch 1, and the last worker then removes its
  cache file (its host lost); ``resume_s``: the job resumes from ``DATA/save/state_0.json`` (the
  same ``K``; ``DATA/varsave/``, ``DATA/varbigsave/`` for those layouts) with that
  ``cache_dir``, and rank 0
  writes :attr:`~CodedIterableDataset.held_start` to ``OUT/held.json`` (with ``varfiles``,
  :attr:`~CodedIterableDataset.resumed` and the loader's ``held_start``);
  ``resume_k``: the job resumes from ``DATA/save/state_0.json`` (a job of another ``K``) with the
  same ``cache_dir``, each worker writes its ``state_dict()`` before its first step to
  ``OUT/state_{k}.json``, and rank 0 writes :attr:`~CodedIterableDataset.resumed` and its
  ``reports`` to ``OUT/resumed.json``; ``resume_r``: the job resumes from ``DATA/rstate.json`` (a
  job of another ``K``, mid-epoch) with ``cache_dir`` ``DATA/rcache`` (that job's storage of 2
  batches), and rank 0 writes :attr:`~CodedIterableDataset.held_start` and
  :attr:`~CodedIterableDataset.resumed` to ``OUT/held.json``.

Rank 0 serves and writes the reports to ``OUT/reports.json`` (under ``exchange``, rank 0, whose
worker leads the transitions, writes its dataset's ``reports`` after the last epoch). Under
``torchrun`` the job is over ``torch.distributed`` (gloo), under ``mpiexec`` over MPI.

``LAYOUT`` ``example`` (its other arguments unread) runs ``examples/torch_token_documents.py``'s job
in these processes, its asserts its checks.

Runs joined by ``+`` run one after the other in the same job, each with its own dataset (its own
links) and its own ``OUT``: the tests read several runs of one launch. ``torchrun`` starts a
job of ``K + 1`` processes whichever run comes first: a run under ``exchange`` takes them all as
its peers.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import sys
import time
import warnings
from pathlib import Path
from typing import Any


def main(argv: list[str]) -> int:
    import torch.distributed as dist

    runs = [list(run) for plus, run in itertools.groupby(argv, lambda a: a == "+") if not plus]
    if "LOCAL_RANK" in os.environ and runs[0][7:8] != ["uninit"]:  # torchrun
        dist.init_process_group("gloo")
    for run in runs:
        status = one_run(run)
        if status:
            return status
    return 0


def one_run(argv: list[str]) -> int:
    import numpy as np
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader

    from coded_shuffle.torch import CodedIterableDataset

    if argv[0] == "example":  # examples/torch_token_documents.py, in this job's processes
        import runpy

        example = Path(__file__).resolve().parents[1] / "examples" / "torch_token_documents.py"
        runpy.run_path(str(example))["run"]()
        return 0
    layout, data, out, epochs, num_workers, drop_last, prefetch, *rest = argv
    state = rest[0] if rest else "none"
    data_dir, out_dir = Path(data), Path(out)
    source: Any = [data_dir / "x.npy", data_dir / "y.npy"] if layout == "files" else data_dir / "rows.npy"
    if layout == "wide":
        source = data_dir / "wide.npy"
    if layout == "big":
        source = data_dir / "big.npy"
    if layout in ("varfiles", "varbig"):
        from coded_shuffle.records import FileRecords

        source = FileRecords(data_dir / ("var" if layout == "varfiles" else "bigvar"))
    # In the destroy job worker 1 (rank 2) makes its epochs in the training loop, not ahead.
    slow = state == "destroy" and dist.is_initialized() and dist.get_rank() == 2
    warnings.simplefilter("error")  # a non-writable tensor warning fails the job
    ds = CodedIterableDataset(
        source,
        epochs=int(epochs),
        seed=5,
        drop_last=drop_last == "1",
        with_ids=True,
        prefetch=prefetch == "1" and not slow,
        timeout=3 if state == "freeze" else 30,
        storage=2 if layout in ("wide", "varbig") else 1,
        scheme="exchange" if state == "exchange" else "coded",
        cache_dir=cache_dir(data_dir, layout, state),
        balance="bytes" if layout in ("varfiles", "varbig") else "count",
    )
    if state == "resume":
        ds.load_state_dict({"epoch": 1, "samples": 3, "seed": 5, "K": ds.K})
    if state in ("resume_k", "resume_s", "resume_r"):
        saved = data_dir / {"resume_r": "rstate.json", "resume_s": f"{layout_save(layout)}/state_0.json"}.get(
            state, "save/state_0.json"
        )
        ds.load_state_dict(json.loads(saved.read_text()))
    if ds.is_master:
        if state == "master_error":
            raise ValueError("an error of the master's own")
        reports = ds.serve()
        if state == "resume_s" and layout == "varfiles":  # the rest, then the next epoch from what is held
            got = {"resumed": vars(ds.resumed), "held": vars(ds._loader.held_start)}
            (out_dir / "held.json").write_text(json.dumps(got))
        elif state == "resume_s":
            (out_dir / "held.json").write_text(json.dumps(vars(ds.held_start), default=lambda r: None))
        if state == "resume_r":
            got = {"held": ds.held_start.to_dict(), "resumed": vars(ds.resumed)}
            (out_dir / "held.json").write_text(json.dumps(got))
        if state == "resume_k":
            resumed = vars(ds.resumed) if ds.resumed is not None else None
            (out_dir / "resumed.json").write_text(json.dumps({"resumed": resumed, "reports": len(reports)}))
        (out_dir / "reports.json").write_text(json.dumps([r.to_dict() for r in reports]))
        if state in ("bad", "close", "destroy"):
            (out_dir / "stopped.json").write_text(json.dumps({"stopped_by": ds.stopped_by}))
        return 0
    k = ds.worker
    assert k is not None
    persistent = state == "persistent"
    collate = pad_collate if layout in ("varfiles", "varbig") else None
    loader = DataLoader(ds, batch_size=4, num_workers=int(num_workers), persistent_workers=persistent,
                        collate_fn=collate)  # fmt: skip
    ddp = None
    if state == "exchange":  # every rank trains: DDP over the default group, no new_group
        from torch.nn.parallel import DistributedDataParallel

        ddp = DistributedDataParallel(torch.nn.Linear(3, 1))
    for t in range(ds.start_epoch, ds.start_epoch + ds.epochs):
        if persistent:  # the refusal, in this process, before the loader iterates
            try:
                ds.set_epoch(t)
            except ValueError as exc:
                (out_dir / f"persistent_{k}.txt").write_text(f"{type(exc).__name__}: {exc}")
            persistent = False
            loader = DataLoader(ds, batch_size=4, num_workers=int(num_workers))
        if slow and t == 1:
            time.sleep(1.0)  # worker 0 has left meanwhile, its prefetch thread waiting for the master
        ds.set_epoch(t)
        if state == "resume_k" and t == 1:  # the state of a job that resumed a rest, before a step
            (out_dir / f"state_{k}.json").write_text(json.dumps(ds.state_dict()))
        ids: list[Any] = []
        fields: list[list[Any]] = []
        steps, writable = 0, True
        for batch in loader:
            if state == "destroy" and k == 0:  # breaks out of its loop; the link outlives the default group
                dist.destroy_process_group()
                return 0  # close() runs at exit and tells the master
            steps += 1
            if ddp is not None:
                ddp(batch[1].float()).sum().backward()  # the gradients' all-reduce spans every rank
            ids.append(batch[0].numpy())
            cols = batch[1:]
            if layout in ("varfiles", "varbig"):  # the padded rows cut back to their lengths, end to end
                x, n = cols
                cols = (torch.cat([x[j, : int(n[j])] for j in range(n.numel())]), n)
            if not fields:
                fields = [[] for _ in cols]
            for c, col in zip(fields, cols, strict=True):
                c.append(col.numpy())
            if state == "save" and t == 1 and steps == 2 - (layout in ONE_STEP):  # checkpointed
                break
        for t_ in ds._tensors:
            writable &= bool(t_.numpy().flags.writeable)
        if not ids:  # the job ended early: an empty epoch
            (out_dir / f"empty_w{k}_e{t}.json").write_text(json.dumps({"stopped_by": ds.stopped_by}))
            continue
        np.savez(
            out_dir / f"w{k}_e{t}.npz",
            ids=np.concatenate(ids),
            steps=steps,
            length=len(ds),
            writable=writable,
            **{f"field{i}": np.concatenate(c) for i, c in enumerate(fields)},
        )
        if state == "exchange" and t == ds.start_epoch + ds.epochs - 1:  # rank 0 leads and reports
            if ds.transport.is_leader:
                (out_dir / "reports.json").write_text(json.dumps([r.to_dict() for r in ds.reports]))
            else:
                assert ds.reports == []
        if state == "save" and t == 1:
            (out_dir / f"state_{k}.json").write_text(json.dumps(ds.state_dict()))
            ds.close()
            if layout in ONE_STEP and k == ds.K - 1:  # its host lost
                (ds.cache_dir / f"worker-{k}.cache").unlink()
            return 0
        if state == "close" and k == 0:
            ds.close()
            return 0
        if state == "crash" and k == 0:
            raise ValueError("an error of worker 0's own")
        if state == "kill" and k == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        if state == "freeze" and k == 1:
            time.sleep(3600)  # frozen: it never asks for epoch 1 (SIGTERM still ends it)
        if state == "bad" and t == ds.start_epoch:
            (out_dir / f"bad_{k}.json").write_text(json.dumps(bad_inputs(ds, DataLoader, torch)))
            ds.close()
            return 0
    return 0


#: The layouts whose ``save`` stops a step into epoch 1 and loses the last worker's file.
ONE_STEP = ("wide", "varfiles", "varbig")


def cache_dir(data_dir: Path, layout: str, state: str) -> Path | None:
    """The run's ``cache_dir`` (None: none): ``DATA/cache``, ``DATA/vcache`` for ``varfiles``,
    ``DATA/vbcache`` for ``varbig``, ``DATA/rcache`` for ``resume_r``."""
    if state not in ("save", "resume_k", "resume_s", "resume_r"):
        return None
    if state == "resume_r":
        return data_dir / "rcache"
    return data_dir / {"varfiles": "vcache", "varbig": "vbcache"}.get(layout, "cache")


def layout_save(layout: str) -> str:
    """The run (its ``OUT``, beside the others) whose ``save`` a ``resume_s`` of ``layout`` resumes."""
    return {"varfiles": "varsave", "varbig": "varbigsave"}.get(layout, "save")


def pad_collate(samples: list[Any]) -> tuple[Any, Any, Any]:
    """``(id, record)`` samples of variable sizes as ids, the records zero-padded to the longest,
    and their lengths (as docs/torch.md shows)."""
    import torch
    from torch.nn.utils.rnn import pad_sequence

    ids, records = zip(*samples, strict=True)
    lengths = torch.tensor([r.numel() for r in records])
    return torch.tensor(ids), pad_sequence(list(records), batch_first=True), lengths


def messages(tries: dict[str, Any]) -> dict[str, str]:
    """Each call of ``tries`` made: the one-line message of what it raised, by name."""
    got = {}
    for name, call in tries.items():
        try:
            call()
        except (TypeError, ValueError) as exc:
            got[name] = f"{type(exc).__name__}: {exc}"
        else:
            got[name] = "no error"
    return got


def bad_inputs(ds: Any, DataLoader: Any, torch: Any) -> dict[str, str]:
    """The one-line message of each bad input, by name."""
    from coded_shuffle.torch import CodedIterableDataset

    end = ds.start_epoch + ds.epochs
    tries = {
        "epoch_high": lambda: ds.set_epoch(end),
        "epoch_negative": lambda: ds.set_epoch(-1),
        "sampler": lambda: DataLoader(ds, sampler=torch.utils.data.SequentialSampler(range(10))),
        "shuffle": lambda: DataLoader(ds, shuffle=True),
        "rank": lambda: CodedIterableDataset(None, epochs=2, rank=ds.K + 3, transport=ds.transport),
        "rank_world": lambda: CodedIterableDataset(None, epochs=2, rank=9, world_size=ds.K + 1),
        "world_size": lambda: CodedIterableDataset(
            None, epochs=2, world_size=ds.K + 7, transport=ds.transport
        ),
    }
    return messages(tries)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
