"""Write ``tests/kat/vectors.json``, the frozen known-answer vectors that ``tests/test_kat.py`` checks.

Why the vectors exist
---------------------
Epoch orders, record checksums and frames are formats: a run resumed at epoch ``t`` must get the
orders it would have had, a checksum table kept with a dataset must still verify its records, and
a frame written by one build must read the same in another of the same wire version. The
property tests cannot see a change that stays consistent with itself (a new permutation is as
random as the old one, a new frame layout decodes as well), so these vectors pin exact values.
No release may change an order, a checksum or a frame silently: a change that makes
``tests/test_kat.py`` fail is a format change, made on purpose, with a version bump
(``coded_shuffle.codec.WIRE_VERSION`` for frames, whose headers carry the version a reader
needs, the package version for orders and checksums) and a line in ``CHANGELOG.md``; only then
are the vectors rewritten with this script, and the diff of ``vectors.json`` is reviewed with the
change. The test compares with the file and never rewrites it.

numpy does not promise that ``Generator`` methods keep their streams across its releases
(NEP 19), so the order vectors also catch a change that arrives with a new numpy.

What is frozen
--------------
``checksums``        the 64-bit checksums of seven byte strings (empty, one word, around words)
``permutations``     ``epoch_permutation(20, seed=s, epoch=t)``, three seeds, epochs 0 and 1
``feistel``          ``feistel_permutation``: round keys and the whole order at ``N = 37`` for
                     two (seed, epoch), and the keys and ``pi(0..15)`` at ``N = 10^9``
``frame_storage``    a frame of many-term symbols (version 3): the cyclic shift at ``K = 3``, ``M = 2``
``frame_storage_sized``  the same shift over records of 5, 13 and 9 bytes, each cut by its own
                     length into 2 pieces: a frame of version 4 (payloads as long as their longest row)
``frame_storage_packed``, ``frame_storage_sized_packed``  the same two deliveries in frames of
                     version 5 (the term table packed at the fewest bits), as the library writes them

Versions 3 and 4 are no longer written: their two frames are frozen as written before, rebuilt
here by the reference writer from the plan's symbols and checked equal to the file's.
``frame_example_1``  the whole frame of Example 1 (``tests/cases.py``) at epoch 1, the plan of
                     the default strategy, over 15 fixed records of 8 bytes, with the records'
                     checksums, the header, entries and receiver index read back

Where the values come from
--------------------------
Wherever a reference exists, the value written is the reference's, not the library's
(``tests/oracles.py``): the checksums from the formula of ``docs/wire-format.md`` (its SplitMix64
keys checked against the generator's published outputs in ``tests/test_oracles.py``), the
permutations from numpy's stream as ``coded_shuffle.orders.permutation`` documents it, the
Feistel keys and orders from the network of ``coded_shuffle.orders.feistel`` evaluated on Python
ints. The frame is the library's; it is rebuilt byte for byte from ``docs/wire-format.md`` with
struct and zlib, and its receiver index is the one worked out by hand. The script refuses to write
when the library and a reference disagree. The records of the frame are the first 8 bytes of
``SHA-256(b"coded_shuffle kat record <n>")``.

Run
---
``python tests/kat/make_kat.py`` (from anywhere; the checkout's ``coded_shuffle`` is used).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VECTORS = Path(__file__).resolve().with_name("vectors.json")

#: Byte strings whose checksums are frozen: empty, short, exactly one word, one word and a byte,
#: all ones over two words, and a sentence over six words.
CHECKSUM_RECORDS = (
    b"",
    b"a",
    b"abc",
    bytes(range(8)),
    bytes(range(9)),
    b"\xff" * 16,
    b"The quick brown fox jumps over the lazy dog",
)
PERMUTATION_N = 20
PERMUTATION_SEEDS = (0, 1, 20161001)
PERMUTATION_EPOCHS = (0, 1)
#: ``(N, seed, epoch, how many values from pi(0))``.
FEISTEL = ((37, 0, 0, 37), (37, 1, 1, 37), (10**9, 12345, 7, 16))
FRAME_EPOCH = 1
FRAME_RECORD_BYTES = 8


def frame_records(N: int, width: int = FRAME_RECORD_BYTES) -> list[bytes]:
    """The fixed records of the frame vectors."""
    return [hashlib.sha256(b"coded_shuffle kat record %d" % n).digest()[:width] for n in range(N)]


def _agree(what: str, reference: object, library: object) -> None:
    if reference != library:
        raise SystemExit(f"make_kat: the library disagrees with the reference on {what}; nothing written")


def build() -> dict:
    """Every vector, as the JSON object written to ``vectors.json``."""
    import numpy as np

    from coded_shuffle.codec import PAIRS_VERSION, encode_plan, load_dataset, record_checksums
    from coded_shuffle.orders import epoch_permutation, feistel_permutation
    from coded_shuffle.plan import plan_from_matrix
    from tests.cases import EXAMPLE_1, EXAMPLE_1_RECEIVER_RUNS
    from tests.oracles import (
        checksum_from_spec,
        feistel_from_spec,
        feistel_keys_from_spec,
        frame_reference,
        permutation_from_spec,
        read_frame_reference,
    )

    checksums = [checksum_from_spec(r) for r in CHECKSUM_RECORDS]
    _agree("the checksums", checksums, [int(h) for h in record_checksums(list(CHECKSUM_RECORDS))])

    permutations = []
    for seed in PERMUTATION_SEEDS:
        for epoch in PERMUTATION_EPOCHS:
            order = permutation_from_spec(PERMUTATION_N, seed=seed, epoch=epoch)
            _agree(
                f"permutation {seed}, {epoch}",
                order,
                epoch_permutation(PERMUTATION_N, seed=seed, epoch=epoch).tolist(),
            )
            permutations.append({"N": PERMUTATION_N, "seed": seed, "epoch": epoch, "order": order})

    feistel = []
    for N, seed, epoch, count in FEISTEL:
        keys = feistel_keys_from_spec(seed=seed, epoch=epoch)
        forward = feistel_from_spec(N, keys, range(count))
        p = feistel_permutation(N, seed=seed, epoch=epoch)
        _agree(f"the Feistel keys of {N}, {seed}, {epoch}", keys, list(p.keys))
        _agree(f"the Feistel order of {N}, {seed}, {epoch}", forward, p.forward(np.arange(count)).tolist())
        feistel.append(
            {"N": N, "seed": seed, "epoch": epoch, "keys": [f"{k:016x}" for k in keys], "forward": forward}
        )

    plan = plan_from_matrix(EXAMPLE_1)
    records = frame_records(plan.N)
    dataset = load_dataset(np.frombuffer(b"".join(records), dtype=np.uint8).reshape(plan.N, -1))
    (frame,) = encode_plan(plan, dataset, epoch=FRAME_EPOCH)
    raw = frame.tobytes()
    parts = read_frame_reference(raw)
    s, a, b = (list(c) for c in zip(*parts["entries"], strict=True))
    rebuilt = frame_reference(dataset, a, b, epoch=FRAME_EPOCH, symbol=s, runs=EXAMPLE_1_RECEIVER_RUNS)
    _agree("the frame of Example 1", rebuilt, raw)
    frame_checksums = [checksum_from_spec(r) for r in records]
    _agree("the checksums of the frame's records", frame_checksums, [int(h) for h in dataset.checksums])
    header = dict(parts["header"], magic=parts["header"]["magic"].decode("ascii"))
    terms_vector = build_terms_frame()

    return {
        "about": (
            "Frozen known-answer vectors: written by tests/kat/make_kat.py (read its docstring before "
            "rewriting), checked by tests/test_kat.py. Hex strings are big-endian numbers (keys, "
            "checksums) or bytes in order (records, frame)."
        ),
        "checksums": [
            {"record": r.hex(), "checksum": f"{h:016x}"}
            for r, h in zip(CHECKSUM_RECORDS, checksums, strict=True)
        ],
        "permutations": permutations,
        "feistel": feistel,
        "frame_example_1": {
            "S": [list(row) for row in EXAMPLE_1],
            "strategy": "greedy",
            "epoch": FRAME_EPOCH,
            "wire_version": PAIRS_VERSION,
            "records": [r.hex() for r in records],
            "checksums": [f"{h:016x}" for h in frame_checksums],
            "header": header,
            "entries": [list(e) for e in parts["entries"]],
            "runs": [list(row) for row in parts["runs"]],
            "frame": [raw[k : k + 16].hex() for k in range(0, len(raw), 16)],
        },
        "frame_storage": terms_vector,
        "frame_storage_sized": build_sized_terms_frame(),
        "frame_storage_packed": build_terms_frame(packed=True),
        "frame_storage_sized_packed": build_sized_terms_frame(packed=True),
    }


#: The frame of many-term symbols: the cyclic shift of K = 3 workers, one record each, storage 2.
TERMS_K, TERMS_M, TERMS_EPOCH, TERMS_PIECE_BYTES = 3, 2, 9, 8


def build_terms_frame(*, packed: bool = False) -> dict:
    """The vector of a frame of version 3 (``packed``: 5): its pieces, the plan's symbols, the frame."""
    import numpy as np

    from coded_shuffle.codec import load_dataset
    from coded_shuffle.orders import placement_from_owner
    from coded_shuffle.storage import piece_placement, plan_storage

    K = TERMS_K
    p0 = placement_from_owner(list(range(K)), K)
    p1 = placement_from_owner([(k + 1) % K for k in range(K)], K)
    pp = piece_placement(p0, M=TERMS_M)
    plan = plan_storage(pp, p1)
    rows = frame_records(K * pp.pieces, width=TERMS_PIECE_BYTES)
    pieces = load_dataset(np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(len(rows), -1))
    vector = _terms_vector(plan, pieces, rows, np.asarray(p1.owner)[plan.terms // pp.pieces], packed=packed)
    return {"K": K, "storage": TERMS_M, "owner_t": list(p0.owner.tolist()),
            "owner_t1": list(p1.owner.tolist()), **vector}  # fmt: skip


def _terms_vector(plan, pieces, rows: list[bytes], wanter, *, packed: bool, sized: bool = False) -> dict:
    """The frame of the storage ``plan`` over ``pieces`` (the rows ``rows``): of version 5 as the
    library writes it, read and written again by the references (``packed``); else of version 3
    (4 if ``sized``), written by the reference writer from the terms, the order and the runs of the
    library's frame of version 5 and the plan's symbol numbers, and checked equal to the frozen file."""
    from coded_shuffle.codec import PACKED_TERMS_VERSION, TERMS_VERSION, VARIABLE_TERMS_VERSION, encode_terms
    from tests.oracles import read_packed_terms_frame_reference, read_terms_frame_reference

    (frame,) = encode_terms(
        pieces, plan.offsets, plan.terms, epoch=TERMS_EPOCH, wanter=wanter, K=TERMS_K
    )  # fmt: skip
    lengths = [len(r) for r in rows] if sized else None
    parts = read_packed_terms_frame_reference(frame.tobytes(), lengths=lengths)
    raw = _rebuilt_terms_frame(rows, parts, sized=sized, plan=None if packed else plan)
    if packed:
        _agree("the frame of version 5", raw, frame.tobytes())
        version = PACKED_TERMS_VERSION
    else:
        name = "frame_storage_sized" if sized else "frame_storage"
        _agree(f"the frozen {name}", raw.hex(), "".join(json.loads(VECTORS.read_text())[name]["frame"]))
        parts = read_terms_frame_reference(raw, lengths=lengths)
        version = VARIABLE_TERMS_VERSION if sized else TERMS_VERSION
    return {
        "epoch": TERMS_EPOCH,
        "wire_version": version,
        **({"records": []} if sized else {}),
        "pieces": [r.hex() for r in rows],
        "terms": parts["terms"],
        "runs": [list(r) for r in parts["runs"]],
        "frame": [raw[k : k + 16].hex() for k in range(0, len(raw), 16)],
    }


def _rebuilt_terms_frame(rows: list[bytes], parts: dict, *, sized: bool = False, plan=None) -> bytes:
    """The frame of many-term symbols written again by the reference writer from the terms and
    the runs its reader found in it (``parts``), over the pieces ``rows``: of version 5, or with
    ``plan`` of version 3 (4 if ``sized``), each symbol numbered by its place in the plan."""
    from tests.oracles import packed_terms_frame_reference, terms_frame_reference

    offsets = [0]
    for t in parts["terms"]:
        offsets.append(offsets[-1] + len(t))
    flat = [x for t in parts["terms"] for x in t]
    if plan is None:
        runs = parts["runs"]
        return packed_terms_frame_reference(rows, offsets, flat, epoch=TERMS_EPOCH, runs=runs, sized=sized)
    off = plan.offsets
    given = {tuple(plan.terms[off[s] : off[s + 1]].tolist()): s for s in range(off.size - 1)}
    symbol = [given[tuple(t)] for t in parts["terms"]]
    return terms_frame_reference(
        rows, offsets, flat, epoch=TERMS_EPOCH, symbol=symbol, runs=parts["runs"], sized=sized
    )


#: The records of the frames of versions 4 and 5 of many sizes: the first bytes of the frame
#: records, of these lengths.
SIZED_LENGTHS = (5, 13, 9)


def sized_pieces_reference(records: list[bytes], P: int) -> list[bytes]:
    """Piece ``p`` of a record of ``L`` bytes is its bytes ``[p L // P, (p + 1) L // P)``
    (docs/storage.md), row ``r P + p``: cut in plain Python."""
    return [r[p * len(r) // P : (p + 1) * len(r) // P] for r in records for p in range(P)]


def build_sized_terms_frame(*, packed: bool = False) -> dict:
    """The vector of a frame of version 4 (``packed``: 5, with flag VARIABLE): records of many
    sizes cut into pieces by their own lengths, the plan's symbols grouped by size, the frame."""
    import numpy as np

    from coded_shuffle.codec import load_dataset
    from coded_shuffle.engine.state import storage_dataset
    from coded_shuffle.orders import placement_from_owner
    from coded_shuffle.storage import piece_placement, plan_storage

    K = TERMS_K
    records = [r[:L] for r, L in zip(frame_records(K, width=32), SIZED_LENGTHS, strict=True)]
    p0 = placement_from_owner(list(range(K)), K)
    p1 = placement_from_owner([(k + 1) % K for k in range(K)], K)
    pp = piece_placement(p0, M=TERMS_M)
    pieces = storage_dataset(load_dataset(records), K, TERMS_M, pieces=pp.pieces)
    rows = sized_pieces_reference(records, pp.pieces)
    _agree("the pieces cut by their own lengths", rows, [pieces.record(i) for i in range(pieces.N)])
    plan = plan_storage(pp, p1, sizes=pieces.lengths)
    wanter = np.asarray(p1.owner)[plan.terms // pp.pieces]
    vector = _terms_vector(plan, pieces, rows, wanter, packed=packed, sized=True)
    vector["records"] = [r.hex() for r in records]
    return {"K": K, "storage": TERMS_M, "owner_t": list(p0.owner.tolist()),
            "owner_t1": list(p1.owner.tolist()), **vector}  # fmt: skip


def dumps(value: object, depth: int = 0) -> str:
    """JSON with one item a line, except that lists of plain values stay on one line."""
    pad, inner = "  " * depth, "  " * (depth + 1)
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(k)}: {dumps(v, depth + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        return "[\n" + ",\n".join(inner + dumps(v, depth + 1) for v in value) + f"\n{pad}]"
    return json.dumps(value)


def main() -> int:
    sys.path.insert(0, str(ROOT))
    VECTORS.write_text(dumps(build()) + "\n")
    print(f"wrote {VECTORS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
