"""The exchange's senders on racks against the rack-blind senders: units between racks, the busiest
link's time, and the CPU seconds of each choice, by the model (no network carries the bytes).

For each topology (``K`` workers in ``R`` racks of equal size, every worker's uplink 1 unit a
second, each rack's uplink and downlink ``K / R / 4`` units a second: 4:1 oversubscribed) and
storage ``M``: the pieces every worker misses in one reshuffle of ``N = 1000 K`` records
(``coded_shuffle.storage.piece_demand``), their senders chosen by
:func:`coded_shuffle.plan.assign_senders` (the least busiest upload, rack-blind) and by
:func:`coded_shuffle.plan.assign_senders_racks` (the least busiest link of the hierarchy, then the
fewest units between racks); the loads counted by :func:`coded_shuffle.plan.rack_link_loads`.
Targets: at most 0.6 x the rack-blind units between racks and a busiest link at least 1.3 x faster
on two racks at ``M = 2``.

``--placement``: the piece placement on racks against the rack-blind one
(``coded_shuffle.storage.piece_placement`` with and without ``racks``), both with the senders on
racks, for whole records (``P = 1``) and two pieces a record (where the scheme leaves the labels
free: fewer pieces than ``C(K - 1, t)``), after ``--updates`` updates of the placement (the rack
placement keeps its holders across racks through them: ``update_storage``); the storage of the
fullest worker over ``M`` batches of each.

``--scopes``: the master's coded multicast beyond 64 workers on racks whose spine replicates it
(``coded_shuffle.transport._scopes``): for one random reshuffle of ``N = 1000 K`` records, the
coded plan's symbols (a pair's read by its two workers, a cycle's by the workers of the cycle, a
record sent alone by one) counted on each worker's downlink and each rack's downlink from the
spine (``scope_downlinks``) with the blocks of consecutive workers and with the blocks inside the
racks, in records; ``read`` is what the readers need (the least any layout carries).

``--sizes``: records of many sizes (``blobs`` of 2 to 20 KiB, uniform; ``tokens``, documents of
lognormal(5, 1) uint16 tokens clamped to 16 .. 1024, as the sampler benchmark's), ``N = 1000 K``,
each cut into the pieces of a record of their mean size by its own length and placed across the
racks (``coded_shuffle.engine.scheme_for("exchange", storage=M, sizes=, network=)``, as the engine
places them); the senders on racks chosen by counts of pieces (``assign_senders_racks`` without
``sizes``, what the exchange on racks did before it took them) and in bytes (with ``sizes``),
and the rack-blind ones in bytes (``assign_senders(..., sizes=)``); the loads in bytes
(``rack_link_loads(..., sizes=)``): the busiest link's time, the bytes between racks, each
against the choice by counts, and the least time of any choice that splits pieces between their
holders (the program's relaxation in bytes: no choice of whole pieces is faster).

Run: ``python benchmarks/exchange_racks.py [--json] [--placement [--updates U] | --scopes | --sizes]``.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from coded_shuffle.orders import epoch_placement
from coded_shuffle.plan import assign_senders, assign_senders_racks, rack_link_loads
from coded_shuffle.storage import piece_demand, piece_placement, storage_excess, update_storage

#: (K, racks, M)
CASES = [(8, 2, 2), (8, 2, 3), (8, 4, 2), (16, 2, 2), (32, 4, 2), (32, 4, 3), (64, 8, 2), (64, 2, 2)]


def _busiest(loads: dict, up: float, rack: float) -> float:
    top = (loads["uploads"].max() / up, loads["rack_up"].max() / rack, loads["rack_down"].max() / rack)
    return float(max(top))


def measure(K: int, R: int, M: int, *, seed: int = 3) -> dict:
    rack = np.repeat(np.arange(R), K // R)
    rate = K / R / 4  # the rack's hosts' uplinks in all, over 4
    p0, p1 = (epoch_placement(1000 * K, K, seed=seed, epoch=e) for e in (0, 1))
    d = piece_demand(piece_placement(p0, M=M), p1)
    tic = time.process_time()
    blind = assign_senders(d[:, 1], d[:, 2], K=K)
    t_blind = time.process_time() - tic
    tic = time.process_time()
    aware = assign_senders_racks(d[:, 1], d[:, 2], K=K, rack=rack, up=1.0, rack_up=rate, rack_down=rate)
    t_aware = time.process_time() - tic
    lb, la = (rack_link_loads(d[:, 1], a.sender, rack=rack) for a in (blind, aware))
    return {
        "K": K, "racks": R, "M": M, "pieces": int(d.shape[0]),
        "cross_blind": lb["cross"], "cross_aware": la["cross"], "cross_ratio": la["cross"] / lb["cross"],
        "busiest_blind": _busiest(lb, 1.0, rate), "busiest_aware": _busiest(la, 1.0, rate),
        "speedup": _busiest(lb, 1.0, rate) / _busiest(la, 1.0, rate),
        "cpu_blind": t_blind, "cpu_aware": t_aware,
    }  # fmt: skip


#: (K, racks, M) of ``--placement``; each with P = 1 and 2 pieces a record
PLACEMENT_CASES = [(8, 2, 2), (8, 2, 3), (8, 4, 2), (16, 2, 2), (16, 4, 3), (32, 4, 2), (32, 4, 3),
                   (64, 2, 2), (64, 8, 2), (64, 8, 3)]  # fmt: skip


def measure_placement(K: int, R: int, M: int, P: int, *, updates: int = 3, seed: int = 3) -> dict:
    """The rack placement against the blind one (module docstring), each after ``updates`` updates."""
    racks = (K // R,) * R
    rack = np.repeat(np.arange(R), K // R)
    rate = K / R / 4
    p = [epoch_placement(1000 * K, K, seed=seed, epoch=e) for e in range(updates + 2)]
    row: dict = {"K": K, "racks": R, "M": M, "P": P, "updates": updates}
    for name, on in (("blind", None), ("rack", racks)):
        pp = piece_placement(p[0], M=M, pieces=P, racks=on)
        for e in range(1, updates + 1):
            pp = update_storage(pp, p[e])
        d = piece_demand(pp, p[updates + 1])
        a = assign_senders_racks(d[:, 1], d[:, 2], K=K, rack=rack, up=1.0, rack_up=rate, rack_down=rate)
        loads = rack_link_loads(d[:, 1], a.sender, rack=rack)
        row.update({f"pieces_{name}": int(d.shape[0]), f"cross_{name}": loads["cross"],
                    f"busiest_{name}": _busiest(loads, 1.0, rate), f"excess_{name}": storage_excess(pp),
                    f"rack_{name}": pp.racks is not None})  # fmt: skip
    row["cross_ratio"] = row["cross_rack"] / max(row["cross_blind"], 1)
    row["speedup"] = row["busiest_blind"] / row["busiest_rack"]
    return row


def placement_table(updates: int, as_json: bool) -> None:
    if not as_json:
        print(f"{'K':>3} {'racks':>5} {'M':>2} {'P':>2} {'cross blind':>11} {'cross rack':>10} {'ratio':>6} "
              f"{'speed-up':>8} {'excess blind %':>14} {'excess rack %':>13}")  # fmt: skip
    for K, R, M in PLACEMENT_CASES:
        for P in (1, 2):
            row = measure_placement(K, R, M, P, updates=updates)
            if as_json:
                print(json.dumps(row), flush=True)
                continue
            cells = (row["cross_blind"], row["cross_rack"], row["cross_ratio"], row["speedup"],
                     100 * row["excess_blind"], 100 * row["excess_rack"])  # fmt: skip
            cols = "{:>11} {:>10} {:>6.3f} {:>8.2f} {:>14.2f} {:>13.2f}".format(*cells)
            print(f"{K:>3} {R:>5} {M:>2} {P:>2} {cols}", flush=True)


#: (K, hosts a rack) of ``--scopes``
SCOPE_CASES = [(80, 5), (96, 12), (192, 16), (200, 25), (1000, 100), (1024, 32)]


def measure_scopes(K: int, H: int, *, records: int = 1000, seed: int = 3) -> dict:
    """The downlinks' records under both layouts of the scoped groups (module docstring)."""
    from collections import Counter

    from coded_shuffle.plan import plan_delivery
    from coded_shuffle.transport._scopes import scope_blocks, scope_downlinks

    racks = (H,) * (K // H)
    p = plan_delivery(*(epoch_placement(records * K, K, seed=seed, epoch=e) for e in (0, 1)))
    spans: Counter = Counter()
    for i, j in zip(p.pair_i.tolist(), p.pair_j.tolist(), strict=True):
        spans[(1 << i) | (1 << j)] += 1
    ptr, workers = p.cycle_ptr.tolist(), p.cycle_workers.tolist()
    for c in range(len(ptr) - 1):
        spans[sum(1 << w for w in set(workers[ptr[c] : ptr[c + 1]]))] += ptr[c + 1] - ptr[c] - 1
    for j in p.uncoded_to.tolist():
        spans[1 << j] += 1
    tic = time.process_time()
    d = scope_downlinks(list(spans), list(spans.values()), K=K, racks=racks)
    blocks = (max(scope_blocks(K)) + 1, max(scope_blocks(K, racks)) + 1)
    row: dict = {"K": K, "racks": f"{K // H}x{H}", "symbols": sum(spans.values()),
                 "blocks_consecutive": blocks[0], "blocks_racks": blocks[1],
                 "count_cpu_s": time.process_time() - tic}  # fmt: skip
    for name in ("consecutive", "scoped", "read", "every"):
        row[f"down_max_{name}"] = max(d[name])
        row[f"down_mean_{name}"] = sum(d[name]) / K
        row[f"rack_max_{name}"] = max(d[f"rack_{name}"])
        row[f"rack_sum_{name}"] = sum(d[f"rack_{name}"])
    return row


def scopes_table(as_json: bool) -> None:
    if not as_json:
        print(f"{'K':>5} {'racks':>6} {'blocks':>7} {'symbols':>8} | {'busiest downlink':>23} | "
              f"{'busiest rack downlink':>27} | {'rack downlinks in all':>29}")  # fmt: skip
        print(f"{'':>29} | {'consec':>7} {'racks':>7} {'read':>7} | {'consec':>8} {'racks':>8} {'read':>9} | "
              f"{'consec':>9} {'racks':>9} {'read':>9}")  # fmt: skip
    for K, H in SCOPE_CASES:
        row = measure_scopes(K, H)
        if as_json:
            print(json.dumps(row), flush=True)
            continue
        blocks = f"{row['blocks_consecutive']}/{row['blocks_racks']}"
        cells = [
            row[f"{k}_{n}"]
            for k in ("down_max", "rack_max", "rack_sum")
            for n in ("consecutive", "scoped", "read")
        ]
        head = f"{K:>5} {row['racks']:>6} {blocks:>7} {row['symbols']:>8}"
        print(f"{head} | {cells[0]:>7} {cells[1]:>7} {cells[2]:>7} | {cells[3]:>8} {cells[4]:>8} "
              f"{cells[5]:>9} | {cells[6]:>9} {cells[7]:>9} {cells[8]:>9}", flush=True)  # fmt: skip


#: (K, racks, M, sizes) of ``--sizes``
SIZED_CASES = [(8, 2, 2, "blobs"), (8, 2, 2, "tokens"), (8, 2, 3, "blobs"), (8, 4, 2, "tokens"),
               (16, 2, 2, "blobs"), (32, 4, 2, "tokens"), (64, 8, 2, "blobs")]  # fmt: skip


def record_sizes(kind: str, N: int, *, seed: int = 3) -> np.ndarray:
    """The bytes of ``N`` records of ``kind`` (module docstring)."""
    rng = np.random.default_rng(seed)
    if kind == "blobs":
        return rng.integers(2048, 20481, N)
    return 2 * np.clip(np.rint(rng.lognormal(5.0, 1.0, N)), 16, 1024).astype(np.int64)


def _busiest_bytes(loads: dict, up: float, rack: float) -> float:
    top = (loads["uploads_bytes"].max() / up, loads["downloads_bytes"].max() / up,
           loads["rack_up_bytes"].max() / rack, loads["rack_down_bytes"].max() / rack)  # fmt: skip
    return float(max(top))


def measure_sized(K: int, R: int, M: int, kind: str, *, seed: int = 3) -> dict:
    """The senders on racks by counts against in bytes, on records of many sizes (module docstring)."""
    from coded_shuffle.engine import scheme_for
    from coded_shuffle.engine.schedule import EpochSchedule
    from coded_shuffle.network import Network
    from coded_shuffle.orders import OrderSpec

    sizes = record_sizes(kind, 1000 * K, seed=seed)
    rack = np.repeat(np.arange(R), K // R)
    rate = K / R / 4
    net = Network.parse(f"up=1,down=1,racks={R}x{K // R},rack-up={rate}")
    scheme = scheme_for("exchange", K=K, storage=M, sizes=sizes, network=net)
    sched = EpochSchedule(N=sizes.size, K=K, seed=seed, spec=OrderSpec(), scheme=scheme)
    now = sched.epoch(0)
    units, want, holders = scheme.holding.demand(now.held, sched.epoch(1, now).held)
    d = np.asarray(scheme.holding.unit_lengths)[units]
    rates = {"K": K, "rack": rack, "up": 1.0, "rack_up": rate, "rack_down": rate}
    row: dict = {"K": K, "racks": R, "M": M, "sizes": kind, "pieces_a_record": scheme.pieces,
                 "pieces": int(units.size), "bytes": int(d.sum())}  # fmt: skip
    for name, choose in (
        ("counts", lambda: assign_senders_racks(want, holders, **rates)),
        ("bytes", lambda: assign_senders_racks(want, holders, sizes=d, **rates)),
        ("blind", lambda: assign_senders(want, holders, K=K, sizes=d)),
    ):
        tic = time.process_time()
        a = choose()
        cpu = time.process_time() - tic
        loads = rack_link_loads(want, a.sender, rack=rack, sizes=d)
        row[f"busiest_{name}"] = _busiest_bytes(loads, 1.0, rate)
        row[f"cross_{name}"], row[f"cpu_{name}"] = loads["cross_bytes"], cpu
    row["fractional"] = _fractional(want, holders, d, K, rack, rate)
    for name in ("bytes", "blind"):
        row[f"busiest_ratio_{name}"] = row[f"busiest_{name}"] / row["busiest_counts"]
        row[f"cross_ratio_{name}"] = row[f"cross_{name}"] / max(row["cross_counts"], 1)
    row["over_fractional_bytes"] = row["busiest_bytes"] / row["fractional"] - 1
    row["over_fractional_counts"] = row["busiest_counts"] / row["fractional"] - 1
    return row


def _fractional(want: np.ndarray, holders: np.ndarray, d: np.ndarray, K: int, rack: np.ndarray,
                rate: float) -> float:  # fmt: skip
    """The least busiest link's time when every group's bytes may be split at will (all real)."""
    from coded_shuffle.plan.exchange_racks import _rack_flows

    groups: dict = {}
    for w, h, b in zip(want.tolist(), holders.tolist(), d.tolist(), strict=True):
        groups[(int(h), int(rack[w]))] = groups.get((int(h), int(rack[w])), 0) + b
    keys = sorted(groups)
    rates = {"up": 1.0, "rack_up": rate, "rack_down": rate}
    flows = _rack_flows(keys, [groups[k] for k in keys], K, rack, rates, unit=np.zeros(len(keys)),
                        scale=float(d.mean()))  # fmt: skip
    send = np.zeros(K)
    up, down = np.zeros(len(set(rack.tolist()))), np.zeros(len(set(rack.tolist())))
    for (_, q), flow in zip(keys, flows, strict=True):
        for w, f in flow.items():
            send[w] += f
            if rack[w] != q:
                up[rack[w]] += f
                down[q] += f
    downloads = np.bincount(want, weights=d, minlength=K)
    return float(max(send.max(), downloads.max(), up.max() / rate, down.max() / rate))


def sized_table(as_json: bool) -> None:
    if not as_json:
        print(f"{'K':>3} {'racks':>5} {'M':>2} {'sizes':>6} {'P':>2} {'pieces':>8} | "
              f"{'busiest / by counts':>19} {'cross / by counts':>17} | {'over relaxation':>15} | "
              f"{'CPU s':>17}")  # fmt: skip
        print(f"{'':>31} | {'bytes':>9} {'blind':>9} {'bytes':>8} {'blind':>8} | {'counts':>7} "
              f"{'bytes':>7} | {'counts':>5} {'bytes':>5} {'blind':>5}")  # fmt: skip
    for K, R, M, kind in SIZED_CASES:
        row = measure_sized(K, R, M, kind)
        if as_json:
            print(json.dumps(row), flush=True)
            continue
        print(f"{K:>3} {R:>5} {M:>2} {kind:>6} {row['pieces_a_record']:>2} {row['pieces']:>8} | "
              f"{row['busiest_ratio_bytes']:>9.4f} {row['busiest_ratio_blind']:>9.4f} "
              f"{row['cross_ratio_bytes']:>8.4f} {row['cross_ratio_blind']:>8.4f} | "
              f"{100 * row['over_fractional_counts']:>6.3f}% {100 * row['over_fractional_bytes']:>6.3f}% | "
              f"{row['cpu_counts']:>5.2f} {row['cpu_bytes']:>5.2f} {row['cpu_blind']:>5.2f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="one JSON line a case")
    ap.add_argument("--placement", action="store_true", help="the placement on racks against the blind one")
    ap.add_argument("--updates", type=int, default=3, help="updates of the placement before the measured one")
    ap.add_argument("--scopes", action="store_true", help="the scoped multicast groups' blocks on racks")
    ap.add_argument("--sizes", action="store_true", help="records of many sizes: senders by counts or bytes")
    args = ap.parse_args()
    if args.sizes:
        sized_table(args.json)
        return
    if args.scopes:
        scopes_table(args.json)
        return
    if args.placement:
        placement_table(args.updates, args.json)
        return
    if not args.json:
        print(f"{'K':>3} {'racks':>5} {'M':>2} {'pieces':>9} {'cross ratio':>11} {'speed-up':>8} "
              f"{'CPU blind s':>11} {'CPU aware s':>11}")  # fmt: skip
    for K, R, M in CASES:
        row = measure(K, R, M)
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            cells = (row["cross_ratio"], row["speedup"], row["cpu_blind"], row["cpu_aware"])
            cols = "{:>11.3f} {:>8.2f} {:>11.2f} {:>11.2f}".format(*cells)
            print(f"{K:>3} {R:>5} {M:>2} {row['pieces']:>9} {cols}", flush=True)


if __name__ == "__main__":
    main()
