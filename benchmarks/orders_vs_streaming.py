"""Shard-aware epoch orders: coded_shuffle.orders.shards next to MosaicML streaming.

The setup is the mixture experiment of the StreamingDataset shuffle study (docs/algorithms.md):
``--shards`` shards of ``--shard-size`` samples (default 10^4 x 10^4 = 10^8), the first half of
the shards of kind A, the second half of kind B. For each algorithm, each implementation
generates the epoch order in a fresh subprocess, which reports its generation time and its peak
resident memory (``resource.getrusage(RUSAGE_SELF).ru_maxrss``, read right after generation;
``+MB`` is the peak less the same figure read before generation, after imports). The order is
handed back through a ``.npy`` file and both implementations' orders are scored with the same
quality figures (:func:`coded_shuffle.orders.quality.order_quality`).

MosaicML streaming is not a dependency. It is compared when ``--streaming-python`` (default:
this interpreter) can import ``streaming.base.shuffle``; otherwise a note is printed and only
our figures are shown. Installing it pulls torch: use a separate virtualenv.

Usage::

    python benchmarks/orders_vs_streaming.py --shards 1000 --shard-size 1000
    python benchmarks/orders_vs_streaming.py --shards 1000 --shard-size 1000 --algos py1br --seeds 0,1,2
    python benchmarks/orders_vs_streaming.py --streaming-python /path/to/other/venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALGOS = ["naive", "py1s", "py2s", "py1b", "py1br", "py1e"]


# --------------------------------------------------------------------------------------------
# worker: runs in a fresh interpreter, imports only what its implementation needs
# --------------------------------------------------------------------------------------------


def _maxrss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def load_streaming_shuffle():
    """Return streaming's ``get_shuffle``.

    Its shuffle modules need only numpy, but ``import streaming`` runs the package's
    ``__init__``, which imports its whole dataset stack (torch, transformers, cloud clients).
    When that fails, the parent packages are registered as bare namespace modules so that only
    ``streaming/base/shuffle`` is executed.
    """
    try:
        from streaming.base.shuffle import get_shuffle
    except ImportError:
        import importlib
        import importlib.util
        import types

        for name in [m for m in sys.modules if m == "streaming" or m.startswith("streaming.")]:
            del sys.modules[name]
        spec = importlib.util.find_spec("streaming")
        if spec is None or not spec.submodule_search_locations:
            raise
        root = list(spec.submodule_search_locations)[0]
        for name, path in (("streaming", root), ("streaming.base", os.path.join(root, "base"))):
            module = types.ModuleType(name)
            module.__path__ = [path]
            sys.modules[name] = module
        get_shuffle = importlib.import_module("streaming.base.shuffle").get_shuffle
    return get_shuffle


def worker(impl: str, algo: str, out: str, args: argparse.Namespace) -> None:
    import numpy as np

    sizes = np.full(args.shards, args.shard_size, dtype=np.int64)
    if impl == "ours":
        sys.path.insert(0, ROOT)
        from coded_shuffle.orders.shards import shard_order

        def make():
            return shard_order(
                algo,
                sizes,
                canonical_nodes=args.canonical_nodes,
                seed=args.seed,
                epoch=args.epoch,
                block_size=args.block_size,
            )

    else:
        get_shuffle = load_streaming_shuffle()

        def make():
            return get_shuffle(algo, sizes, args.canonical_nodes, args.seed, args.epoch, args.block_size)

    base = _maxrss_mb()
    t0 = time.perf_counter()
    try:
        order = make()
    except KeyError:
        print(json.dumps({"error": f"{impl} has no algorithm {algo!r}"}))
        return
    seconds = time.perf_counter() - t0
    peak = _maxrss_mb()
    np.save(out, np.asarray(order, dtype=np.int64))
    print(json.dumps({"seconds": seconds, "peak_mb": peak, "base_mb": base}))


# --------------------------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------------------------


def _run_worker(python: str, impl: str, algo: str, out: str, args: argparse.Namespace) -> dict:
    cmd = [python, os.path.abspath(__file__), "--worker", impl, algo, out]
    for name in ("shards", "shard_size", "canonical_nodes", "block_size", "seed", "epoch"):
        cmd += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _streaming_available(python: str) -> bool:
    probe = subprocess.run(
        [python, os.path.abspath(__file__), "--probe-streaming"], capture_output=True, text=True, check=False
    )
    return probe.returncode == 0


def score(path: str, args: argparse.Namespace) -> None:
    """Print the quality figures of the order saved at ``path`` (runs in its own process)."""
    import numpy as np

    sys.path.insert(0, ROOT)
    from coded_shuffle.orders.quality import order_quality

    order = np.load(path)
    sizes = np.full(args.shards, args.shard_size, dtype=np.int64)
    figures = order_quality(
        order,
        shard_sizes=sizes,
        canonical_nodes=args.canonical_nodes,
        split=(args.shards // 2) * args.shard_size,
        batches=args.batches,
        batch_size=args.batch_size,
    )
    print(json.dumps(figures))


def _score(path: str, args: argparse.Namespace) -> dict:
    # In a subprocess too: Linux carries a process's peak RSS over fork and exec, so the driver
    # must stay small for the workers' ru_maxrss to mean their own peak.
    cmd = [sys.executable, os.path.abspath(__file__), "--score", path]
    for name in ("shards", "shard_size", "canonical_nodes", "batches", "batch_size"):
        cmd += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


COLUMNS = [
    ("algo", "algo", "{}"),
    ("impl", "impl", "{}"),
    ("seed", "seed", "{}"),
    ("seconds", "gen s", "{:.2f}"),
    ("peak_mb", "peak MB", "{:.0f}"),
    ("gen_mb", "+MB", "{:.0f}"),
    ("mean_deviation_pct", "mean dev %", "{:.2f}"),
    ("max_deviation_pct", "max dev %", "{:.2f}"),
    ("epoch_mean_deviation_pct", "epoch dev %", "{:.2f}"),
    ("longest_in_order_run", "in-order run", "{:.0f}"),
    ("mean_shards_per_batch", "shards/batch", "{:.1f}"),
    ("max_open_shards_per_node", "open shards", "{:.0f}"),
]


def _row(rec: dict) -> str:
    cells = []
    for key, _, fmt in COLUMNS:
        value = rec.get(key)
        cells.append("-" if value is None else fmt.format(value))
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shards", type=int, default=10_000)
    p.add_argument("--shard-size", type=int, default=10_000)
    p.add_argument("--canonical-nodes", type=int, default=1)
    p.add_argument("--block-size", type=int, default=1 << 18)
    p.add_argument("--batches", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=2000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--seeds", help="comma-separated seeds (overrides --seed); adds a mean row per order")
    p.add_argument("--epoch", type=int, default=1)
    p.add_argument("--repeat", type=int, default=1, help="runs per order; the fastest is shown")
    p.add_argument("--algos", default=",".join(ALGOS), help="comma-separated algorithm names")
    p.add_argument("--streaming-python", default=sys.executable, help="interpreter with mosaicml-streaming")
    p.add_argument("--no-streaming", action="store_true", help="skip the comparison")
    p.add_argument("--json", help="also write the records as JSON lines to this file")
    p.add_argument("--worker", nargs=3, metavar=("IMPL", "ALGO", "OUT"), help=argparse.SUPPRESS)
    p.add_argument("--probe-streaming", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--score", metavar="NPY", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.score:
        score(args.score, args)
        return 0
    if args.probe_streaming:
        load_streaming_shuffle()
        return 0
    if args.worker:
        worker(*args.worker, args)
        return 0

    impls = [("ours", sys.executable)]
    if args.no_streaming:
        print("note: comparison with mosaicml-streaming skipped (--no-streaming).")
    elif _streaming_available(args.streaming_python):
        impls.append(("streaming", args.streaming_python))
    else:
        print(
            f"note: mosaicml-streaming is not importable by {args.streaming_python}; "
            "showing coded_shuffle only. Install it in a separate virtualenv (it pulls torch) "
            "and pass --streaming-python."
        )
    N = args.shards * args.shard_size
    print(
        f"setup: {args.shards} shards x {args.shard_size} samples = {N}, canonical nodes "
        f"{args.canonical_nodes}, block {args.block_size}, epoch {args.epoch}; "
        f"deviation over the first {args.batches} batches of {args.batch_size}"
    )
    if args.repeat > 1:
        print(f"each order generated {args.repeat} times in fresh processes; the fastest run is shown")
    print("| " + " | ".join(title for _, title, _ in COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    seeds = [int(x) for x in args.seeds.split(",")] if args.seeds else [args.seed]
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        for algo in args.algos.split(","):
            for impl, python in impls:
                done = []
                for seed in seeds:
                    run_args = argparse.Namespace(**{**vars(args), "seed": seed})
                    out = os.path.join(tmp, f"{impl}-{algo}.npy")
                    runs = [_run_worker(python, impl, algo, out, run_args) for _ in range(args.repeat)]
                    ok = [r for r in runs if "error" not in r]
                    best = min(ok, key=lambda r: r["seconds"]) if ok else runs[0]
                    rec = {"algo": algo, "impl": impl, "seed": seed, **best, "runs": len(ok)}
                    if "error" in rec:
                        print(f"| {algo} | {impl} | {seed} | {rec['error']} |", flush=True)
                        break
                    rec["gen_mb"] = rec["peak_mb"] - rec["base_mb"]
                    rec.update(_score(out, args))
                    os.remove(out)
                    records.append(rec)
                    done.append(rec)
                    print(_row(rec), flush=True)
                if len(done) > 1:
                    mean = {"algo": algo, "impl": impl, "seed": "mean"}
                    for key, _, _fmt in COLUMNS[3:]:
                        values = [r[key] for r in done]
                        mean[key] = (
                            max(values) if key.startswith(("max", "longest")) else sum(values) / len(values)
                        )
                    print(_row(mean).replace("| mean |", "| **mean** |"), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            for rec in records:
                f.write(json.dumps({**rec, "shards": args.shards, "shard_size": args.shard_size}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
