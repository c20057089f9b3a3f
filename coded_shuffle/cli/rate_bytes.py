"""``rate``'s options in bytes: ``--network`` with ``--record-bytes``, and the records' own sizes
(``--sizes FILE``, ``--balance count|bytes``) with the loads in bytes beside the counts."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..loads import byte_loads
from ..matrix import shuffle_matrix
from ..network import predict_bytes
from ..orders import BALANCES, OrderSpec, check_record_sizes, order_placement
from .common import UsageError, _positive, network_option

#: Largest sizes file ``--sizes`` reads as text (a ``.npy`` file is memory-mapped, of any size).
MAX_SIZES_TEXT_BYTES = 256 << 20


def read_sizes(path: str) -> np.ndarray:
    """The record sizes of ``--sizes FILE``: a ``.npy`` array of integers, else text of integers
    separated by blanks, commas or line breaks; one line naming the file where it is not.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "sizes.txt"
    >>> _ = f.write_text("300 20\\n1024,7\\n")
    >>> read_sizes(str(f)).tolist()
    [300, 20, 1024, 7]
    """
    try:
        if path.endswith(".npy"):
            values: Any = np.load(path, mmap_mode="r", allow_pickle=False)
        else:
            if os.path.getsize(path) > MAX_SIZES_TEXT_BYTES:
                raise UsageError(f"--sizes: {path}: a text file of sizes is at most 256 MiB; save a .npy")
            with open(path, encoding="utf-8") as fh:
                words = fh.read().replace(",", " ").split()
            try:
                values = [int(w) for w in words]
            except ValueError:
                bad = next(w for w in words if not w.lstrip("-").isdigit())
                raise UsageError(f"--sizes: {path}: {bad!r} is not a whole number of bytes") from None
        if not len(values):
            raise UsageError(f"--sizes: {path}: no record sizes in it")
        return check_record_sizes(values)
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--sizes: {path}: {getattr(exc, 'strerror', None) or exc}") from None
    except ValueError as exc:  # not integers, an empty record, a bad .npy
        raise UsageError(f"--sizes: {path}: {str(exc).removeprefix('Argument ')}") from None


def add_bytes_arguments(rate: argparse.ArgumentParser) -> None:
    """Add ``--network``, ``--record-bytes``, ``--sizes`` and ``--balance`` to ``rate``."""
    rate.add_argument(
        "--network",
        metavar="SPEC",
        help=(
            "also print each transition's time bound and each delivery's predicted time on this "
            "network: master=R,up=R,down=R[,multicast] in Mbit/s (docs/cli.md); needs --record-bytes "
            "or --sizes"
        ),
    )
    rate.add_argument(
        "--record-bytes", "-B", type=_positive, metavar="B", help="bytes a record, with --network"
    )
    rate.add_argument(
        "--sizes",
        metavar="FILE",
        help=(
            "each record's bytes (a .npy array of ints, or ints in text), one a record: N is their "
            "number, and the loads, bounds and batches are also given in bytes"
        ),
    )
    rate.add_argument(
        "--balance",
        choices=BALANCES,
        default="count",
        help="cut each epoch's order into batches of equal counts or, with --sizes, of equal bytes "
        "within one record (default count)",
    )


def network_options(args: argparse.Namespace) -> dict[str, Any]:
    """``network`` and ``record_bytes`` for :func:`~.rate.rate_rows`, checked: one line naming the option."""
    if args.network is None:
        if args.record_bytes is not None:
            raise UsageError("--record-bytes applies with --network only (the loads are in records)")
        return {}
    network = network_option(args, pieces=True)
    if args.sizes is not None:
        if args.record_bytes is not None:
            raise UsageError("--record-bytes cannot go with --sizes: the records' sizes are in the file")
        return {"network": network}
    if args.record_bytes is None:
        raise UsageError(
            "--network needs --record-bytes B or --sizes FILE: the time of a transition counts bytes"
        )
    return {"network": network, "record_bytes": args.record_bytes}


def byte_rows(
    args: argparse.Namespace, *, schedule: list[int], spec: OrderSpec, sizes: np.ndarray
) -> Iterator[dict[str, Any]]:
    """The rows of ``rate --sizes``: each transition's row in records (:func:`~.rate.rate_rows`'s)
    with its loads in bytes beside (:func:`coded_shuffle.loads.byte_loads`), the batches cut by
    ``--balance``, and its times on ``--network`` in bytes, of the engine's plan
    (:func:`coded_shuffle.network.predict_bytes`)."""
    from .rate import _rate_row, _warn_once

    N = sizes.shape[0]
    network = network_options(args).get("network")
    warn = _warn_once()

    def place(t: int) -> Any:
        K = schedule[min(t - args.start_epoch, len(schedule) - 1)]
        return order_placement(N, K, seed=args.seed, epoch=t, spec=spec, sizes=sizes, balance=args.balance)

    prev = place(args.start_epoch)
    for t in range(args.start_epoch, args.start_epoch + args.epochs):
        nxt = place(t + 1)
        x = byte_loads(prev, nxt, sizes=sizes, storage=args.storage, strategy=args.strategy)
        row = _rate_row(
            shuffle_matrix(prev, nxt), t + 1, spec.name, strategy=args.strategy, subpackets=args.subpackets,
            progress=True, exact_bound=args.exact_bound, warn=warn, storage=args.storage,
        )  # fmt: skip
        doc = x.to_dict()
        row.update({k: v for k, v in doc.items() if k.endswith("bytes")}, balance=args.balance)
        row["mean_bytes"] = float(sizes.mean())
        if network is not None and args.storage == 1:
            times = predict_bytes(prev, nxt, sizes=sizes, network=network, strategy=args.strategy)
            row.update(network=str(network), record_bytes=f"{int(sizes.min())} to {int(sizes.max())}",
                       **times.to_dict(), why=times.why)  # fmt: skip
        yield row
        prev = nxt


def _mb(v: float) -> str:
    return f"{v / 1e6:.4g} MB"


def bytes_lines(rows: list[dict[str, Any]], sizes: np.ndarray, path: str) -> list[str]:
    """The lines after ``rate --sizes``'s table: each transition's loads in bytes.

    Examples
    --------
    >>> row = {"epoch": 1, "uncoded_bytes": 4e6, "coded_bytes": 2e6, "padded_bytes": 3e6,
    ...        "lower_bound_bytes": 1.9e6, "lower_bound": 4000, "mean_bytes": 450.0,
    ...        "download_bound_bytes": 5e5, "batch_bytes": [100, 1010], "balance": "bytes"}
    >>> print("\\n".join(bytes_lines([row], np.array([16, 900]), "s.npy")))  # doctest: +NORMALIZE_WHITESPACE
    in bytes (s.npy: 2 records of 16 to 900 B, mean 458 B; batches balanced by bytes):
      epoch 1: uncoded 4 MB, coded 2 MB (pieces of one byte), padded plan 3 MB; bound 1.9 MB
      (bound in records x mean size 1.8 MB), download bound 0.5 MB; batches 100 to 1,010 B
    """
    head = (
        f"in bytes ({path}: {sizes.shape[0]} records of {int(sizes.min())} to {int(sizes.max())} B, "
        f"mean {float(sizes.mean()):.4g} B; batches balanced by {rows[0]['balance'] if rows else 'count'}):"
    )
    out = [head]
    for r in rows:
        padded = "" if r["padded_bytes"] is None else f", padded plan {_mb(r['padded_bytes'])}"
        out.append(
            f"  epoch {r['epoch']}: uncoded {_mb(r['uncoded_bytes'])}, coded {_mb(r['coded_bytes'])} "
            f"(pieces of one byte){padded}; bound {_mb(r['lower_bound_bytes'])} (bound in records x "
            f"mean size {_mb(r['lower_bound'] * r['mean_bytes'])}), download bound "
            f"{_mb(r['download_bound_bytes'])}; batches {min(r['batch_bytes']):,} to "
            f"{max(r['batch_bytes']):,} B"
        )
    return out
