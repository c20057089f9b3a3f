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

Run: ``python benchmarks/exchange_racks.py [--json] [--placement [--updates U] | --scopes]``.
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="one JSON line a case")
    ap.add_argument("--placement", action="store_true", help="the placement on racks against the blind one")
    ap.add_argument("--updates", type=int, default=3, help="updates of the placement before the measured one")
    ap.add_argument("--scopes", action="store_true", help="the scoped multicast groups' blocks on racks")
    args = ap.parse_args()
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
