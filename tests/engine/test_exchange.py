"""The exchange between the workers as a scheme of the protocol, in process: every storage,
every byte checked against the records, repairs, and the loads against a count made here."""

from __future__ import annotations

import math

import numpy as np
import pytest

from coded_shuffle.codec import load_dataset, parse_frame
from coded_shuffle.engine import drive, run, scheme_for, simulate
from coded_shuffle.engine.protocol import MasterOptions
from coded_shuffle.engine.state import records_of_pieces
from coded_shuffle.orders import epoch_placement
from coded_shuffle.transport import InProcessTransport


def records(N, B, seed=0):
    return load_dataset(np.random.default_rng(seed).integers(0, 256, (N, B), dtype=np.uint8))


@pytest.mark.parametrize(("K", "M", "B"), [(3, 1, 64), (4, 1, 100), (3, 2, 2048), (4, 2, 3200), (5, 3, 6144)])
def test_every_worker_ends_with_its_batch_byte_for_byte(K, M, B):
    ds = records(12 * K, B, seed=K + M)
    seen = []
    rep = run(ds, K=K, epochs=3, seed=2, storage=M, mode="exchange", on_transition=seen.append)
    assert rep.verified and all(t.mode == "exchange" and t.repairs == 0 for t in rep.transitions)
    assert all(t.wire_bytes == 0 and t.records_checked == ds.N for t in rep.transitions)
    # The loads, counted here from the placements: a worker misses C(K-2, t) of the C(K-1, t)
    # pieces of each record that comes to it (all of it when M = 1).
    C, t = math.comb(K - 1, M - 1), M - 1
    width = -(-B // C)
    for tr in rep.transitions:
        p0, p1 = (epoch_placement(ds.N, K, seed=2, epoch=e) for e in (tr.epoch - 1, tr.epoch))
        moved = np.asarray(p0.owner) != np.asarray(p1.owner)
        into = np.bincount(np.asarray(p1.owner)[moved], minlength=K) * math.comb(K - 2, t) * width
        assert tr.wire.max_received_bytes == tr.download_bound_bytes == into.max()
        assert tr.exchange.exchange_bytes == into.sum()
        assert tr.upload_bound_bytes <= tr.exchange.max_sent_bytes < tr.upload_bound_bytes + width


def test_records_of_many_sizes_are_exchanged_at_their_own_lengths():
    """No padding in the exchange: each missing record travels alone, its own bytes, so the
    busiest download is the download bound counted here from the lengths."""
    rng = np.random.default_rng(3)
    K, N = 4, 200
    ds = load_dataset([rng.bytes(int(n)) for n in rng.integers(0, 900, N)])
    rep = run(ds, K=K, epochs=3, seed=4, mode="exchange")
    assert rep.verified
    for tr in rep.transitions:
        p0, p1 = (epoch_placement(N, K, seed=4, epoch=e) for e in (tr.epoch - 1, tr.epoch))
        moved = np.asarray(p0.owner) != np.asarray(p1.owner)
        into = np.bincount(np.asarray(p1.owner)[moved], weights=ds.lengths[moved], minlength=K)
        assert tr.wire.max_received_bytes == tr.download_bound_bytes == int(into.max())
        assert tr.exchange.exchange_bytes == tr.uncoded_bytes == int(ds.lengths[moved].sum())


def test_the_exchange_holds_what_the_coded_scheme_holds():
    ds = records(60, 768)
    coded = run(ds, K=4, epochs=2, seed=7, storage=2)
    exch = run(ds, K=4, epochs=2, seed=7, storage=2, mode="exchange")
    for a, b in zip(coded.transitions, exch.transitions, strict=True):
        assert (a.coded_symbols, a.lower_bound, a.download_bound_bytes) == (
            b.coded_symbols, b.lower_bound, b.download_bound_bytes,
        )  # fmt: skip
        assert b.wire.max_received_bytes < a.wire.max_received_bytes  # a worker receives only what it misses


def test_a_damaged_unit_from_a_peer_is_repaired():
    K, M = 4, 2
    ds = records(48, 768)
    scheme = scheme_for("exchange", K=K, storage=M)
    work = scheme.dataset(ds)
    held = scheme.start(epoch_placement(ds.N, K, seed=0, epoch=0))
    nxt = scheme.following(held, epoch_placement(ds.N, K, seed=0, epoch=1))
    caches = [work.cache(scheme.held(held, k)) for k in range(K)]

    class Flip(InProcessTransport):
        def collect(self, worker):
            frames = [f.copy() for f in super().collect(worker)]
            if worker == 2 and frames:
                frames[0][-1] ^= 0xFF  # the last payload byte: its unit's checksum catches it
            return frames

    rep, new = drive(Flip(K), scheme, work, caches, (held, nxt), epoch=1, opts=MasterOptions())
    assert rep.verified and rep.repairs == 1 and rep.repair_rounds == 1
    for k in range(K):
        batch = nxt.placement.batch(k)
        assert np.array_equal(records_of_pieces(new[k], batch, scheme.pieces, 768), ds.data[batch])


def test_storage_cuts_the_busiest_download_by_K_minus_M_over_K_minus_1():
    K, N, B = 8, 800, 21 * 1024  # pieces without padding at M = 2 (7 of them) and M = 3 (21)
    down = {
        M: simulate(K=K, N=N, record_bytes=B, epochs=1, seed=1, storage=M, mode="exchange")
        .transitions[0]
        .wire.max_received_bytes
        for M in (1, 2, 3)
    }
    assert down[2] * (K - 1) == down[1] * (K - 2)
    assert down[3] * (K - 1) == down[1] * (K - 3)


def test_the_mode_and_storage_are_checked_by_name():
    with pytest.raises(ValueError, match="'mode' must be one of coded, uncoded, exchange"):
        scheme_for("broadcast", K=3)
    with pytest.raises(ValueError, match="'mode' must be 'coded' or 'exchange' with a storage of M = 2"):
        scheme_for("uncoded", K=3, storage=2)
    assert scheme_for("alltoallv", K=3).name == "exchange"


def _peers_of(K: int, M: int) -> tuple:
    """An exchange among ``K`` peers storing ``M`` batches: the dataset of 48 records of 768 B, the
    scheme, its units, the placements of epochs 0 and 1, and each worker's cache of epoch 0."""
    ds = records(48, 768)
    scheme = scheme_for("exchange", K=K, storage=M, peers=True)
    work = scheme.dataset(ds)
    held = scheme.start(epoch_placement(ds.N, K, seed=0, epoch=0))
    nxt = scheme.following(held, epoch_placement(ds.N, K, seed=0, epoch=1))
    return ds, scheme, work, held, nxt, [work.cache(scheme.held(held, k)) for k in range(K)]


@pytest.mark.parametrize("M", [1, 2])
def test_among_peers_a_damaged_unit_is_fetched_again_from_another_holder(M):
    K = 4
    ds, scheme, work, held, nxt, caches = _peers_of(K, M)
    offers = []  # (sender, receiver, units) of every offer, in order

    class Flip(InProcessTransport):
        damaged = None

        def send(self, frames):  # the master has no records to send among peers
            raise AssertionError("the master sent frames among peers")

        def offer(self, worker, frames, **kw):
            for j, fs in frames.items():
                offers.append((worker, j, [int(a) for f in fs for a in parse_frame(f).a]))
            super().offer(worker, frames, **kw)

        def collect(self, worker):
            got = super().collect(worker)
            if worker == 2 and self.damaged is None and got:  # the first frame to worker 2, damaged
                self.damaged = parse_frame(got[0]).a[-1]
                got = [got[0].copy(), *got[1:]]
                got[0][-1] ^= 0xFF  # its last unit's last byte
            return got

    link = Flip(K)
    link.exchange_schedule = "rounds"  # the scheme offers its rounds, which the link checks
    rep, new = drive(link, scheme, work, caches, (held, nxt), epoch=1, opts=MasterOptions())
    assert rep.verified and rep.repairs == 1 and rep.repair_rounds == 1
    unit = int(link.damaged)
    first, again = [s for s, j, units in offers if j == 2 and unit in units]
    # from another holder where there is one (M = 2: two holders a piece), else from the same
    assert (first != again) if M == 2 else (first == again)
    for k in range(K):
        batch = nxt.batch(k) if M == 1 else nxt.placement.batch(k)
        assert np.array_equal(scheme.records(new[k], batch, 768), ds.data[batch])
    with pytest.raises(ValueError, match="'peers' must be False for mode 'coded'"):
        scheme_for("coded", K=K, storage=M, peers=True)


@pytest.mark.parametrize("M", [1, 2])
def test_the_in_process_loader_delivers_by_the_exchange(M):
    from coded_shuffle.loader import InProcessLoader
    from coded_shuffle.orders import epoch_permutation

    X = np.random.default_rng(3).integers(0, 256, (60, 768), dtype=np.uint8)
    epochs = list(InProcessLoader(X, K=3, epochs=3, seed=2, storage=M, scheme="exchange"))
    for ep in epochs:
        want = np.array_split(np.asarray(epoch_permutation(60, seed=2, epoch=ep.epoch), dtype=np.int64), 3)
        for k, b in enumerate(ep.batches):
            assert np.array_equal(b.ids, want[k]) and np.array_equal(b.records, X[want[k]])
    for ep in epochs[1:]:
        assert ep.report.mode == "exchange" and ep.report.wire_bytes == 0 and ep.report.verified
        assert ep.report.wire.max_received_bytes == ep.report.download_bound_bytes
    with pytest.raises(ValueError, match="'scheme' must be 'coded' or 'exchange'"):
        InProcessLoader(X, K=3, epochs=2, scheme="uncoded")


@pytest.mark.parametrize(("K", "M", "B"), [(5, 1, 64), (4, 2, 2048)])
def test_the_exchange_assigns_its_senders_once_and_reports_the_coded_plan_of_its_shuffle(
    K, M, B, monkeypatch
):
    from coded_shuffle.engine.schemes import _base

    calls = []
    real = _base.assign_senders
    monkeypatch.setattr(_base, "assign_senders", lambda *a, **k: calls.append(1) or real(*a, **k))
    ds = records(10 * K, B, seed=K)
    ex = run(ds, K=K, epochs=2, seed=4, storage=M, mode="exchange")
    assert ex.verified and len(calls) == 2  # once a transition, for the master and every worker
    coded = run(ds, K=K, epochs=2, seed=4, storage=M, mode="coded")
    for e, c in zip(ex.transitions, coded.transitions, strict=True):
        got = (e.coded_symbols, e.coded_bytes, e.lower_bound, e.lower_bound_exact, e.uncoded_symbols)
        assert got == (c.coded_symbols, c.coded_bytes, c.lower_bound, c.lower_bound_exact, c.uncoded_symbols)


def test_the_coded_plan_is_made_only_when_the_report_reads_it():
    ds = records(40, 64)
    scheme = scheme_for("exchange", K=4)
    p0, p1 = (epoch_placement(ds.N, 4, seed=1, epoch=e) for e in (0, 1))
    made = []
    real = scheme._coded.plan
    scheme._coded.plan = lambda *a, **k: made.append(1) or real(*a, **k)
    planned = scheme.plan(p0, p1, ds, strategy="greedy", exact_bound=None)
    assert made == [] and planned.uncoded_symbols == int((np.asarray(p0.owner) != np.asarray(p1.owner)).sum())
    assert planned.coded_symbols <= planned.uncoded_symbols and planned.lower_bound <= planned.coded_symbols
    assert made == [1]  # made once, on the first read


@pytest.mark.parametrize("K", range(65, 71))
def test_a_storage_beyond_64_workers_is_exchanged_without_the_coded_plan(K):
    ds = records(2 * K, 2048, seed=K)
    rep = run(ds, K=K, epochs=1, seed=K, storage=2, mode="exchange")
    t = rep.transitions[0]
    assert rep.verified and t.records_checked == ds.N and t.wire_bytes == 0
    d = t.to_dict()
    coded = ("coded_symbols", "coded_bytes", "lower_bound", "lower_bound_exact", "optimal", "optimality_gap")
    assert [d[k] for k in coded] == [None] * len(coded)


def test_a_storage_beyond_64_workers_is_coded_too():
    K = 65
    ds = records(2 * K, 2048, seed=K)
    rep = run(ds, K=K, epochs=1, seed=K, storage=2, mode="coded")
    t = rep.transitions[0]
    assert rep.verified and t.records_checked == ds.N
    assert t.lower_bound <= t.coded_symbols <= t.uncoded_symbols


def test_a_storage_beyond_64_workers_passes_the_job_checks():
    from coded_shuffle.cli.runner.mpi_job import job_refusal
    from coded_shuffle.cli.runner.options import JobOptions

    assert job_refusal(JobOptions(mode="exchange", storage=2), 65, 1000, 4096, peers=True) is None
    assert job_refusal(JobOptions(mode="coded", storage=2), 65, 1000, 4096) is None


@pytest.mark.parametrize("M", [1, 2])
def test_each_round_is_decoded_before_the_next_arrives(M, monkeypatch):
    """A link that delivers the exchange's rounds one at a time, and gives round r + 1 only once
    every frame of round r has been stored into the new batch (its records' bytes there, checked
    here against the dataset) and checked: the events recorded alternate, round by round. A take
    that decoded after the last round would leave the link waiting (and the test failing)."""
    import threading

    from coded_shuffle.codec import HeldDecoder

    K = 4
    ds, scheme, work, held, nxt, caches = _peers_of(K, M)
    events = []
    decoded = threading.Condition()
    real_add = HeldDecoder.add

    def add(self, frame):
        got = real_add(self, frame)
        rows = np.searchsorted(self.ids, got)
        stored = np.array_equal(self.new[rows], work.data[got]) and bool(self.done[rows].all())
        with decoded:
            events.append(("decoded", self.worker, stored))
            decoded.notify_all()
        return got

    monkeypatch.setattr(HeldDecoder, "add", add)

    class OneRoundAtATime(InProcessTransport):
        schedules = {}

        def offer(self, worker, frames, *, rounds=None):
            super().offer(worker, frames, rounds=rounds)
            self.schedules[worker] = ({j: list(fs) for j, fs in frames.items()}, list(rounds))

        def collect(self, worker):
            raise AssertionError("the exchange collected its frames all at once")

        def collect_each(self, worker):
            super().collect(worker)  # taken from the link (and counted)
            left = {s: list(fr.get(worker, [])) for s, (fr, _) in self.schedules.items()}
            n_rounds = len(next(iter(self.schedules.values()))[1])
            given = 0
            for r in range(n_rounds):
                come = []
                for s, (_, rounds) in self.schedules.items():
                    to, n, _ = rounds[r]
                    if to == worker:
                        come += left[s][:n]
                        del left[s][:n]
                if not come:
                    continue
                with decoded:  # round r arrives only when every frame before it was decoded
                    done = decoded.wait_for(lambda n=given: _count(events, worker) == n, timeout=60)
                    assert done, f"worker {worker}: round {r} arrived before the last was decoded"
                    events.append(("arrive", worker, r))
                yield from come
                given += len(come)
            assert not any(left.values())

    link = OneRoundAtATime(K)
    link.exchange_schedule = "rounds"
    rep, new = drive(link, scheme, work, caches, (held, nxt), epoch=1, opts=MasterOptions())
    assert rep.verified and rep.repairs == 0
    for k in range(K):
        mine = [e for e in events if e[1] == k]
        arrivals = [i for i, e in enumerate(mine) if e[0] == "arrive"]
        assert len(arrivals) >= 2  # several rounds came to each worker
        assert all(e[2] for e in mine if e[0] == "decoded")  # each stored when it was decoded
        # every round's frames decoded before the next round arrived, the last one's after it
        assert mine[-1][0] == "decoded" and _count(mine, k) == sum(1 for e in mine if e[0] == "decoded")
        batch = nxt.batch(k) if M == 1 else nxt.placement.batch(k)
        assert np.array_equal(scheme.records(new[k], batch, 768), ds.data[batch])


def _count(events, worker):
    """The frames worker ``worker`` decoded so far."""
    return sum(1 for e in events if e[0] == "decoded" and e[1] == worker)
