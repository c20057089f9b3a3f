"""A torchrun job restarted after one rank is killed mid-epoch: the samples each epoch yields
(each exactly once across the restart) and the bytes the master sent after it, with and without
``cache_dir``, side by side in one run.

The job: ``K`` training ranks and the master under ``torchrun --max-restarts 1``, each worker
iterating a :class:`~coded_shuffle.torch.CodedIterableDataset` over ``--records`` records of
``--record-bytes`` bytes (``DataLoader(batch_size=--batch)``, no DataLoader workers). After every
step the last worker writes the dataset's ``state_dict()`` (the job's checkpoint, written whole
or not at all); at ``--kill-step`` steps into epoch 1 of the first attempt it kills itself
(SIGKILL). ``torchrun`` ends the other ranks and starts them all again; the new job loads the
checkpoint and trains on. A worker's steps after the checkpoint, in the attempt killed, are
redone, as a training job's would be: they are not counted.

For each epoch the benchmark checks that the samples counted make every record exactly once, and
reports, after the restart: the records of the resumed epoch sent from the source (the rest that
no worker still held: with a ``cache_dir`` only what the files no longer hold), what the source
sent at the start of the loader's job (the epoch after the rest starts from what the workers hold
of it: only the records none holds), and the bytes of the transitions after it, the first one
from the holdings included (the master's wire bytes); and the wall time of each attempt.

Run:  python benchmarks/torchrun_restart.py [--workers 2] [--records 4096] [--record-bytes 1024]
      [--epochs 4] [--batch 64] [--kill-step 5]
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


def program(data: Path, out: Path, *, epochs: int, batch: int, kill_step: int, cache: bool) -> int:
    """One rank of the job (under torchrun)."""
    import torch.distributed as dist
    from torch.utils.data import DataLoader

    from coded_shuffle.torch import CodedIterableDataset

    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    # A store of the attempt's own: the restarted ranks meet afresh, not over the keys of the
    # attempt killed.
    store = f"file://{out / f'store_a{attempt}'}"
    dist.init_process_group("gloo", init_method=store, rank=int(os.environ["RANK"]),
                            world_size=int(os.environ["WORLD_SIZE"]))  # fmt: skip
    ckpt = out / "checkpoint.json"
    ds = CodedIterableDataset(data / "rows.npy", epochs=epochs, seed=1, with_ids=True, timeout=60,
                              cache_dir=out / "cache" if cache else None)  # fmt: skip
    if attempt and ckpt.exists():
        ds.load_state_dict(json.loads(ckpt.read_text()))
        ckpt = out / f"checkpoint_a{attempt}.json"  # the first attempt's kept for the count
    tic = time.perf_counter()
    if ds.is_master:
        reports = ds.serve()
        resumed = None if ds.resumed is None else vars(ds.resumed)
        held = getattr(ds._loader, "held_start", None)  # the loader's start from the workers' holdings
        summary = {"resumed": resumed, "held": None if held is None else vars(held),
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
                    os.kill(os.getpid(), signal.SIGKILL)
    log.close()
    return 0


def counted(out: Path, K: int, ckpt: dict, batch: int) -> dict[int, list[int]]:
    """Each epoch's samples that count: every step of the last attempt, and of the first those up
    to the checkpoint (the epochs before it whole, its epoch's first ``samples``)."""
    per_epoch: dict[int, list[int]] = {}
    for k in range(K):
        for attempt in (0, 1):
            path = out / f"w{k}_a{attempt}.jsonl"
            for line in path.read_text().splitlines() if path.exists() else []:
                row = json.loads(line)
                t, done = row["epoch"], row["step"] * batch
                if attempt == 0 and (t > ckpt["epoch"] or (t == ckpt["epoch"] and done > ckpt["samples"])):
                    continue  # after the checkpoint: redone by the restarted job
                per_epoch.setdefault(t, []).extend(row["ids"])
    return per_epoch


def one_job(data: Path, args: argparse.Namespace, *, cache: bool) -> dict:
    out = Path(tempfile.mkdtemp(prefix="restart-", dir=data))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc-per-node={args.workers + 1}", "--max-restarts=1", "--monitor-interval=0.5", str(HERE),
           "--program", str(data), str(out), "--epochs", str(args.epochs), "--batch", str(args.batch),
           "--kill-step", str(args.kill_step)]  # fmt: skip
    cmd += ["--cache"] if cache else []
    env = {**os.environ, "PYTHONPATH": str(HERE.parent.parent)}
    tic = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env, check=False)
    wall = time.perf_counter() - tic
    if proc.returncode:
        (data.parent / "torchrun_restart.err").write_text(proc.stderr)
        raise SystemExit(f"the job failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    ckpt = json.loads((out / "checkpoint.json").read_text())
    epochs = counted(out, args.workers, ckpt, args.batch)
    for t in range(args.epochs):
        if sorted(epochs.get(t, [])) != list(range(args.records)):
            raise SystemExit(f"epoch {t}: the samples counted are not every record exactly once")
    master = json.loads((out / "master_a1.json").read_text())
    return {"wall": wall, "ckpt": ckpt, "master": master, "epochs": args.epochs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--records", type=int, default=4096)
    ap.add_argument("--record-bytes", type=int, default=1024)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--kill-step", type=int, default=5)
    ap.add_argument("--program", nargs=2, type=Path)
    ap.add_argument("--cache", action="store_true")
    args = ap.parse_args()
    if args.program:
        sys.exit(program(*args.program, epochs=args.epochs, batch=args.batch, kill_step=args.kill_step,
                         cache=args.cache))  # fmt: skip
    if args.records % (args.workers * args.batch):
        raise SystemExit("--records must be a multiple of --workers times --batch (no padding to count)")
    with tempfile.TemporaryDirectory() as d:
        data = Path(d)
        rng = np.random.default_rng(0)
        np.save(data / "rows.npy", rng.integers(0, 256, (args.records, args.record_bytes), dtype=np.uint8))
        B = args.record_bytes
        print(f"K = {args.workers}, N = {args.records} records of {B} bytes, {args.epochs} epochs, "
              f"worker {args.workers - 1} killed {args.kill_step} steps into epoch 1")  # fmt: skip
        print(f"{'cache_dir':>9} {'ckpt':>10} {'each once':>9} {'rest src MB':>11} {'kept':>6} "
              f"{'dealt MB':>8} {'transitions MB':>14} {'job s':>6}")  # fmt: skip
        for cache in (False, True):
            r = one_job(data, args, cache=cache)
            m, ck = r["master"], r["ckpt"]
            rest = m["resumed"] or {"source_bytes": 0, "kept_records": 0}
            dealt = args.records * B if m["start_epoch"] + (m["resumed"] is not None) < args.epochs else 0
            if m.get("held") is not None:  # the next epoch from the holdings: only what none held
                dealt = m["held"]["source_bytes"]
            trans = sum(x["wire_bytes"] for x in m["reports"])
            at = f"e{ck['epoch']}+{ck['samples']}"
            print(f"{'yes' if cache else 'no':>9} {at:>10} {'yes':>9} "
                  f"{rest['source_bytes'] / 1e6:11.3f} {rest['kept_records']:6d} {dealt / 1e6:8.3f} "
                  f"{trans / 1e6:14.3f} {r['wall']:6.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
