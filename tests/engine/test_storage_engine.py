"""Excess storage as bytes: the in-process engine delivers pieces, every worker keeps its share."""

import dataclasses

import numpy as np
import pytest

from coded_shuffle.codec import load_dataset
from coded_shuffle.engine import run, simulate
from coded_shuffle.engine.holding import PieceStorage, holding_for
from coded_shuffle.engine.inprocess import drive
from coded_shuffle.engine.protocol import MasterOptions
from coded_shuffle.engine.schemes import StorageScheme
from coded_shuffle.engine.state import MIN_PIECE_BYTES, records_of_pieces, storage_dataset
from coded_shuffle.orders import epoch_placement
from coded_shuffle.storage import piece_placement, storage_share, update_storage
from coded_shuffle.transport import InProcessTransport


def records(N, B, seed=0):
    return load_dataset(np.random.default_rng(seed).integers(0, 256, (N, B), dtype=np.uint8))


@pytest.mark.parametrize(("K", "M", "B"), [(3, 2, 512), (4, 2, 800), (4, 3, 768), (5, 3, 1536), (6, 2, 1300)])
def test_every_worker_ends_with_its_share_and_its_batch_byte_for_byte(K, M, B):
    ds = records(20 * K, B, seed=K * M)
    work = storage_dataset(ds, K, M)
    pp = piece_placement(epoch_placement(ds.N, K, seed=3, epoch=0), M=M)
    caches = [work.cache(pp.held_by(k)) for k in range(K)]
    link = InProcessTransport(K)
    for t in range(3):
        nxt = update_storage(pp, epoch_placement(ds.N, K, seed=3, epoch=t + 1))
        rep, caches = drive(
            link,
            StorageScheme(PieceStorage(K=K, M=M)),
            work,
            caches,
            (pp, nxt),
            epoch=t + 1,
            opts=MasterOptions(),
        )
        assert rep.verified and rep.repairs == 0 and rep.records_checked == ds.N
        sizes = nxt.placement.sizes()
        for k, c in enumerate(caches):
            # the share of docs/storage.md, and the bytes of the dataset's own records (not the
            # engine's check)
            assert len(c) == storage_share(int(sizes[k]), ds.N, K, M - 1)
            batch = nxt.placement.batch(k)
            assert np.array_equal(records_of_pieces(c, batch, nxt.pieces, B), ds.data[batch])
            held = c.ids
            pad = np.zeros((ds.N, nxt.pieces * work.record_bytes), np.uint8)
            pad[:, :B] = ds.data
            assert np.array_equal(c.data, pad.reshape(-1, work.record_bytes)[held])
        assert rep.wire_symbols == rep.coded_symbols == rep.planned_symbols
        assert rep.wire.payload_bytes == rep.coded_symbols * work.record_bytes
        assert rep.wire_bytes == rep.wire.payload_bytes + rep.wire.header_bytes
        assert rep.lower_bound <= rep.coded_symbols <= rep.uncoded_symbols
        pp = nxt


def test_run_with_storage_reports_pieces_and_checks_every_record():
    rep = run(records(240, 8192), K=8, epochs=2, seed=1, storage=2)
    assert rep.verified and rep.storage == 2
    for t in rep.transitions:
        u = t.units
        assert (u.storage, u.subpackets, u.piece_bytes, t.records_checked) == (2, 7, 1171, 240)
        assert t.mode == "coded" and t.N == 240 and t.record_bytes == 8192
        d = t.to_dict()
        assert d["storage"] == 2 and d["optimality_gap"] >= 0


def test_a_corrupted_symbol_is_repaired_piece_by_piece():
    ds = records(60, 512)
    K, M = 3, 2
    work = storage_dataset(ds, K, M)
    pp = piece_placement(epoch_placement(ds.N, K, seed=0, epoch=0), M=M)
    nxt = update_storage(pp, epoch_placement(ds.N, K, seed=0, epoch=1))
    caches = [work.cache(pp.held_by(k)) for k in range(K)]

    class Flip(InProcessTransport):
        flipped = False

        def receive(self, worker):
            frames = [f.copy() for f in super().receive(worker)]
            if worker == 1 and frames and not self.flipped:
                self.flipped = True
                frames[0][-1] ^= 0xFF  # the last payload byte: a checksum catches it, not the header CRC
            return frames

    rep, new = drive(
        Flip(K), StorageScheme(PieceStorage(K=K, M=2)), work, caches, (pp, nxt), epoch=1, opts=MasterOptions()
    )
    assert rep.verified and rep.repairs >= 1 and rep.repair_rounds == 1
    for k in range(K):
        batch = nxt.placement.batch(k)
        assert np.array_equal(records_of_pieces(new[k], batch, nxt.pieces, 512), ds.data[batch])


def test_storage_one_is_todays_delivery_exactly():
    ds = records(90, 64)
    a = run(ds, K=3, epochs=3, seed=4)
    b = run(ds, K=3, epochs=3, seed=4, storage=1)
    drop = {"seconds": 0.0, "timings": {}}
    assert [dataclasses.replace(t, **drop) for t in a.transitions] == [
        dataclasses.replace(t, **drop) for t in b.transitions
    ]
    assert all(t.units.storage == 1 and t.units.piece_bytes is None for t in b.transitions)


@pytest.mark.parametrize(
    ("K", "M", "B", "P"), [(8, 2, 4096, 4), (5, 3, 300, 1), (16, 2, 64, 1), (6, 2, 2100, 2), (4, 2, 1024, 1)]
)
def test_small_records_get_fewer_pieces_and_arrive_byte_for_byte(K, M, B, P):
    from coded_shuffle.engine.state import storage_pieces

    assert storage_pieces(B, K, M)[0] == P and (P == 1 or -(-B // P) >= MIN_PIECE_BYTES)
    ds = records(12 * K, B, seed=B)
    holding = PieceStorage(K=K, M=M, record_bytes=B)
    work = holding.dataset(ds)
    pp = holding.start(epoch_placement(ds.N, K, seed=1, epoch=0))
    assert pp.pieces == P
    caches = [work.cache(pp.held_by(k)) for k in range(K)]
    link = InProcessTransport(K)
    for t in range(3):
        nxt = holding.following(pp, epoch_placement(ds.N, K, seed=1, epoch=t + 1))
        rep, caches = drive(
            link, StorageScheme(holding), work, caches, (pp, nxt), epoch=t + 1, opts=MasterOptions()
        )
        assert rep.verified and rep.repairs == 0 and rep.records_checked == ds.N
        assert rep.lower_bound <= rep.coded_symbols <= rep.uncoded_symbols
        for k, c in enumerate(caches):
            assert np.array_equal(c.ids, nxt.held_by(k))
            batch = nxt.placement.batch(k)
            assert np.array_equal(records_of_pieces(c, batch, P, B), ds.data[batch])
        pp = nxt
    assert run(ds, K=K, epochs=2, seed=1, storage=M).verified


def test_bad_storage_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"'M' \(storage\) must be at most K = 3"):
        simulate(K=3, N=30, record_bytes=1024, epochs=1, seed=0, storage=4)
    with pytest.raises(ValueError, match="'subpackets' must be 1 with storage"):
        simulate(K=3, N=30, record_bytes=1024, epochs=1, seed=0, storage=2, subpackets=2)
    sized = load_dataset([b"x" * 600, b"y" * 700, b"z" * 512])

    class Mine(StorageScheme):  # a scheme of one's own: not known to cut records by their lengths
        name = "mine"

    mine = Mine(holding_for(K=3, storage=2, sizes=sized.lengths))
    with pytest.raises(ValueError, match="'mode' must be 'coded' or 'exchange' for records of many sizes"):
        run(sized, K=3, epochs=1, seed=0, storage=2, mode=mine)
    with pytest.raises(TypeError, match="whole number"):
        simulate(K=3, N=30, record_bytes=1024, epochs=1, seed=0, storage=1.5)


@pytest.mark.parametrize("storage", [True, 2.0, np.float64(2.0)], ids=["bool", "float", "numpy-float"])
def test_a_storage_that_is_not_an_int_is_refused_everywhere(storage):
    """``storage`` is an int as ``subpackets`` is: True was taken for 1 and 2.0 for 2."""
    from coded_shuffle.loader import InProcessLoader
    from coded_shuffle.loads import (
        bound_with_storage,
        plan_with_storage,
        rates_with_storage,
        worst_case_with_storage,
    )
    from coded_shuffle.orders import epoch_placement

    S = [[2, 1, 2], [2, 1, 2], [1, 3, 1]]
    placements = [epoch_placement(30, 3, seed=0, epoch=e) for e in (0, 1)]
    calls = {
        "rates_with_storage": lambda: rates_with_storage(S, storage=storage),
        "plan_with_storage": lambda: plan_with_storage(*placements, storage=storage),
        "bound_with_storage": lambda: bound_with_storage(S, storage=storage),
        "worst_case_with_storage": lambda: worst_case_with_storage(15, 3, storage=storage),
        "simulate": lambda: simulate(K=3, N=30, record_bytes=1024, epochs=1, seed=0, storage=storage),
        "InProcessLoader": lambda: InProcessLoader(wide_rows(20), K=2, epochs=2, storage=storage),
    }
    for name, call in calls.items():
        with pytest.raises(TypeError, match=r"Argument ('storage'|'M' \(storage\)) must be an int"):
            call()
            pytest.fail(f"{name} accepted storage={storage!r}")


# --------------------------------------------------------------------------- loaders

WIDE = np.dtype([("x", "<f4", (800,)), ("y", "<i2")])  # 3202 bytes: 3 pieces of 1068 at K = 4, M = 2


def wide_rows(N, seed=0):
    rng = np.random.default_rng(seed)
    X = np.zeros(N, dtype=WIDE)
    X["x"] = rng.standard_normal((N, 800))
    X["y"] = rng.integers(-1000, 1000, N)
    return X


def test_in_process_loader_with_storage_yields_the_same_batches_for_fewer_bytes():
    from coded_shuffle.loader import InProcessLoader

    X = wide_rows(120)
    whole = list(InProcessLoader(X, K=4, epochs=4, seed=2))
    kept = InProcessLoader(X, K=4, epochs=4, seed=2, storage=2)
    for a, b in zip(whole, kept, strict=True):
        for x, y in zip(a.batches, b.batches, strict=True):
            assert np.array_equal(x.ids, y.ids) and y.records.tobytes() == X[y.ids].tobytes()
            assert x.decoded == y.decoded
    for r, r1 in zip(kept.reports, (e.report for e in whole[1:]), strict=True):
        assert r.verified and r.units.storage == 2 and r.units.subpackets == 3 and r.records_checked == 120
        assert r.wire_bytes < r1.wire_bytes  # the pieces kept are not sent again


def test_loaders_refuse_a_storage_naming_the_argument():
    from coded_shuffle.loader import InProcessLoader

    with pytest.raises(ValueError, match="Argument 'storage' must be at most K = 4"):
        InProcessLoader(wide_rows(20), K=4, epochs=2, storage=5)


def test_loaders_serve_rows_too_small_for_a_piece_of_every_label():
    from coded_shuffle.loader import InProcessLoader

    # 3202-byte rows at K = 8: 3 pieces of 1068 (not 7 of 458); 256-byte rows at K = 16: whole
    for X, K, P in [(wide_rows(80), 8, 3), (np.random.default_rng(0).integers(0, 9, (96, 32)), 16, 1)]:
        whole = list(InProcessLoader(X, K=K, epochs=3, seed=2))
        kept = InProcessLoader(X, K=K, epochs=3, seed=2, storage=2)
        for a, b in zip(whole, kept, strict=True):
            for x, y in zip(a.batches, b.batches, strict=True):
                assert np.array_equal(x.ids, y.ids) and y.records.tobytes() == X[y.ids].tobytes()
        assert all(r.verified and r.units.subpackets == P and r.units.storage == 2 for r in kept.reports)


@pytest.mark.mpi
def test_mpi_loader_with_storage_repairs_and_yields_whole_records(tmp_path):
    import importlib.util
    import json
    import subprocess
    import sys
    from pathlib import Path

    mpiexec = Path(sys.executable).parent / "mpiexec"
    if not mpiexec.exists() or importlib.util.find_spec("mpi4py") is None:
        pytest.skip("needs mpiexec beside the interpreter and mpi4py")
    from coded_shuffle.orders import epoch_permutation

    root = Path(__file__).resolve().parents[2]
    N, K, seed, epochs = 90, 3, 4, 3
    X = wide_rows(N, seed=1)
    np.save(tmp_path / "rows.npy", X)
    prog = root / "tests" / "loader" / "mpi_loader_prog.py"
    args = [tmp_path / "rows.npy", tmp_path, epochs, 0, seed, "auto", "once", "storage=2"]
    cmd = [str(mpiexec), "-n", str(K + 1), sys.executable, "-m", "mpi4py", str(prog), *map(str, args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=root, check=False)
    assert proc.returncode == 0, proc.stderr
    for t in range(epochs):
        want = np.array_split(np.asarray(epoch_permutation(N, seed=seed, epoch=t), dtype=np.int64), K)
        for k in range(K):
            got = np.load(tmp_path / f"w{k}_e{t}.npz")
            assert np.array_equal(got["ids"], want[k]) and got["records"].tobytes() == X[want[k]].tobytes()
    reports = json.loads((tmp_path / "reports.json").read_text())
    assert [r["epoch"] for r in reports] == [1, 2]
    assert all(r["verified"] and r["storage"] == 2 and r["records_checked"] == N for r in reports)
    assert reports[0]["repairs"] > 0 and reports[1]["repairs"] == 0
