"""Tests of coded_shuffle.engine: transitions end to end, repairs, conservation."""

from __future__ import annotations

import json

import numpy as np
import pytest

from coded_shuffle.codec import FRAME_HEADER_BYTES, load_dataset, parse_frame
from coded_shuffle.engine import (
    check_caches,
    initial_caches,
    run,
    simulate,
    synthetic_dataset,
    transition,
)
from coded_shuffle.errors import IntegrityError
from coded_shuffle.orders import epoch_placement
from coded_shuffle.plan import plan_delivery
from coded_shuffle.transport import InProcessTransport

REQUIRED = {
    "epoch", "K", "N", "record_bytes", "coded_symbols", "uncoded_symbols", "coded_bytes",
    "uncoded_bytes", "lower_bound", "repairs", "verified", "seconds",
}  # fmt: skip


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(77)


def _bytes_exact(ds, caches, placement):
    for k, c in enumerate(caches):
        ids = placement.batch(k)
        assert np.array_equal(c.ids, ids)
        assert np.array_equal(c.data, np.asarray(ds.data)[ids])


def test_run_several_epochs_bit_exact(rng):
    ds = load_dataset(rng.integers(0, 256, size=(500, 24), dtype=np.uint8))
    seen = []
    rep = run(ds, K=5, epochs=4, seed=3, on_transition=seen.append)
    assert rep.verified and len(seen) == 4 and [t.epoch for t in rep.transitions] == [1, 2, 3, 4]
    for t in rep.transitions:
        assert t.lower_bound <= t.coded_symbols <= t.uncoded_symbols
        assert t.coded_bytes == t.coded_symbols * 24 and t.uncoded_bytes == t.uncoded_symbols * 24
        assert t.wire_bytes == t.coded_bytes + t.wire.header_bytes
        assert t.records_checked == 500 and t.repairs == 0
    d = json.loads(json.dumps(rep.to_dict()))
    assert REQUIRED <= set(d["transitions"][0])


def test_transition_caches_replaced_bit_exact(rng):
    ds = load_dataset(rng.integers(0, 256, size=(300, 40), dtype=np.uint8))
    p0, p1, p2 = (epoch_placement(300, 4, seed=9, epoch=t) for t in range(3))
    caches = initial_caches(ds, p0)
    rep, caches = transition(ds, caches, p0, p1, epoch=1, strategy="exact")
    _bytes_exact(ds, caches, p1)
    rep, caches = transition(ds, caches, p1, p2, epoch=2)
    _bytes_exact(ds, caches, p2)
    assert rep.verified


def test_variable_length_run(rng):
    ds = load_dataset([rng.bytes(int(n)) for n in rng.integers(0, 100, size=120)])
    rep = run(ds, K=3, epochs=2, seed=1)
    assert rep.verified
    t = rep.transitions[0]
    assert t.uncoded_bytes < t.uncoded_symbols * ds.record_bytes  # lengths, not the padded width


def test_variable_length_run_pairs_records_of_similar_sizes(rng):
    """The coded payload of records of many sizes is that of the plan pairing the longest first,
    each symbol as long as its longer record, every transition verified record by record."""
    ds = load_dataset([rng.bytes(int(n)) for n in rng.integers(1, 400, size=300)])
    rep = run(ds, K=4, epochs=3, seed=2)
    assert rep.verified
    for e, t in enumerate(rep.transitions):
        p0, p1 = (epoch_placement(300, 4, seed=2, epoch=e + d) for d in (0, 1))
        owner = p0.owner.tolist()
        sized = sorted(range(300), key=lambda p: -int(ds.lengths[p]))  # stable: ties by id
        payload = 0
        for i in range(4):
            for j in range(i + 1, 4):
                x = [p for p in sized if owner[p] == i and p1.owner[p] == j]
                y = [p for p in sized if owner[p] == j and p1.owner[p] == i]
                pairs = zip(x, y, strict=False)
                payload += sum(max(int(ds.lengths[u]), int(ds.lengths[v])) for u, v in pairs)
        a, b, phase = plan_delivery(p0, p1, sizes=ds.lengths).transmissions()
        rest = phase > 0  # the leftovers' symbols, as the plan deals them
        lb = np.where(b[rest] >= 0, ds.lengths[np.maximum(b[rest], 0)], 0)
        payload += int(np.maximum(ds.lengths[a[rest]], lb).sum())
        assert t.coded_bytes == payload


def _flip_payload(frame, rng, n):
    bad = frame.copy()
    f = parse_frame(frame)
    start = frame.size - f.payload_bytes
    pos = rng.integers(start, frame.size, size=n)
    bad[pos] ^= (1 << rng.integers(0, 8, size=n)).astype(np.uint8)
    return bad


@pytest.mark.parametrize("kind", ["bitflip", "truncate", "header", "drop", "wrong-epoch", "repair-too"])
def test_corrupted_symbols_are_repaired(rng, kind):
    """Nothing wrong is accepted and nothing is lost, whatever happens to the frames."""
    ds = load_dataset(rng.integers(0, 256, size=(240, 32), dtype=np.uint8))
    p0, p1 = (epoch_placement(240, 4, seed=2, epoch=t) for t in (0, 1))
    frng = np.random.default_rng(5)

    def fault(worker, q, frame):
        if kind == "repair-too":  # the coded frame and the first repair frame are both corrupted
            return _flip_payload(frame, frng, 8) if q < 2 and worker != 3 else frame
        if q != 0 or worker == 3:  # worker 3 and every repair frame go through untouched
            return frame
        if kind == "bitflip":
            return _flip_payload(frame, frng, 20)
        if kind == "truncate":
            return frame[: frame.size - 100]
        if kind == "header":
            bad = frame.copy()
            bad[FRAME_HEADER_BYTES + 5] ^= 0x40  # an id in an entry
            return bad
        if kind == "wrong-epoch":
            bad = frame.copy()
            bad[8] ^= 1
            return bad
        return None  # drop

    link = InProcessTransport(4, fault=fault)
    rep, caches = transition(ds, initial_caches(ds, p0), p0, p1, epoch=1, transport=link)
    _bytes_exact(ds, caches, p1)
    assert rep.verified and rep.records_checked == 240
    assert rep.repairs > 0 and rep.repair_rounds >= 1 and rep.wire.repair_bytes > 0
    assert rep.wire_bytes == rep.coded_bytes + rep.wire.header_bytes + rep.wire.repair_bytes
    if kind in ("truncate", "header", "drop", "wrong-epoch"):
        # every moved point of workers 0..2 was re-sent alone
        moved = (p0.owner != p1.owner) & (p1.owner != 3)
        assert rep.repairs == int(moved.sum())
        assert rep.wire.frames_rejected == (0 if kind == "drop" else 3)
    if kind == "repair-too":
        assert rep.repair_rounds >= 2


def test_repairs_give_up_with_integrity_error(rng):
    ds = load_dataset(rng.integers(0, 256, size=(60, 16), dtype=np.uint8))
    p0, p1 = (epoch_placement(60, 3, seed=0, epoch=t) for t in (0, 1))
    frng = np.random.default_rng(0)
    link = InProcessTransport(3, fault=lambda k, q, f: _flip_payload(f, frng, 50) if k == 1 else f)
    with pytest.raises(IntegrityError, match=r"Worker 1: \d+ record\(s\) still unverified after 2 repair"):
        transition(ds, initial_caches(ds, p0), p0, p1, epoch=1, transport=link, max_repair_rounds=2)


def test_check_caches_detects_wrong_and_lost_records(rng):
    ds = load_dataset(rng.integers(0, 256, size=(30, 8), dtype=np.uint8))
    p = epoch_placement(30, 3, seed=0, epoch=0)
    caches = initial_caches(ds, p)
    assert check_caches(ds, caches, p) == (30, True)
    caches[1].data[0, 0] ^= 1
    assert check_caches(ds, caches, p) == (30, False)
    assert check_caches(ds, initial_caches(ds, p)[:2], p)[1] is False


def test_simulate_matches_plan_rates():
    rep = simulate(K=4, N=400, record_bytes=16, epochs=2, seed=11)
    for t in rep.transitions:
        plan = plan_delivery(*(epoch_placement(400, 4, seed=11, epoch=e) for e in (t.epoch - 1, t.epoch)))
        assert t.coded_symbols == plan.rates.coded and t.uncoded_symbols == plan.rates.uncoded
    assert np.array_equal(synthetic_dataset(4, 3, seed=1).data, synthetic_dataset(4, 3, seed=1).data)


def test_transition_exceptions(rng):
    ds = load_dataset(rng.integers(0, 256, size=(20, 4), dtype=np.uint8))
    p0, p1 = (epoch_placement(20, 2, seed=0, epoch=t) for t in (0, 1))
    caches = initial_caches(ds, p0)
    with pytest.raises(TypeError, match="'dataset'"):
        transition(None, caches, p0, p1, epoch=1)
    with pytest.raises(TypeError, match="'placement_t'"):
        transition(ds, caches, None, p1, epoch=1)
    with pytest.raises(ValueError, match="'placement_t1'"):
        transition(ds, caches, p0, epoch_placement(21, 2, seed=0, epoch=1), epoch=1)
    with pytest.raises(TypeError, match="'caches'"):
        transition(ds, caches[:1], p0, p1, epoch=1)
    with pytest.raises(ValueError, match="'epoch'"):
        transition(ds, caches, p0, p1, epoch=-1)
    with pytest.raises(ValueError, match="'strategy'"):
        transition(ds, caches, p0, p1, epoch=1, strategy="best")
    with pytest.raises(ValueError, match="'max_repair_rounds'"):
        transition(ds, caches, p0, p1, epoch=1, max_repair_rounds=-1)
    with pytest.raises(TypeError, match="'transport'"):
        transition(ds, caches, p0, p1, epoch=1, transport=InProcessTransport(3))


def test_run_exceptions(rng):
    ds = load_dataset(rng.integers(0, 256, size=(5, 4), dtype=np.uint8))
    with pytest.raises(TypeError, match="'dataset'"):
        run(None, K=2, epochs=1, seed=0)
    with pytest.raises(ValueError, match="'K'"):
        run(ds, K=6, epochs=1, seed=0)
    with pytest.raises(ValueError, match="'epochs'"):
        run(ds, K=2, epochs=-1, seed=0)
    with pytest.raises(TypeError, match="'seed'"):
        run(ds, K=2, epochs=1, seed=0.5)
    with pytest.raises(TypeError, match="'on_transition'"):
        run(ds, K=2, epochs=1, seed=0, on_transition=1)


def test_simulate_exceptions():
    with pytest.raises(ValueError, match="'N'"):
        simulate(K=4, N=3, record_bytes=8, epochs=1, seed=0)
    with pytest.raises(ValueError, match="'record_bytes'"):
        simulate(K=2, N=3, record_bytes=0, epochs=1, seed=0)
    with pytest.raises(ValueError, match="'K'"):
        simulate(K=0, N=3, record_bytes=1, epochs=1, seed=0)


def test_initial_caches_exceptions(rng):
    ds = load_dataset(rng.integers(0, 256, size=(5, 4), dtype=np.uint8))
    with pytest.raises(TypeError, match="'dataset'"):
        initial_caches(None, epoch_placement(5, 2, seed=0, epoch=0))
    with pytest.raises(TypeError, match="'placement'"):
        initial_caches(ds, None)
    with pytest.raises(ValueError, match="'placement'"):
        initial_caches(ds, epoch_placement(6, 2, seed=0, epoch=0))


def test_transition_alternates_two_buffers(rng):
    # Epoch t + 2's records are written over epoch t's buffers; a buffer too small is not used.
    ds = load_dataset(rng.integers(0, 256, size=(300, 40), dtype=np.uint8))
    p0, p1, p2 = (epoch_placement(300, 4, seed=4, epoch=t) for t in range(3))
    c0 = initial_caches(ds, p0)
    _, c1 = transition(ds, c0, p0, p1, epoch=1)
    spare = [c.data for c in c0]
    spare[3] = np.zeros(8, np.uint8)
    rep, c2 = transition(ds, c1, p1, p2, epoch=2, spare=spare)
    assert rep.verified
    _bytes_exact(ds, c2, p2)
    assert [np.shares_memory(c2[k].data, c0[k].data) for k in range(4)] == [True, True, True, False]
    assert not any(np.shares_memory(c2[k].data, c1[k].data) for k in range(4))


def test_run_on_a_network_reports_the_times_and_auto_chooses_by_them():
    from coded_shuffle.network import Network

    switch, edge = (
        Network.parse("master=1000,up=1000,down=1000"),
        Network.parse("master=1000,up=100,down=1000,multicast"),
    )
    picked = {}
    for net in (switch, edge):
        rep = simulate(K=4, N=800, record_bytes=64, epochs=2, seed=3, mode="auto", network=net)
        assert rep.verified
        t = rep.transitions[0]
        picked[str(net)] = t.mode
        on = t.on_network
        p = {m: v for m, v in on.predicted_seconds.items() if v is not None}  # None: not on this network
        assert on.choice == min(p, key=p.get) and on.time_bound_seconds <= min(p.values())
        assert on.time_gap is None
    assert picked == {str(switch): "exchange", str(edge): "split"}
    plain = simulate(K=4, N=800, record_bytes=64, epochs=1, seed=3).transitions[0]
    assert plain.on_network is None
    assert plain.to_dict()["network"] is None and plain.to_dict()["predicted_seconds"] is None


def test_run_with_a_storage_on_a_network_times_its_pieces():
    """``M = 2`` of records of 6000 bytes at ``K = 4`` (3 pieces of 2000 bytes, each on 2 workers):
    the times from the pieces counted here, ``d_j`` those of worker ``j``'s next batch it does not
    hold (the holdings the scheme's placement model says), against the bytes the delivery moved
    (the busiest worker's upload in the exchange, the master's payload when coded); ``auto`` runs
    the mode of least predicted time."""
    from coded_shuffle.engine import scheme_for
    from coded_shuffle.engine.schedule import EpochSchedule
    from coded_shuffle.network import Network
    from coded_shuffle.orders import OrderSpec

    K, N, rates = 4, 80, {"master": 100e6 / 8, "up": 50e6 / 8, "down": 100e6 / 8}
    net = Network.parse("master=100,up=50,down=100")
    scheme = scheme_for("coded", K=K, storage=2, record_bytes=6000)
    assert (scheme.pieces, scheme.piece_bytes(6000)) == (3, 2000)
    now = EpochSchedule(N=N, K=K, seed=3, spec=OrderSpec(), scheme=scheme).epoch(0)
    held = [set(scheme.held(now.held, k).tolist()) for k in range(K)]
    owner = epoch_placement(N, K, seed=3, epoch=1).owner
    d = max(sum(2000 for i in range(N) for p in range(3) if owner[i] == j and 3 * i + p not in held[j])
            for j in range(K))  # fmt: skip
    for mode in ("coded", "exchange", "auto"):
        t = simulate(K=K, N=N, record_bytes=6000, epochs=1, seed=3, storage=2, mode=mode, network=net)
        t = t.transitions[0]
        on = t.on_network
        assert t.verified and on.time_bound_seconds == pytest.approx(d / rates["down"])
        assert on.predicted_seconds["uncoded"] is on.predicted_seconds["split"] is None
        if mode == "coded":  # no multicast: the relays' uplinks forward every symbol
            assert on.predicted_seconds["coded"] == pytest.approx(t.wire.payload_bytes / rates["up"])
        if mode == "exchange":
            busiest = max(d / rates["down"], t.exchange.max_sent_bytes / rates["up"])
            assert on.predicted_seconds["exchange"] == pytest.approx(busiest)
        if mode == "auto":
            p = {m: v for m, v in on.predicted_seconds.items() if v is not None}
            assert t.mode == on.choice == min(p, key=p.get)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"mode": "auto"}, ValueError, "'mode' can be 'auto' only with a 'network'"),
        ({"network": "down=100"}, TypeError, "'network' must be a Network or None, not str"),
        ({"network": "NET", "subpackets": 2}, ValueError, "'network' applies to whole records"),
        ({"network": "RACKS", "subpackets": 2}, ValueError, "'network' applies to whole records"),
    ],
)
def test_run_on_a_network_refuses_what_it_cannot_time(kwargs, error, message):
    from coded_shuffle.network import Network

    if kwargs.get("network") == "NET":
        kwargs = {**kwargs, "network": Network.parse("down=100,up=100")}
    if kwargs.get("network") == "RACKS":  # a storage on racks is timed (every mode), sub-packets are not
        kwargs = {**kwargs, "network": Network.parse("down=100,up=100,racks=2x2,rack-up=50")}
    with pytest.raises(error, match=message):
        simulate(K=4, N=800, record_bytes=512, epochs=1, seed=0, **kwargs)
