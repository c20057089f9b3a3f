"""Bytes moved an epoch against shuffle quality: MosaicML StreamingDataset beside ours, same MDS shards.

The data: ``--records`` tokenized documents (lognormal(5, 1) uint16 tokens clamped to 16..1024,
mean about 460 B, as in ``record_sources.py``), written once as MDS shards of at most
``--shard-bytes`` (by streaming's own ``MDSWriter`` when ``--streaming-python`` imports it).
The first half of the shards is of kind A, the rest of kind B: the mixture experiment of the
StreamingDataset shuffle study (docs/algorithms.md), whose quality figure is the **mixture
deviation**: cut the global training order into batches, take in each the share of kind A, and
average ``100 |a / n - f|`` over the batches, ``f`` the share of A in the whole dataset (the
study's ``(max(ja, en) / n - 0.5) 100`` with ``f = 1/2``; :func:`coded_shuffle.orders.mixture_deviation`,
checked there against a brute force and the study's own statistic). Here the batches are the
global batches of ``K`` nodes with ``--batch`` samples each (``K x 250 = 2000`` at ``K = 8``, the
study's batch), the mean taken over every batch of an epoch and over epochs ``1 .. --epochs``.

StreamingDataset (``K`` nodes, one rank and one worker each, ``num_canonical_nodes = K``, its
default ``partition_algo``, ``shuffle_block_size`` its default unless ``--block-sizes`` says): each
node's samples of each epoch come from streaming's own code, ``generate_work`` of its ``random``
batching on a ``StreamingDataset`` over the shards (``get_partitions`` and ``get_shuffle``), run
in ``--streaming-python``. What a node downloads is then replayed against its cache, as
``StreamingDataset.prepare_shard`` does: a sample whose shard is not local downloads the whole
shard (its ``raw_data`` bytes), first evicting the coldest shards (least recently read) until the
shard fits under ``cache_limit``; the index counts in the cache from the start; the cache is
kept across epochs. Not modelled: predownload (streaming's threads make shards local up to
``8 x --batch`` samples ahead of the read, in an order that depends on their timing). Where the
cache holds a node's shards nothing is evicted and the replay is exact; where it thrashes the
replay understates streaming: on one node (``--check``) streaming's own iteration downloaded
several times the replay's bytes. Cache limits (``--caches``): ``M`` batches (``M D / K`` bytes, ``D`` the
shards' bytes; the storage of one of our workers with ``M`` batches) or ``none`` (no limit).

Ours, on the same records (sizes from the shards through
:class:`coded_shuffle.records.MDSRecords`), a uniform reshuffle an epoch cut into ``K`` batches:

- ``coded`` and ``exchange``, ``M = 1``: measured, :func:`coded_shuffle.engine.run` on the
  records (frames' payload and framing; the exchange's busiest download its download bound, which
  it meets);
- ``coded`` and ``exchange``, ``M = 2``: :func:`coded_shuffle.loads.byte_loads` (the coded load
  on pieces of one byte, no framing: a model, the engine refuses records of many sizes with ``M > 1``);
- the user's baselines: ``DistributedSampler`` (torch's own, ``shuffle=True``) reading each new
  batch from shared storage (every record of it, ``D`` an epoch), and with a local full copy
  (nothing moves, ``D`` on every node).

Columns, bytes as multiples of ``D_r`` (the records' bytes; the shards add their offsets):
``stored`` a node's storage (streaming: its cache limit, or with none the most it held);
``cold``: bytes moved to start epoch 0; ``moved``: bytes moved an epoch (mean of epochs
``1 .. E``), from the storage (streaming, shared storage), the master (coded: what it broadcast)
or the peers (exchange); ``busiest``: the most one node received (a broadcast reaches every
node whole); ``dev %``: the mixture deviation of the global batches; ``max %``: their worst
batch; ``node dev %``: the same of each node's own batches of ``--batch`` against the dataset's
share of A (what each node adds to a step); ``changed %``: the share of samples
whose node changed from the epoch before (a reshuffle across nodes moves ``(K - 1) / K`` of them;
streaming's ``py1e`` and ``py1br`` keep each shard on its node in every epoch, as their docstrings
say, and reshuffle within it).

Usage::

    python benchmarks/streaming_epochs.py --streaming-python /path/to/venv/bin/python
    python benchmarks/streaming_epochs.py --quick --streaming-python ... --plot out.png --json rows.jsonl
    python benchmarks/streaming_epochs.py --quick --check --streaming-python ...
    python benchmarks/streaming_epochs.py --replot rows.jsonl --plot out.png

mosaicml-streaming is not a dependency of the package: put it in a separate virtualenv, e.g.
``python -m venv VENV && VENV/bin/pip install mosaicml-streaming`` (pip brings torch,
torchvision and, for 0.13.0, CUDA wheels: several GB). Without it the shards are written from the
format's layout and only our rows and the baselines are shown.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np

ROOT = str(Path(__file__).resolve().parents[1])
ALGOS = ("py1e", "py1br", "naive")


def documents(n: int, seed: int):
    """The ``n`` documents' bytes, one at a time (the same in every interpreter)."""
    rng = np.random.default_rng(seed)
    lengths = np.clip(np.round(rng.lognormal(5.0, 1.0, n)), 16, 1024).astype(np.int64)
    for k in lengths:
        yield rng.integers(0, 50257, int(k), dtype=np.uint16).tobytes()


# --------------------------------------------------------------------------- streaming's side
# (runs in --streaming-python: numpy and streaming only)


def streaming_write(out: str, n: int, seed: int, shard_bytes: int) -> None:
    from streaming import MDSWriter

    with MDSWriter(out=out, columns={"tokens": "bytes"}, size_limit=shard_bytes) as w:
        for doc in documents(n, seed):
            w.write({"tokens": doc})


def streaming_work(
    mds: str, out: str, algo: str, block: str, K: int, batch: int, seed: int, epochs: int
) -> None:
    """Each node's samples of epochs ``0 .. epochs`` by streaming's own ``generate_work``."""
    from streaming import StreamingDataset
    from streaming.base.batching import generate_work
    from streaming.base.world import World

    ds = StreamingDataset(
        local=mds, shuffle=True, shuffle_algo=algo, shuffle_seed=seed, num_canonical_nodes=K,
        batch_size=batch, shuffle_block_size=None if block == "default" else int(block),
    )  # fmt: skip
    world = World(num_nodes=K, ranks_per_node=1, workers_per_rank=1, worker=0)
    ds._set_shuffle_block_size(world)  # its default when not given: max(4e6 // nodes, 2**18)
    works = [generate_work("random", ds, world, e, 0).reshape(K, -1) for e in range(epochs + 1)]
    np.save(out, np.stack(works))
    print(json.dumps({"block_size": int(ds.shuffle_block_size), "partition_algo": ds.partition_algo}))


def streaming_real(mds: str, algo: str, block: str, frac: str, batch: int, seed: int, epochs: int) -> None:
    """Bytes streaming's own iteration downloads on one node (``K = 1``) with a cache of ``frac D``:
    ``mds`` as its remote, a fresh local folder, each epoch iterated whole."""
    from streaming import StreamingDataset
    from streaming.base.stream import Stream

    got: list[int] = []
    download = Stream._download_file

    def counted(self, name, to=None):  # type: ignore[no-untyped-def]
        out = download(self, name, to)
        if name != "index.json":
            got.append(os.path.getsize(out))
        return out

    Stream._download_file = counted  # type: ignore[method-assign]
    shards = json.loads(Path(mds, "index.json").read_text())["shards"]
    limit = int(float(frac) * sum(x["raw_data"]["bytes"] for x in shards))
    ds = StreamingDataset(
        remote=mds, local=tempfile.mkdtemp(), shuffle=True, shuffle_algo=algo, shuffle_seed=seed,
        num_canonical_nodes=1, batch_size=batch, cache_limit=limit, shuffle_block_size=int(block),
    )  # fmt: skip
    per = []
    for _ in range(epochs + 1):
        before = sum(got)
        for _sample in ds:
            pass
        per.append(sum(got) - before)
    print(json.dumps({"per_epoch": per, "limit": limit}))


def _write_own(out: str, n: int, seed: int, shard_bytes: int) -> None:
    """MDS shards without streaming: its layout (``coded_shuffle.records.mds``), cut as its writer
    cuts them (a new shard when the next sample would pass ``shard_bytes``)."""
    os.makedirs(out)
    text = json.dumps({"version": 2, "format": "mds", "size_limit": shard_bytes}).encode()
    shards, part = [], []

    def flush() -> None:
        samples = [np.uint32(len(x)).tobytes() + x for x in part]
        offsets = np.cumsum([0] + [len(s) for s in samples]) + 4 + 4 * (len(samples) + 1) + len(text)
        raw = np.uint32(len(samples)).tobytes() + offsets.astype("<u4").tobytes() + text + b"".join(samples)
        name = f"shard.{len(shards):05}.mds"
        Path(out, name).write_bytes(raw)
        shards.append({"samples": len(samples), "format": "mds", "column_names": ["tokens"],
                       "column_encodings": ["bytes"], "column_sizes": [None], "compression": None,
                       "raw_data": {"basename": name, "bytes": len(raw)}, "zip_data": None})  # fmt: skip
        part.clear()

    size = 4 + 4 + len(text)
    for doc in documents(n, seed):
        if part and size + len(doc) + 8 > shard_bytes:
            flush()
            size = 4 + 4 + len(text)
        part.append(doc)
        size += len(doc) + 8
    flush()
    Path(out, "index.json").write_text(json.dumps({"version": 2, "shards": shards}))


# --------------------------------------------------------------------------- shared figures


def global_order(node_orders: list[np.ndarray], batch: int) -> np.ndarray:
    """The training order of ``K`` nodes stepping together: step ``s`` is every node's ``s``-th
    batch of ``batch`` samples, node by node (padding ``-1`` dropped)."""
    steps = max(-(-len(o) // batch) for o in node_orders)
    parts = [o[s * batch : (s + 1) * batch] for s in range(steps) for o in node_orders]
    out = np.concatenate(parts)
    return out[out >= 0]


def node_deviation(order: np.ndarray, *, split: int, share: float, batch: int) -> float:
    """The mixture deviation of one node's own batches against the dataset's share of kind A:
    the mean of ``100 |a / n - share|`` over its batches of ``batch`` (``mixture_deviation`` takes
    the share of the order it is given, here a node's, not the dataset's)."""
    starts = np.arange(0, order.size, batch)
    a = np.add.reduceat((order < split).astype(np.int64), starts)
    n = np.minimum(starts + batch, order.size) - starts
    return float(np.mean(np.abs(a / n - share)) * 100.0)


def quality(orders: list[list[np.ndarray]], *, split: int, batch: int) -> dict[str, float]:
    """Quality of epochs 1 .. E, averaged: the mixture deviation of the global batches (``dev``, and
    ``max_dev`` the worst batch) and of each node's own batches (``node_dev``); ``changed``, the
    share of the samples whose node differs from the epoch before (a reshuffle across nodes)."""
    from coded_shuffle.orders import mixture_deviation

    K = len(orders[0])
    N = int(sum(len(o) for o in orders[0]))
    devs = [mixture_deviation(global_order(o, batch), split=split, batch_size=K * batch) for o in orders[1:]]
    node = [
        node_deviation(x[x >= 0], split=split, share=split / N, batch=batch) for o in orders[1:] for x in o
    ]
    owners = []
    for o in orders:
        owner = np.full(N, -1, dtype=np.int64)
        for k, x in enumerate(o):
            owner[x[x >= 0]] = k
        owners.append(owner)
    changed = [float(np.mean(a != b)) for a, b in zip(owners, owners[1:], strict=False)]
    return {"dev": float(np.mean([d["mean_deviation_pct"] for d in devs])),
            "max_dev": max(d["max_deviation_pct"] for d in devs), "node_dev": float(np.mean(node)),
            "changed": 100.0 * float(np.mean(changed))}  # fmt: skip


def replay_cache(seq: np.ndarray, shard_bytes: np.ndarray, limit: int | None, state: dict) -> tuple[int, int]:
    """Bytes one node downloads reading its samples' shards ``seq`` in order, and the most it held.

    ``state`` is the node's cache, kept across epochs: an ``OrderedDict`` of the local shards,
    coldest first, and ``usage`` (bytes held, the index included)."""
    cache: OrderedDict = state["cache"]
    down = 0
    peak = state["usage"]
    keep = np.ones(seq.size, dtype=bool)
    keep[1:] = seq[1:] != seq[:-1]  # a read of the shard just read changes nothing
    for s in seq[keep].tolist():
        if s in cache:
            cache.move_to_end(s)
            continue
        need = int(shard_bytes[s])
        if limit is not None:
            while state["usage"] + need > limit:
                _, size = cache.popitem(last=False)
                state["usage"] -= size
        cache[s] = need
        state["usage"] += need
        down += need
        peak = max(peak, state["usage"])
    return down, peak


# --------------------------------------------------------------------------- rows


def streaming_rows(works: np.ndarray, setup: dict, caches: list[str]) -> list[dict]:
    """One row a cache limit for one algorithm's works (epochs x nodes x samples)."""
    E1, K, _ = works.shape
    shard_of = np.searchsorted(setup["shard_ends"], np.maximum(works, 0), side="right")
    orders = [[works[e, k][works[e, k] >= 0] for k in range(K)] for e in range(E1)]
    q = quality(orders, split=setup["split"], batch=setup["batch"])
    D, Dr = setup["shard_total"], setup["D"]
    rows = []
    for c in caches:
        limit = None if c == "none" else int(float(c) * D / K)
        if limit is not None and limit < 4 * int(setup["shard_bytes"].max()):
            rows.append({"cache": c, "refused": "cache below 4 shards (streaming refuses it)"})
            continue
        states = [{"cache": OrderedDict(), "usage": setup["index_bytes"]} for _ in range(K)]
        per_epoch, peaks = [], [0] * K
        for e in range(E1):
            downs = []
            for k in range(K):
                sel = works[e, k] >= 0
                d, p = replay_cache(shard_of[e, k][sel], setup["shard_bytes"], limit, states[k])
                downs.append(d)
                peaks[k] = max(peaks[k], p)
            per_epoch.append(downs)
        arr = np.array(per_epoch, dtype=np.float64)
        stored = (limit if limit is not None else max(peaks)) / Dr
        moved, busiest = arr[1:].sum(1).mean() / Dr, arr[1:].max(1).mean() / Dr
        rows.append({"cache": c, "stored": stored, "cold": arr[0].sum() / Dr, "moved": moved,
                     "busiest": busiest, **q})  # fmt: skip
    return rows


def sampler_orders(N: int, K: int, seed: int, epochs: int) -> list[list[np.ndarray]] | None:
    """Each rank's indices of torch's own ``DistributedSampler`` at epochs ``0 .. epochs``."""
    try:
        from torch.utils.data import DistributedSampler
    except ImportError:
        return None
    out = []
    for e in range(epochs + 1):
        ranks = []
        for r in range(K):
            s = DistributedSampler(range(N), num_replicas=K, rank=r, shuffle=True, seed=seed)
            s.set_epoch(e)
            ranks.append(np.fromiter(iter(s), dtype=np.int64))
        out.append(ranks)
    return out


def baseline_rows(setup: dict, sizes: np.ndarray, K: int, seed: int, epochs: int) -> list[dict]:
    """``DistributedSampler`` reading each rank's new batch from shared storage, and with a local copy."""
    orders = sampler_orders(len(sizes), K, seed, epochs)
    Dr = setup["D"]
    if orders is None:
        print("note: torch is not importable: no DistributedSampler order, its quality is not shown")
        q: dict = {"dev": None, "max_dev": None, "node_dev": None, "changed": None}
        read, most = float(Dr), Dr / K
    else:
        q = quality(orders, split=setup["split"], batch=setup["batch"])
        per_rank = np.array([[sizes[o].sum() for o in ranks] for ranks in orders[1:]], dtype=np.float64)
        read, most = float(per_rank.sum(1).mean()), float(per_rank.max(1).mean())
    return [
        {"method": "DistributedSampler, shared storage", "M": "-", "stored": 0.0, "cold": read / Dr,
         "moved": read / Dr, "busiest": most / Dr, **q},
        {"method": "DistributedSampler, local copy", "M": "-", "stored": 1.0, "cold": 0.0, "moved": 0.0,
         "busiest": 0.0, **q},
    ]  # fmt: skip


def our_rows(mds: str, setup: dict, K: int, seed: int, epochs: int) -> list[dict]:
    from coded_shuffle.codec import load_dataset
    from coded_shuffle.engine import run
    from coded_shuffle.loads import byte_loads
    from coded_shuffle.orders import epoch_order, order_placement
    from coded_shuffle.records import MDSRecords

    src = MDSRecords(mds)
    sizes = np.asarray(src.sizes, dtype=np.int64)
    N, Dr = len(sizes), setup["D"]
    orders = []
    for e in range(epochs + 1):  # each worker's batch in the epoch's order: contiguous runs of it
        order = epoch_order(N, seed=seed, epoch=e)
        counts = order_placement(N, K, seed=seed, epoch=e).sizes()
        orders.append(np.split(order, np.cumsum(counts)[:-1]))
    q = quality(orders, split=setup["split"], batch=setup["batch"])
    ds = load_dataset(src)
    rows = []
    for mode in ("coded", "exchange"):
        t0 = time.perf_counter()
        rep = run(ds, K=K, epochs=epochs, seed=seed, mode=mode)
        assert rep.verified, mode
        moved = np.mean([t.sent_bytes for t in rep.transitions])
        busiest = moved if mode == "coded" else np.mean([t.download_bound_bytes for t in rep.transitions])
        rows.append({"method": f"{mode} (engine.run)", "M": 1, "stored": 1 / K, "cold": 1.0,
                     "moved": moved / Dr, "busiest": busiest / Dr, "seconds": time.perf_counter() - t0,
                     **q})  # fmt: skip
    places = [order_placement(N, K, seed=seed, epoch=e) for e in range(epochs + 1)]
    loads = [
        byte_loads(a, b, sizes=sizes, storage=2, padded=False)
        for a, b in zip(places, places[1:], strict=False)
    ]
    coded = float(np.mean([float(x.coded_bytes) for x in loads]))
    missing = float(np.mean([float(x.uncoded_bytes) for x in loads]))
    most = float(np.mean([float(x.download_bound_bytes) for x in loads]))
    rows += [
        {"method": "coded (byte_loads)", "M": 2, "stored": 2 / K, "cold": 2.0, "moved": coded / Dr,
         "busiest": coded / Dr, **q},
        {"method": "exchange (byte_loads)", "M": 2, "stored": 2 / K, "cold": 2.0, "moved": missing / Dr,
         "busiest": most / Dr, **q},
    ]  # fmt: skip
    return rows


# --------------------------------------------------------------------------- driver


def _sub(python: str, *args: str) -> str:
    done = subprocess.run(
        [python, os.path.abspath(__file__), *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"
        raise RuntimeError(f"{python} {args[0]}: {last}")
    return done.stdout


def _has_streaming(python: str) -> bool:
    try:
        _sub(python, "--probe")
    except (RuntimeError, OSError):
        return False
    return True


def shard_setup(mds: str, batch: int) -> dict:
    index = json.loads(Path(mds, "index.json").read_text())
    samples = np.array([s["samples"] for s in index["shards"]], dtype=np.int64)
    raw = np.array([s["raw_data"]["bytes"] for s in index["shards"]], dtype=np.int64)
    ends = np.cumsum(samples)
    sys.path.insert(0, ROOT)
    from coded_shuffle.records import MDSRecords

    src = MDSRecords(mds)
    return {"shard_ends": ends, "shard_bytes": raw, "shard_total": int(raw.sum()), "shards": len(samples),
            "split": int(ends[len(samples) // 2 - 1]), "N": int(ends[-1]), "D": int(np.sum(src.sizes)),
            "index_bytes": Path(mds, "index.json").stat().st_size, "batch": batch}  # fmt: skip


def plot(rows: list[dict], path: str, title: str) -> None:
    """Bytes moved an epoch against the mixture deviation of the global batches (left) and of each
    node's own batches (right), one point a row; the y axis is linear below 0.1 (nothing moved)."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    fig = Figure(figsize=(11, 5.5), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    palette = ["tab:red", "tab:orange", "tab:brown", "tab:pink", "tab:purple", "tab:olive"]
    colors: dict[str, str] = {}
    caches = {"1": "s", "2": "^", "none": "o"}
    ours = {"coded": ("tab:blue", "D"), "exchange": ("tab:cyan", "D"), "DistributedSampler": ("0.3", "P")}
    handles = []
    for r in rows:
        if r.get("dev") is None or "moved" not in r:
            continue
        if r["family"] in ALGOS:
            color = colors.setdefault(r["method"], palette[len(colors) % len(palette)])
            marker = caches.get(r["cache"], "x")
            if color not in [h.get_color() for h in handles]:
                handles.append(Line2D([], [], color=color, marker="o", ls="", label=r["method"]))
        else:
            color, marker = ours[r["method"].split()[0].rstrip(",")]
            marker = "*" if r["method"].endswith("local copy") else ("d" if r["M"] == 2 else marker)
            handles.append(Line2D([], [], color=color, marker=marker, ls="", label=r["label"]))
        for ax, key in zip(axes, ("dev", "node_dev"), strict=True):
            ax.scatter([r[key]], [r["moved"]], color=color, marker=marker, s=40, alpha=0.85, zorder=2)
    for c, m in caches.items():
        what = "no limit" if c == "none" else f"cache {c} batch" + "es" * (c != "1")
        handles.append(Line2D([], [], color="0.5", marker=m, ls="", label=f"streaming, {what}"))
    axes[0].set_ylabel("bytes moved an epoch / dataset bytes (epochs 1 on)")
    axes[0].set_xlabel("mixture deviation of the global batches (%)")
    axes[1].set_xlabel("mixture deviation of each node's own batches (%)")
    for ax in axes:
        ax.set_yscale("symlog", linthresh=0.1)
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.grid(alpha=0.3, which="both")
    fig.suptitle(title, fontsize=10)
    fig.legend(handles=handles, loc="outside right center", fontsize=7)
    fig.savefig(path)


COLUMNS = (("label", "method", "{}"), ("stored", "stored", "{:.3f}"), ("cold", "cold", "{:.3f}"),
           ("moved", "moved", "{:.3f}"), ("busiest", "busiest", "{:.3f}"), ("dev", "dev %", "{:.2f}"),
           ("max_dev", "max %", "{:.2f}"), ("node_dev", "node dev %", "{:.2f}"),
           ("changed", "changed %", "{:.1f}"))  # fmt: skip


def _line(r: dict) -> str:
    if "refused" in r:
        return f"| {r['label']} | {r['refused']} |"
    cells = ["-" if r.get(k) is None else f.format(r[k]) for k, _, f in COLUMNS]
    return "| " + " | ".join(cells) + " |"


def _streaming_part(args: argparse.Namespace, mds: str, setup: dict, tmp: str) -> list[dict]:
    rows = []
    for algo in args.algos.split(","):
        blocks = ["default"] if algo == "naive" else args.block_sizes.split(",")
        for block in blocks:
            out = os.path.join(tmp, f"{algo}-{block}.npy")
            t0 = time.perf_counter()
            said = _sub(args.streaming_python, "--work", mds, out, algo, block, str(args.workers),
                        str(args.batch), str(args.seed), str(args.epochs))  # fmt: skip
            info = json.loads(said.strip().splitlines()[-1])
            works = np.load(out)
            name = algo if algo == "naive" else f"{algo}, block {info['block_size']:,}"
            for r in streaming_rows(works, setup, args.caches.split(",")):
                c = r["cache"]
                cache = "no limit" if c == "none" else f"cache {c} batch" + "es" * (c != "1")
                rows.append({**r, "family": algo, "method": f"streaming {name}", "block": info["block_size"],
                             "label": f"streaming {name}, {cache}",
                             "seconds": time.perf_counter() - t0})  # fmt: skip
                print(_line(rows[-1]), flush=True)
    return rows


def check_one_node(a: argparse.Namespace, mds: str, setup: dict, tmp: str) -> None:
    """``--check``: the replay of one node's cache against streaming's own iteration (``K = 1``,
    ``py1br``, block 2048, a cache of a quarter of the shards' bytes: a thrashing case)."""
    out = os.path.join(tmp, "check.npy")
    run = (str(a.batch), str(a.seed), str(a.epochs))
    _sub(a.streaming_python, "--work", mds, out, "py1br", "2048", "1", *run)
    works = np.load(out)
    shard_of = np.searchsorted(setup["shard_ends"], np.maximum(works, 0), side="right")
    limit = int(0.25 * setup["shard_total"])
    state = {"cache": OrderedDict(), "usage": setup["index_bytes"]}
    mine = [replay_cache(shard_of[e, 0][works[e, 0] >= 0], setup["shard_bytes"], limit, state)[0]
            for e in range(works.shape[0])]  # fmt: skip
    said = _sub(a.streaming_python, "--real", mds, "py1br", "2048", "0.25", *run)
    real = [round(x / 1e6, 1) for x in json.loads(said.strip().splitlines()[-1])["per_epoch"]]
    print("check, one node, py1br block 2048, cache 0.25 D: downloaded an epoch (MB), streaming's own "
          f"iteration {real}, the replay {[round(x / 1e6, 1) for x in mine]}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, help="documents (default 100,000; --quick 20,000)")
    p.add_argument("--workers", type=int, default=8, help="K: nodes (streaming) and workers (ours)")
    p.add_argument("--batch", type=int, default=250, help="samples a node's batch (global batch K x this)")
    p.add_argument("--shard-bytes", type=int, help="MDS shard size limit (default 2**19; --quick 2**17)")
    p.add_argument("--block-sizes", default="default,2048", help="py1e/py1br shuffle_block_size list")
    p.add_argument("--caches", default="1,2,none", help="streaming cache limits: batches (D/K) or none")
    p.add_argument("--algos", default=",".join(ALGOS))
    p.add_argument("--epochs", type=int, help="epochs after the first, E (default 3; --quick 2)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="smaller defaults: a run of about a minute")
    p.add_argument("--streaming-python", default=sys.executable, help="interpreter with mosaicml-streaming")
    p.add_argument("--plot", help="write the plot to this PNG or SVG (needs matplotlib)")
    p.add_argument("--json", help="write the rows as JSON lines to this file")
    p.add_argument("--replot", metavar="JSONL", help="only draw --plot from the rows of an earlier --json")
    p.add_argument("--check", action="store_true", help="also compare the replay with streaming's iteration")
    p.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--real", nargs=7, help=argparse.SUPPRESS)
    p.add_argument("--write", nargs=4, help=argparse.SUPPRESS)
    p.add_argument("--work", nargs=8, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.probe:
        import streaming.base.batching  # noqa: F401

        return 0
    if a.write:
        streaming_write(a.write[0], int(a.write[1]), int(a.write[2]), int(a.write[3]))
        return 0
    if a.real:
        m, algo, block, frac, b, seed, E = a.real
        streaming_real(m, algo, block, frac, int(b), int(seed), int(E))
        return 0
    if a.work:
        m, o, algo, block, K, b, s, E = a.work
        streaming_work(m, o, algo, block, int(K), int(b), int(s), int(E))
        return 0
    if a.replot:
        if not a.plot:
            p.error("--replot needs --plot")
        rows = [json.loads(line) for line in Path(a.replot).read_text().splitlines() if line.strip()]
        plot(rows, a.plot, rows[0].get("title", ""))
        return 0
    sizes = (("records", 100_000, 20_000), ("shard_bytes", 1 << 19, 1 << 17), ("epochs", 3, 2))
    for name, full, quick in sizes:
        if getattr(a, name) is None:
            setattr(a, name, quick if a.quick else full)
    for name in ("records", "shard_bytes", "epochs", "workers", "batch"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1, not {getattr(a, name)}")
    return _run(a)


def _run(a: argparse.Namespace) -> int:
    sys.path.insert(0, ROOT)
    have = _has_streaming(a.streaming_python)
    with tempfile.TemporaryDirectory() as tmp:
        mds = os.path.join(tmp, "mds")
        if have:
            _sub(a.streaming_python, "--write", mds, str(a.records), str(a.seed), str(a.shard_bytes))
        else:
            print(f"note: mosaicml-streaming is not importable by {a.streaming_python}: shards written "
                  "from its layout, no streaming rows (see --streaming-python)")  # fmt: skip
            _write_own(mds, a.records, a.seed, a.shard_bytes)
        setup = shard_setup(mds, a.batch)
        K = a.workers
        print(f"{setup['N']:,} documents, D_r = {setup['D'] / 1e6:.1f} MB in {setup['shards']} MDS shards "
              f"of at most {a.shard_bytes:,} B ({setup['shard_total'] / 1e6:.1f} MB), kind A = the first "
              f"{setup['split']:,}; K = {K}, global batch {K} x {a.batch}, epochs 0..{a.epochs}, "
              f"seed {a.seed}; bytes in D_r")  # fmt: skip
        print("| " + " | ".join(t for _, t, _ in COLUMNS) + " |")
        print("|" + " --- |" * len(COLUMNS))
        rows = _streaming_part(a, mds, setup, tmp) if have else []
        if have and a.check:
            check_one_node(a, mds, setup, tmp)
        from coded_shuffle.records import MDSRecords

        sizes = np.asarray(MDSRecords(mds).sizes, dtype=np.int64)
        for r in baseline_rows(setup, sizes, K, a.seed, a.epochs):
            rows.append({**r, "family": "baseline", "label": r["method"]})
            print(_line(rows[-1]), flush=True)
        for r in our_rows(mds, setup, K, a.seed, a.epochs):
            rows.append({**r, "family": "ours", "label": f"{r['method']}, M = {r['M']}"})
            print(_line(rows[-1]), flush=True)
    from coded_shuffle.orders import binomial_floor_pct

    f = setup["split"] / setup["N"]
    floors = [binomial_floor_pct(n, fraction=f) for n in (K * a.batch, a.batch)]
    print(f"binomial floor of the deviation: {floors[0]:.2f} % (global batch {K * a.batch}), "
          f"{floors[1]:.2f} % (a node's batch {a.batch})")  # fmt: skip
    title = f"K = {K}, {setup['N']:,} documents in {setup['shards']} MDS shards, epochs 1-{a.epochs}"
    if a.json:
        with open(a.json, "w") as fh:
            for r in rows:
                fh.write(json.dumps({**r, "title": title}, default=float) + "\n")
    if a.plot:
        plot(rows, a.plot, title)
        print(f"plot: {a.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
