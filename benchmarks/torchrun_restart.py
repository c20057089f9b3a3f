"""A torchrun job restarted after one rank is killed mid-epoch: the samples each epoch yields
(each exactly once across the restart) and the bytes sent after it, from the source and from the
workers' peers, with and without ``cache_dir``, storing 1 or more batches, side by side in one run.

The job: ``K`` training ranks and the master under ``torchrun --max-restarts 1``, each worker
iterating a :class:`~coded_shuffle.torch.CodedIterableDataset` (``storage=M``) over ``--records``
records of ``--record-bytes`` bytes (``DataLoader(batch_size=--batch)``, no DataLoader workers).
After every step the last worker writes the dataset's ``state_dict()`` (the job's checkpoint,
written whole or not at all); at ``--kill-step`` steps into epoch 1 of the first attempt it
removes its cache file (its host lost) and kills itself (SIGKILL). ``torchrun`` ends the other
ranks and starts them all again; the new job loads the checkpoint and trains on. A worker's steps
after the checkpoint, in the attempt killed, are redone, as a training job's would be: they are
not counted.

For each epoch the benchmark checks that the samples counted make every record exactly once, and
reports, after the restart: the bytes from the source (without ``cache_dir`` the storage dealt
again, ``M`` batches a worker; with it and ``M = 1`` the rest of the resumed epoch that no file
holds and the records of the next epoch no worker holds; with ``M > 1`` the pieces of the
storage no worker holds any more), the bytes a worker had from its peers' storage (``M > 1``), the
bytes of the transitions after the restart (the master's wire bytes), and the wall time of the
launch (both attempts).

With ``--changes K:K'`` (each ``M > 1`` of ``--storage``, with ``cache_dir``) the job of ``K``
workers is not restarted by ``torchrun`` (``--max-restarts 0``: the kill ends it) but relaunched
by hand on ``K'`` workers (another ``--nproc-per-node``) from the same checkpoint: the rest of the
epoch killed dealt to the ``K'`` workers from the source (:mod:`coded_shuffle.engine.rest`), then
their storage of the next epoch cut again from the files (:mod:`coded_shuffle.engine.recut_serve`):
the bytes from the source are the rest's and the re-cut's, from the peers the re-cut's; every
sample of every epoch counted once.

Run:  python benchmarks/torchrun_restart.py [--workers 2,4] [--storage 1,2] [--records 4096]
      [--record-bytes 1024] [--epochs 4] [--batch 64] [--kill-step 5] [--changes 4:3]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve()


def program(
    data: Path, out: Path, *, epochs: int, batch: int, kill_step: int, cache: bool, storage: int,
    relaunch: bool = False,
) -> int:  # fmt: skip
    """One rank of the job (under torchrun); ``relaunch``: the second job of a relaunch on another
    number of ranks, from the checkpoint."""
    import torch.distributed as dist
    from torch.utils.data import DataLoader

    from coded_shuffle.torch import CodedIterableDataset

    attempt = 1 if relaunch else int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    # A store of the attempt's own: the restarted ranks meet afresh, not over the keys of the
    # attempt killed.
    store = f"file://{out / f'store_a{attempt}'}"
    dist.init_process_group("gloo", init_method=store, rank=int(os.environ["RANK"]),
                            world_size=int(os.environ["WORLD_SIZE"]))  # fmt: skip
    ckpt = out / "checkpoint.json"
    ds = CodedIterableDataset(data / "rows.npy", epochs=epochs, seed=1, with_ids=True, timeout=60,
                              cache_dir=out / "cache" if cache else None, storage=storage)  # fmt: skip
    if attempt and ckpt.exists():
        ds.load_state_dict(json.loads(ckpt.read_text()))
        ckpt = out / f"checkpoint_a{attempt}.json"  # the first attempt's kept for the count
    tic = time.perf_counter()
    if ds.is_master:
        reports = ds.serve()
        resumed = None if ds.resumed is None else vars(ds.resumed)
        held = getattr(ds._loader, "held_start", None)  # the loader's start from the workers' holdings
        if held is not None:  # a restore (RecoveryReport, its transition left out) or a re-cut (RecutReport)
            held = held.to_dict() if hasattr(held, "to_dict") else vars(held)
            held = {k: v for k, v in held.items() if k != "transition"}
        summary = {"resumed": resumed, "held": held,
                   "start_epoch": ds.start_epoch, "seconds": time.perf_counter() - tic,
                   "reports": [{"epoch": r.epoch, "wire_bytes": r.wire_bytes} for r in reports]}  # fmt: skip
        (out / f"master_a{attempt}.json").write_text(json.dumps(summary))
        return 0
    k = ds.worker
    assert k is not None
    last = k == ds.K - 1
    log = open(out / f"w{k}_a{attempt}.jsonl", "w")  # noqa: SIM115 (one line a step, flushed)
    loader = DataLoader(ds, batch_size=batch)
    for t in range(ds.start_epoch, ds.start_epoch + ds.epochs):
        ds.set_epoch(t)
        for step, got in enumerate(loader, start=1):
            state = ds.state_dict()
            log.write(json.dumps({"epoch": t, "step": step, "ids": got[0].tolist(), "state": state}) + "\n")
            log.flush()
            if last:
                tmp = ckpt.with_suffix(".tmp")
                tmp.write_text(json.dumps(state))
                os.replace(tmp, ckpt)
                if attempt == 0 and t == 1 and step == kill_step:
                    if cache:  # its host lost: its cache file with it
                        (out / "cache" / f"worker-{k}.cache").unlink(missing_ok=True)
                    os.kill(os.getpid(), signal.SIGKILL)
    log.close()
    return 0


def counted(out: Path, K: int, ckpt: dict, batch: int) -> dict[int, list[int]]:
    """Each epoch's samples that count: every step of the last attempt, and of the first those up
    to the checkpoint (the epochs before it whole, its epoch's first ``samples``). A worker's rest
    of an epoch after a relaunch on another ``K`` counts each sample once (a share shorter than
    the longest repeats its own samples to pad, as ``DistributedSampler`` does)."""
    per_epoch: dict[int, list[int]] = {}
    for k in range(K):
        for attempt in (0, 1):
            path = out / f"w{k}_a{attempt}.jsonl"
            rest: set[int] = set()
            for line in path.read_text().splitlines() if path.exists() else []:
                row = json.loads(line)
                t, done = row["epoch"], row["step"] * batch
                if attempt == 0 and (t > ckpt["epoch"] or (t == ckpt["epoch"] and done > ckpt["samples"])):
                    continue  # after the checkpoint: redone by the restarted job
                if attempt == 1 and t == ckpt["epoch"] and row["state"]["K"] != ckpt["K"]:  # rest, other K
                    row["ids"] = [i for i in row["ids"] if i not in rest]
                    rest.update(row["ids"])
                per_epoch.setdefault(t, []).extend(row["ids"])
    return per_epoch


def one_job(
    data: Path, args: argparse.Namespace, *, K: int, M: int, cache: bool, K_next: int | None = None
) -> dict:
    """The job restarted by ``torchrun`` (``K_next`` None), or killed and relaunched by hand on
    ``K_next`` workers from its checkpoint."""
    out = Path(tempfile.mkdtemp(prefix="restart-", dir=data))
    env = {**os.environ, "PYTHONPATH": str(HERE.parent.parent)}
    tic = time.perf_counter()
    for i, ranks in enumerate([K + 1] if K_next is None else [K + 1, K_next + 1]):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}",
               f"--max-restarts={int(K_next is None)}", "--monitor-interval=0.5", str(HERE),
               "--program", str(data), str(out), "--epochs", str(args.epochs), "--batch", str(args.batch),
               "--kill-step", str(args.kill_step), "--storage", str(M)]  # fmt: skip
        cmd += (["--cache"] if cache else []) + (["--relaunch"] if i else [])
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env, check=False)
        if bool(proc.returncode) != (K_next is not None and i == 0):  # the first of a relaunch dies
            (data.parent / "torchrun_restart.err").write_text(proc.stderr)
            raise SystemExit(f"the job failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    wall = time.perf_counter() - tic
    ckpt = json.loads((out / "checkpoint.json").read_text())
    epochs = counted(out, max(K, K_next or 0), ckpt, args.batch)
    for t in range(args.epochs):
        if sorted(epochs.get(t, [])) != list(range(args.records)):
            raise SystemExit(f"epoch {t}: the samples counted are not every record exactly once")
    master = json.loads((out / "master_a1.json").read_text())
    return {"wall": wall, "ckpt": ckpt, "master": master, "epochs": args.epochs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", default="2,4", help="the jobs' K, comma-separated")
    ap.add_argument("--storage", default="1,2", help="the jobs' M, comma-separated")
    ap.add_argument("--records", type=int, default=4096)
    ap.add_argument("--record-bytes", type=int, default=1024)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--kill-step", type=int, default=5)
    ap.add_argument("--program", nargs=2, type=Path)
    ap.add_argument("--cache", action="store_true")
    ap.add_argument("--relaunch", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--changes", default="", help="relaunches K:K' with cache_dir ('' none)")
    args = ap.parse_args()
    if args.program:
        sys.exit(program(*args.program, epochs=args.epochs, batch=args.batch, kill_step=args.kill_step,
                         cache=args.cache, storage=int(args.storage), relaunch=args.relaunch))  # fmt: skip
    workers = [int(x) for x in args.workers.split(",")]
    storages = [int(x) for x in args.storage.split(",")]
    changes = [tuple(int(x) for x in c.split(":")) for c in args.changes.split(",") if c]
    if any(args.records % (K * args.batch) for K in workers + [k for c in changes for k in c]):
        raise SystemExit("--records must be a multiple of each --workers times --batch (no padding to count)")
    with tempfile.TemporaryDirectory() as d:
        data = Path(d)
        rng = np.random.default_rng(0)
        np.save(data / "rows.npy", rng.integers(0, 256, (args.records, args.record_bytes), dtype=np.uint8))
        B = args.record_bytes
        print(f"N = {args.records} records of {B} bytes, {args.epochs} epochs, the last worker killed "
              f"{args.kill_step} steps into epoch 1 (its cache file removed)")  # fmt: skip
        print(f"{'K':>4} {'M':>2} {'cache_dir':>9} {'ckpt':>8} {'each once':>9} {'source MB':>9} "
              f"{'peers MB':>8} {'transitions MB':>14} {'job s':>6}")  # fmt: skip
        for K in workers:
            for M in storages:
                for cache in (False, True):
                    r = one_job(data, args, K=K, M=M, cache=cache)
                    source, peers = source_and_peers(r["master"], args, M)
                    trans = sum(x["wire_bytes"] for x in r["master"]["reports"])
                    at = f"e{r['ckpt']['epoch']}+{r['ckpt']['samples']}"
                    print(f"{K:>4} {M:2d} {'yes' if cache else 'no':>9} {at:>8} {'yes':>9} "
                          f"{source / 1e6:9.3f} {peers / 1e6:8.3f} {trans / 1e6:14.3f} {r['wall']:6.1f}",
                          flush=True)  # fmt: skip
        for K, K_next in changes:  # a host lost and the job relaunched on the others (or on more)
            for M in (m for m in storages if m > 1):
                r = one_job(data, args, K=K, M=M, cache=True, K_next=K_next)
                trans = sum(x["wire_bytes"] for x in r["master"]["reports"])
                at = f"e{r['ckpt']['epoch']}+{r['ckpt']['samples']}"
                source, peers = source_and_peers(r["master"], args, M)
                print(f"{f'{K}>{K_next}':>4} {M:2d} {'yes':>9} {at:>8} {'yes':>9} {source / 1e6:9.3f} "
                      f"{peers / 1e6:8.3f} {trans / 1e6:14.3f} {r['wall']:6.1f}", flush=True)  # fmt: skip


def source_and_peers(m: dict, args: argparse.Namespace, M: int) -> tuple[int, int]:
    """Bytes from the source and from the peers after the restart, from the master's summary ``m``."""
    rest = m["resumed"] or {"source_bytes": 0}
    held = m.get("held")
    if held is None:  # the storage dealt whole again (M batches a worker) unless no epoch is left
        left = m["start_epoch"] + (m["resumed"] is not None) < args.epochs
        dealt = M * args.records * args.record_bytes if left else 0
        return rest["source_bytes"] + dealt, 0
    return rest["source_bytes"] + held["source_bytes"], held.get("peer_bytes", 0)


if __name__ == "__main__":
    main()
