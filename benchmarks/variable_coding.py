"""Coding records of many sizes: the bytes on the wire of each way to pair them, beside the bound.

An XOR of two records is as long as the longer one (the shorter is zero-padded; the frame entry
carries both lengths). Ways compared, in one run, on the same random reshuffles (``K = 8``,
``--records`` records, ``epoch_placement`` epochs 0 -> 1 -> 2 -> 3, summed over the three
transitions):

- **pad to longer**: the plan pairs the moved records regardless of size (``plan_delivery``
  without ``sizes``, the engine before pairing by size);
- **similar size**: each (holder, receiver) group taken longest first, so the ``k``-th longest
  record of ``(i, j)`` is XORed with the ``k``-th longest of ``(j, i)``, and the leftovers reach
  the cycles in that order (``plan_delivery(..., sizes=...)``, what the engine does; the pairs
  listed in that order, the order of a packed cache's layout);
- **pieces of P B**, each way: every record cut into pieces of ``P`` bytes (its last piece
  shorter), the plan made on the pieces, each piece a record of the frame.

With ``--storage`` (``M = 2``), the engine's delivery with a storage of two batches: its pieces
(each record cut by its own length into the pieces of a record of the mean size,
``engine.state.sized_pieces``), its plan (``plan_storage(..., sizes=...)``: pieces of about one
size grouped) and the bytes of its frames (wire version 5: each symbol as long as its longest
piece, no length on the wire, the term table packed at the fewest bits), beside the same plan
without grouping (sizes as drawn); over the genie bound of the demand weighted by its pieces'
bytes (``demand_lower_bound(..., weights=...)``), the missing pieces' bytes (uncoded with the
same storage) and the moved records' bytes (uncoded with one batch, the column ``wire/uncoded``
above). The frames' bytes are counted from the
layout; ``--check`` also encodes the engine's real frames (``StorageScheme.encode``) of the first
transition on the first 5,000 records, asserts their size is the count, and decodes them at
every worker; ``--engine`` runs ``engine.run`` itself on all the token documents (random bytes
of those sizes) and asserts that its reports' wire bytes are the bytes counted.

With ``--decode``, every worker's decoding (``decode_worker`` of the coded frames, CPU seconds,
best of ``--repeats``, 3 by default, each repeat timing every case in turn) of the token
documents against fixed records of their mean size, in bytes a second of the records decoded,
and the ratio: into new buffers, and into recycled ones (each worker's cache of epoch 2 written
over, as the loaders and the engine alternate two buffers a worker), the variable records' rows
zeroed past each new record only up to the old one's length (``out_lengths``), beside the same
recycled buffers zeroed to the width (without it, as before); the same records all of the mean
size decoded through the variable path (frames of records of many sizes, rows of that width),
recycled: what that path costs outside the rows' layout; the token documents from caches packed
at their own lengths, longest first (``Dataset.cache(..., packed=True)``: the new batch packed too, into a new
buffer or a recycled one of its bytes, nothing zeroed), the loaders' and the engine's layout;
then the time of writing zeros
alone over every worker's new rows at the widest record's width (the rows of a cache of records
of many sizes); and the variable frames parsed first by ``parse_frame`` (each payload unpacked
to the widest width, as when ``unpack=False`` is not given).
``--decode-only``: that measurement alone.

Datasets: tokenized documents (lognormal(5, 1) tokens, uint16, clamped to 16..1024: mean about
458 B, the lengths of a public sampler benchmark) and blobs of 2 to 20 KiB (uniform).

Columns: the payload, and the wire bytes (payload and framing: header, 20-byte entries, receiver
index, as ``encode_plan`` writes them at the default frame size), over the size-weighted lower
bound (the genie bound of the matrix of bytes moved between each pair of workers,
``lower_bound`` of it) and over the uncoded real bytes (the moved records' own bytes, no framing).
The wire bytes are computed from the frame layout; ``--check`` (on by default) also encodes the
real frames of each way for the first transition of each dataset at ``--check-records`` records
and asserts that the layout's count is the frames' size, byte for byte.

Run:  python benchmarks/variable_coding.py [--records 100000] [--pieces 64,256,1024,4096]
      [--check-records 20000] [--no-check] [--storage [--engine]] [--decode] [--decode-only]
      [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from coded_shuffle.bounds import lower_bound
from coded_shuffle.codec import (
    DEFAULT_MAX_FRAME_BYTES,
    FLAG_VARIABLE,
    Dataset,
    encode_plan,
    entry_bytes,
    load_dataset,
)
from coded_shuffle.codec._common import _frame_cuts
from coded_shuffle.codec.encode import _clip_runs, _receiver_runs
from coded_shuffle.codec.wire import _layout
from coded_shuffle.orders import Placement, epoch_placement, placement_from_owner
from coded_shuffle.plan import DeliveryPlan, plan_delivery

K = 8
TRANSITIONS = 3


def token_documents(n: int, rng: np.random.Generator) -> np.ndarray:
    """Bytes of ``n`` documents of lognormal(5, 1) uint16 tokens, clamped to 16..1024 tokens."""
    return 2 * np.clip(np.round(rng.lognormal(5.0, 1.0, n)), 16, 1024).astype(np.int64)


def blobs(n: int, rng: np.random.Generator) -> np.ndarray:
    """Bytes of ``n`` blobs of 2 to 20 KiB, uniform."""
    return rng.integers(2048, 20 * 1024 + 1, n).astype(np.int64)


def cut(sizes: np.ndarray, P: int) -> tuple[np.ndarray, np.ndarray]:
    """Pieces of ``P`` bytes: the record of each piece and its size (the last piece shorter)."""
    n = np.maximum(1, -(-sizes // P))
    rec = np.repeat(np.arange(sizes.size), n)
    k = np.arange(rec.size) - np.repeat(np.cumsum(n) - n, n)
    return rec, np.minimum(P, sizes[rec] - k * P)


def wire_bytes(plan: DeliveryPlan, lengths: np.ndarray, width: int) -> tuple[int, int]:
    """``(payload, wire)`` of ``encode_plan(plan, dataset)`` for records of ``lengths`` and widest
    ``width``, at the default frame size, from the frame layout."""
    a, b, _ = plan.transmissions()
    lb = np.where(b >= 0, lengths[np.maximum(b, 0)], 0)
    plen = np.maximum(lengths[a], lb)
    n, runs = a.size, _receiver_runs(plan)
    cuts = _frame_cuts(n, width, DEFAULT_MAX_FRAME_BYTES, plen, empty=True)
    framing = 0
    for lo, hi in cuts:
        rows = runs.shape[0] if len(cuts) == 1 else _clip_runs(runs, lo, hi).shape[0]
        framing += _layout(hi - lo, FLAG_VARIABLE, rows)[1]
    return int(plen.sum()), int(plen.sum()) + framing


def fake_dataset(lengths: np.ndarray, rng: np.random.Generator) -> Dataset:
    """Random records of ``lengths`` (zero-padded rows), checksums left zero: what encoding reads."""
    width = int(lengths.max())
    data = rng.integers(0, 256, (lengths.size, width), dtype=np.uint8)
    data[np.arange(width)[None, :] >= lengths[:, None]] = 0
    data.flags.writeable = False
    return Dataset(data=data, lengths=lengths, checksums=np.zeros(lengths.size, np.uint64))


def ways(pieces: list[int]) -> list[tuple[str, int | None, bool]]:
    out: list[tuple[str, int | None, bool]] = [("pad to longer", None, False), ("similar size", None, True)]
    for P in pieces:
        out += [(f"pieces {P} B", P, False), (f"pieces {P} B, similar size", P, True)]
    return out


def plan_of(p0: Placement, p1: Placement, sizes: np.ndarray, P: int | None, sized: bool):
    """The plan of one way, and the lengths of the items it names (records or pieces)."""
    if P is None:
        return plan_delivery(p0, p1, sizes=sizes if sized else None), sizes
    rec, psz = cut(sizes, P)
    q0, q1 = placement_from_owner(p0.owner[rec], K), placement_from_owner(p1.owner[rec], K)
    return plan_delivery(q0, q1, sizes=psz if sized else None), psz


def check(name: str, sizes: np.ndarray, pieces: list[int], n: int) -> None:
    """Encode the real frames of each way on the first ``n`` records; the layout's count must match."""
    rng = np.random.default_rng(1)
    sizes = sizes[:n]
    p0, p1 = (epoch_placement(n, K, seed=0, epoch=e) for e in (0, 1))
    for label, P, sized in ways(pieces):
        plan, lengths = plan_of(p0, p1, sizes, P, sized)
        ds = fake_dataset(lengths, rng)
        frames = encode_plan(plan, ds, epoch=1)
        real = sum(int(f.size) for f in frames)
        counted = wire_bytes(plan, lengths, ds.record_bytes)[1]
        assert real == counted, (label, real, counted)
    print(f"  checked: the real frames of every way on {n} {name} are the bytes counted", flush=True)


def measure(name: str, sizes: np.ndarray, pieces: list[int]) -> None:
    N = sizes.size
    places = [epoch_placement(N, K, seed=0, epoch=e) for e in range(TRANSITIONS + 1)]
    uncoded = bound = 0
    for p0, p1 in zip(places[:-1], places[1:], strict=True):
        moved = p0.owner != p1.owner
        uncoded += int(sizes[moved].sum())
        SB = np.zeros((K, K), dtype=np.int64)
        np.add.at(SB, (p0.owner, p1.owner), sizes)
        bound += int(lower_bound(SB).value)
    print(
        f"{name}: N = {N}, mean {sizes.mean():.0f} B, {TRANSITIONS} transitions at K = {K}: uncoded "
        f"{uncoded / 1e6:.2f} MB of records, size-weighted bound {bound / 1e6:.2f} MB "
        f"({bound / uncoded:.3f} of uncoded); entries of {entry_bytes(FLAG_VARIABLE)[0]} B",
        flush=True,
    )
    print(f"  {'way':30s} {'payload/bound':>13s} {'wire/bound':>10s} {'wire/uncoded':>12s} {'plan s':>7s}")
    for label, P, sized in ways(pieces):
        payload = wire = 0
        tic = time.perf_counter()
        for p0, p1 in zip(places[:-1], places[1:], strict=True):
            plan, lengths = plan_of(p0, p1, sizes, P, sized)
            width = int(sizes.max()) if P is None else min(P, int(sizes.max()))
            pw = wire_bytes(plan, lengths, width)
            payload, wire = payload + pw[0], wire + pw[1]
        seconds = (time.perf_counter() - tic) / TRANSITIONS
        ratios = f"{payload / bound:13.4f} {wire / bound:10.4f} {wire / uncoded:12.4f}"
        print(f"  {label:30s} {ratios} {seconds:7.2f}", flush=True)


def storage_wire(plan, lens: np.ndarray, P: int, width: int) -> tuple[int, int]:
    """``(payload, wire)`` of the engine's frames of a storage plan (``StorageScheme.encode``:
    ``encode_terms`` addressed by block, frames of at most ``STREAMED_FRAME_BYTES``), from the
    frame layout of wire version 5 (each symbol as long as its longest piece, the term table of
    each frame packed at the bits of its largest count and id)."""
    from coded_shuffle.codec import symbol_lengths
    from coded_shuffle.codec.table import packed_framing, table_widths
    from coded_shuffle.codec.terms import _addressing
    from coded_shuffle.engine.schemes.storage import STREAMED_FRAME_BYTES

    off, terms = plan.offsets, plan.terms
    n = off.size - 1
    wanter = np.asarray(plan.placement_next.owner, dtype=np.int64)[terms // P]
    order, runs = _addressing(off, terms, wanter, K)
    n_terms = np.diff(off)[order]
    new_off = np.concatenate(([0], np.cumsum(n_terms)))
    ids = terms[np.repeat(off[:-1][order] - new_off[:-1], n_terms) + np.arange(terms.size)]
    plen = symbol_lengths(new_off, ids, lens)
    cuts = _frame_cuts(n, width, min(DEFAULT_MAX_FRAME_BYTES, STREAMED_FRAME_BYTES), plen, empty=True)
    framing = 0
    for lo, hi in cuts:
        rows = runs.shape[0] if len(cuts) == 1 else _clip_runs(runs, lo, hi).shape[0]
        mine = ids[new_off[lo] : new_off[hi]]
        framing += packed_framing(hi - lo, rows, mine.size, *table_widths(n_terms[lo:hi], mine))
    payload = int(symbol_lengths(off, terms, lens).sum())
    return payload, payload + framing


def storage_check(name: str, sizes: np.ndarray, n: int, M: int = 2) -> None:
    """The engine's real frames (``StorageScheme.encode``) of the first transition on the first
    ``n`` records: their size must be the bytes counted, and every worker decodes them exactly."""
    from coded_shuffle.codec import decode_terms
    from coded_shuffle.engine.holding import holding_for
    from coded_shuffle.engine.schemes import StorageScheme
    from coded_shuffle.storage import update_storage

    rng = np.random.default_rng(1)
    sizes = sizes[:n]
    recs = [bytes(rng.integers(0, 256, int(L), dtype=np.uint8)) for L in sizes]
    ds = load_dataset(recs)
    scheme = StorageScheme(holding_for(K=K, storage=M, sizes=ds.lengths))
    work = scheme.dataset(ds)
    pp = scheme.holding.start(epoch_placement(n, K, seed=0, epoch=0))
    nxt = update_storage(pp, epoch_placement(n, K, seed=0, epoch=1))
    planned = scheme.plan(pp, nxt, work, strategy="greedy", exact_bound=None)
    frames = scheme.encode(planned.plan, work, epoch=1, max_frame_bytes=DEFAULT_MAX_FRAME_BYTES).frames
    real = sum(int(f.size) for f in frames)
    counted = storage_wire(planned.plan, work.lengths, scheme.pieces, work.record_bytes)
    assert real == counted[1] and counted[0] == planned.coded_bytes, (real, counted)
    for k in range(K):
        res = decode_terms(work.cache(pp.held_by(k)), frames, need=nxt.held_by(k), worker=k,
                           checksums=work.checksums, lengths=work.lengths)  # fmt: skip
        assert res.ok and np.array_equal(res.cache.data, work.data[nxt.held_by(k)])
    print(f"  checked: the engine's frames (M = {M}) on {n} {name} are the bytes counted, and decode",
          flush=True)  # fmt: skip


def storage_run(sizes: np.ndarray, wire: int, M: int = 2) -> None:
    """``engine.run`` itself over records of ``sizes`` (random bytes) with a storage of ``M``
    batches, the same reshuffles: its reports' wire bytes must be those counted (``wire``)."""
    from coded_shuffle.codec import record_checksums
    from coded_shuffle.engine import run

    rng = np.random.default_rng(1)
    width = int(sizes.max())
    data = rng.integers(0, 256, (sizes.size, width), dtype=np.uint8)
    data[np.arange(width)[None, :] >= sizes[:, None]] = 0
    data.flags.writeable = False
    lens = sizes.copy()
    lens.flags.writeable = False
    ds = Dataset(data=data, lengths=lens, checksums=record_checksums(data, lens))
    tic = time.perf_counter()
    rep = run(ds, K=K, epochs=TRANSITIONS, seed=0, storage=M)
    sent = sum(t.wire_bytes for t in rep.transitions)
    assert rep.verified and sent == wire, (rep.verified, sent, wire)
    print(f"  engine.run, M = {M}: {sent / 1e6:.2f} MB on the wire, the bytes counted; every record "
          f"verified ({time.perf_counter() - tic:.0f} s)", flush=True)  # fmt: skip


def storage(name: str, sizes: np.ndarray, M: int = 2, *, engine: bool = False) -> None:
    """The engine's delivery with a storage of ``M`` batches on records of ``sizes``: its pieces
    (``PieceStorage`` of the sizes), its plan (``plan_storage(..., sizes=...)``, pieces grouped by
    size) and its frames' bytes, beside the same plan without grouping (sizes as drawn), over the
    bound of the demand weighted by bytes, the missing pieces' bytes (uncoded with the storage)
    and the moved records' bytes (uncoded with one batch)."""
    from coded_shuffle.engine.holding import holding_for
    from coded_shuffle.storage import demand_lower_bound, plan_storage, update_storage

    N = sizes.size
    holding = holding_for(K=K, storage=M, sizes=sizes)
    P, lens = holding.pieces, holding.unit_lengths
    width = int(lens.max())
    totals = {"grouped": [0, 0], "drawn": [0, 0]}
    bound = missing = moved = 0
    pp = holding.start(epoch_placement(N, K, seed=0, epoch=0))
    tic = time.perf_counter()
    for e in range(1, TRANSITIONS + 1):
        nxt = epoch_placement(N, K, seed=0, epoch=e)
        for label, given in (("grouped", lens), ("drawn", None)):
            plan = plan_storage(pp, nxt, sizes=given)
            payload, wire = storage_wire(plan, lens, P, width)
            totals[label][0] += payload
            totals[label][1] += wire
        d = plan.demand
        bound += demand_lower_bound(d, K, weights=lens[d[:, 0]])[0]
        missing += int(lens[d[:, 0]].sum())
        moved += int(sizes[np.asarray(pp.placement.owner) != np.asarray(nxt.owner)].sum())
        pp = update_storage(pp, nxt)
    seconds = (time.perf_counter() - tic) / TRANSITIONS
    print(f"  M = {M}: {P} piece(s) a record, widest piece {width} B; weighted bound {bound / 1e6:.2f} MB, "
          f"missing pieces {missing / 1e6:.2f} MB, moved records {moved / 1e6:.2f} MB ({seconds:.1f} s a "
          "transition, both plans)", flush=True)  # fmt: skip
    print(f"  {'M = 2 plan':30s} {'payload/bound':>13s} {'wire/bound':>10s} {'wire/missing':>12s} "
          f"{'wire/moved':>10s}")  # fmt: skip
    for label, (payload, wire) in (("similar size (the engine)", totals["grouped"]),
                                   ("sizes as drawn", totals["drawn"])):  # fmt: skip
        print(f"  {label:30s} {payload / bound:13.4f} {wire / bound:10.4f} {wire / missing:12.4f} "
              f"{wire / moved:10.4f}", flush=True)  # fmt: skip
    if engine:
        storage_run(sizes, totals["grouped"][1], M)


def decoding(sizes: np.ndarray, repeats: int = 3) -> None:
    """Bytes a second (of the new batches) of every worker's decoding, records of ``sizes``
    against fixed records of their mean size, on the same shuffle (CPU seconds, best of ``repeats``;
    each repeat times every case in turn, so that other jobs on the machine weigh on all alike)."""
    from coded_shuffle.codec import decode_worker, load_dataset, parse_frame

    N = sizes.size
    rng = np.random.default_rng(2)
    B = int(round(float(sizes.mean())))
    p0, p1, p2 = (epoch_placement(N, K, seed=0, epoch=e) for e in (0, 1, 2))
    jobs = {}
    one = np.full(N, B, dtype=np.int64)
    for label, ds, sz in (
        ("fixed", load_dataset(rng.integers(0, 256, (N, B), dtype=np.uint8), checksums=False), None),
        ("variable", fake_dataset(sizes, rng), sizes),
        ("one size", fake_dataset(one, rng), one),  # the variable path, rows as narrow as fixed ones
        ("packed", fake_dataset(sizes, rng), sizes),  # the variable records packed (Cache.packed)
    ):
        frames = encode_plan(plan_delivery(p0, p1, sizes=sz), ds, epoch=1)
        packed = label == "packed"
        caches = [ds.cache(p0.batch(k), packed=packed) for k in range(K)]
        olds = [ds.cache(p2.batch(k), packed=packed) for k in range(K)]  # the buffers a worker recycles
        total = N * B if sz is None else int(sz.sum())  # the new batches' bytes
        jobs[label] = (frames, caches, olds, total, sz)
    cases = [(label, into) for label in jobs for into in ("new", "recycled", "recycled, to the width")
             if label == "variable" or (label in ("fixed", "packed") and into != "recycled, to the width")
             or (label == "one size" and into == "recycled")]  # fmt: skip
    best = dict.fromkeys(cases, float("inf"))
    for _ in range(repeats):
        for label, into in cases:
            frames, caches, olds, total, sz = jobs[label]
            outs = [old.data[: p1.batch(k).size].copy() for k, old in enumerate(olds)] if label != "packed" \
                else [np.ones(int(sz[p1.batch(k)].sum()), np.uint8) for k in range(K)]  # fmt: skip
            tic = time.process_time()
            for k in range(K):
                n = p1.batch(k).size
                rows = sz is not None and label != "packed"
                zeroed = olds[k].lengths[:n] if rows and into == "recycled" else None
                out = outs[k] if into != "new" else None
                decode_worker(caches[k], frames, need=p1.batch(k), worker=k, epoch=1, out=out,
                              out_lengths=zeroed)  # fmt: skip
            best[label, into] = min(best[label, into], time.process_time() - tic)
    rates = {case: jobs[case[0]][3] / best[case] for case in cases}
    for label, into in cases:
        print(f"  decoding {label:8s} records, mean {jobs[label][3] / N:.0f} B, into {into} buffers: "
              f"{rates[label, into] / 1e6:8.1f} MB/s (CPU)", flush=True)  # fmt: skip
    for into in ("new", "recycled", "recycled, to the width"):
        fixed = rates["fixed", "new" if into == "new" else "recycled"]
        print(f"  variable / fixed, {into}: {rates['variable', into] / fixed:.3f}", flush=True)
    for into in ("new", "recycled"):
        ratio = rates["packed", into] / rates["fixed", into]
        print(f"  variable records packed / fixed, {into}: {ratio:.3f}", flush=True)
    print(f"  records all of {B} B through the variable path, rows {B} B wide / fixed, recycled: "
          f"{rates['one size', 'recycled'] / rates['fixed', 'recycled']:.3f}", flush=True)  # fmt: skip
    rates["fixed"] = rates["fixed", "recycled"]
    frames, caches = jobs["variable"][:2]
    # The frames parsed first by parse_frame, every payload unpacked to the widest width.
    best = float("inf")
    for _ in range(repeats):
        tic = time.process_time()
        for k in range(K):
            parsed = [parse_frame(f, epoch=1) for f in frames]
            decode_worker(caches[k], parsed, need=p1.batch(k), worker=k, epoch=1)
        best = min(best, time.process_time() - tic)
    slow = int(sizes.sum()) / best
    print(f"  decoding variable records parsed first and unpacked (parse_frame): {slow / 1e6:8.1f} MB/s "
          f"(CPU), / fixed {slow / rates['fixed']:.3f}", flush=True)  # fmt: skip
    # What the padded layout costs alone: every new row written to the widest width (zeros).
    outs = [np.empty((p1.batch(k).size, int(sizes.max())), dtype=np.uint8) for k in range(K)]
    best = float("inf")
    for _ in range(repeats):
        tic = time.process_time()
        for out in outs:
            out.fill(0)
        best = min(best, time.process_time() - tic)
    floor = int(sizes.sum()) / best
    print(f"  zeroing the new rows alone, {int(sizes.max())} B wide: {floor / 1e6:8.1f} MB/s (CPU), "
          f"/ fixed decoding {floor / rates['fixed']:.3f}", flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--pieces", default="64,256,1024,4096")
    ap.add_argument("--check-records", type=int, default=20_000)
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--storage", action="store_true", help="also the engine's delivery with M = 2")
    ap.add_argument("--engine", action="store_true", help="with --storage: engine.run on the tokens too")
    ap.add_argument("--decode", action="store_true", help="also decoding, against fixed records")
    ap.add_argument("--decode-only", action="store_true", help="decoding alone (no planning or bytes)")
    ap.add_argument("--repeats", type=int, default=3, help="decoding: best of this many repeats")
    args = ap.parse_args()
    pieces = [int(p) for p in args.pieces.split(",") if p]
    rng = np.random.default_rng(0)
    datasets = (("token documents", token_documents(args.records, rng)), ("blobs", blobs(args.records, rng)))
    if args.decode_only:
        print(f"token documents: N = {args.records}, K = {K}", flush=True)
        decoding(datasets[0][1], args.repeats)
        return
    for name, sizes in datasets:
        if not args.no_check:
            check(name, sizes, pieces, min(args.check_records, sizes.size))
        measure(name, sizes, pieces)
        if args.storage:
            if not args.no_check:
                storage_check(name, sizes, min(args.check_records, 5000, sizes.size))
            storage(name, sizes, engine=args.engine and name == "token documents")
        if args.decode and name == "token documents":
            decoding(sizes, args.repeats)


if __name__ == "__main__":
    main()
