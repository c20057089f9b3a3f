"""The transition protocol's contract, for every scheme: its roles stepped over a scripted link.

One body per case, run for every scheme :func:`coded_shuffle.engine.scheme_for` builds (coded,
uncoded, the exchange with a master and among peers, with one batch and with a storage of two,
and the split of the coded multicast and the exchange):
a clean transition; a damaged delivery, repaired in one round; a delivery damaged in every
round, abandoned after the last one on the master and on every worker; a worker that stops,
which ends the job (the master returns who stopped, the others the end); and a worker whose
holdings do not match, which makes the master's verdict false on every worker.
"""

from __future__ import annotations

import numpy as np
import pytest

from coded_shuffle.codec import load_dataset, parse_frame
from coded_shuffle.engine import drive, scheme_for
from coded_shuffle.engine.protocol import (
    END,
    Announce,
    Gather,
    Holdings,
    MasterOptions,
    Stopped,
    master_transition,
    step,
    worker_stop,
    worker_transition,
)
from coded_shuffle.errors import IntegrityError
from coded_shuffle.network import Network
from coded_shuffle.orders import epoch_placement
from coded_shuffle.transport import InProcessTransport

K, N, B = 3, 36, 512
#: Where a split pays: the master's multicast beside slow uplinks of the workers.
EDGE = Network.parse("master=1000,up=100,down=1000,multicast")
SCHEMES = [
    pytest.param(mode, M, peers, id=f"{mode}{'-peers' if peers else ''}-M{M}")
    for mode, M, peers in [
        ("coded", 1, False), ("uncoded", 1, False), ("exchange", 1, False), ("exchange", 1, True),
        ("coded", 2, False), ("exchange", 2, False), ("exchange", 2, True), ("split", 1, False),
    ]
]  # fmt: skip


class ScriptedLink(InProcessTransport):
    """An in-process link that damages the payload of every frame worker 0 receives, from the
    master or from its peers, in its first ``damaged`` deliveries (a repair is a delivery)."""

    def __init__(self, damaged: int = 0) -> None:
        super().__init__(K)
        self.damaged, self.seen = damaged, 0

    def _damage(self, worker: int, frames: list[np.ndarray]) -> list[np.ndarray]:
        if worker != 0 or not frames:
            return frames
        self.seen += 1
        if self.seen > self.damaged:
            return frames
        out = []
        for f in frames:
            g, n = f.copy(), parse_frame(f).payload_bytes
            if n:
                g[g.size - n :] ^= 0x5A
            out.append(g)
        return out

    def receive(self, worker: int) -> list[np.ndarray]:
        return self._damage(worker, super().receive(worker))

    def collect(self, worker: int) -> list[np.ndarray]:
        return self._damage(worker, super().collect(worker))


def setup(mode: str, M: int, peers: bool):
    ds = load_dataset(np.random.default_rng(M).integers(0, 256, (N, B), dtype=np.uint8))
    scheme = scheme_for(mode, K=K, storage=M, peers=peers, network=EDGE if mode == "split" else None)
    work = scheme.dataset(ds)
    held = scheme.start(epoch_placement(N, K, seed=1, epoch=0))
    nxt = scheme.following(held, epoch_placement(N, K, seed=1, epoch=1))
    caches = [work.cache(scheme.held(held, k)) for k in range(K)]
    return ds, scheme, work, (held, nxt), caches


def check_rows(ds, scheme, nxt, caches):
    owners = scheme.owners(nxt)
    for k in range(K):
        batch = np.flatnonzero(owners == k)
        assert np.array_equal(scheme.records(caches[k], batch, B), ds.data[batch])


@pytest.mark.parametrize(("mode", "M", "peers"), SCHEMES)
def test_a_clean_transition_is_verified(mode, M, peers):
    ds, scheme, work, placements, caches = setup(mode, M, peers)
    rep, new = drive(ScriptedLink(), scheme, work, caches, placements, epoch=1, opts=MasterOptions())
    assert rep.verified and rep.repairs == 0 and rep.repair_rounds == 0 and rep.mode == scheme.name
    check_rows(ds, scheme, placements[1], new)


@pytest.mark.parametrize(("mode", "M", "peers"), SCHEMES)
def test_a_damaged_delivery_is_repaired_in_one_round(mode, M, peers):
    ds, scheme, work, placements, caches = setup(mode, M, peers)
    rep, new = drive(ScriptedLink(1), scheme, work, caches, placements, epoch=1, opts=MasterOptions())
    assert rep.verified and rep.repair_rounds == 1 and rep.repairs > 0
    check_rows(ds, scheme, placements[1], new)


@pytest.mark.parametrize(("mode", "M", "peers"), SCHEMES)
def test_a_delivery_damaged_in_every_round_is_abandoned_after_the_last(mode, M, peers):
    _, scheme, work, placements, caches = setup(mode, M, peers)
    link = ScriptedLink(10**6)
    opts = MasterOptions(max_repair_rounds=2)
    master = master_transition(link, scheme, work, *placements, epoch=1, opts=opts)
    workers = [
        worker_transition(link, scheme, k, caches[k], placements, epoch=1, checksums=work.checksums)
        for k in range(K)
    ]
    word = None
    with pytest.raises(IntegrityError, match=r"still unverified after 2 repair round\(s\)"):
        running, msg = step(master, None)
        while running:
            if isinstance(msg, Gather):
                running, msg = step(master, [step(w, word)[1].value for w in workers])
            else:
                word = msg.word
                running, msg = step(master, None)  # raises after its word ABANDON
    assert word == "abandon"
    for w in workers:  # every worker is told to abandon, and says why
        with pytest.raises(IntegrityError, match="unverified after the repairs|abandoned"):
            step(w, word)


@pytest.mark.parametrize(("mode", "M", "peers"), SCHEMES)
def test_a_worker_that_stops_ends_the_job(mode, M, peers):
    _, scheme, work, placements, caches = setup(mode, M, peers)
    link = ScriptedLink()
    master = master_transition(link, scheme, work, *placements, epoch=1, opts=MasterOptions())
    roles = [
        worker_stop() if k == 1 else
        worker_transition(link, scheme, k, caches[k], placements, epoch=1, checksums=work.checksums)
        for k in range(K)
    ]  # fmt: skip
    _, gather = step(master, None)
    assert isinstance(gather, Gather) and gather.stage == "ready"
    posts = [step(r, None)[1].value for r in roles]
    _, announce = step(master, posts)
    assert announce == Announce(END)
    running, value = step(master, None)
    assert not running and value == Stopped((1,))
    assert [step(r, END) for r in roles] == [(False, None)] * K


@pytest.mark.parametrize(("mode", "M", "peers"), SCHEMES)
def test_holdings_that_do_not_match_make_the_verdict_false(mode, M, peers):
    _, scheme, work, placements, caches = setup(mode, M, peers)
    link = ScriptedLink()
    master = master_transition(link, scheme, work, *placements, epoch=1, opts=MasterOptions())
    roles = [
        worker_transition(link, scheme, k, caches[k], placements, epoch=1, checksums=work.checksums)
        for k in range(K)
    ]
    word = None
    running, msg = step(master, None)
    while running:
        if isinstance(msg, Gather):
            posts = [step(r, word)[1].value for r in roles]
            if msg.stage == "holdings":  # worker 2 claims a checksum it does not hold
                h = posts[2]
                bad = h.checksums.copy()
                bad[0] ^= np.uint64(1)
                posts[2] = Holdings(h.ids, bad, h.lengths, h.digest)
            running, msg = step(master, posts)
        else:
            word = msg.word
            running, msg = step(master, None)
    assert msg.verified is False and word is False
    results = [step(r, word)[1] for r in roles]
    assert [r.verified for r in results] == [False] * K


def test_the_contract_covers_every_registered_scheme_where_it_runs():
    from coded_shuffle.engine.schemes import REGISTRY

    cases = {(p.values[0], p.values[2]) for p in SCHEMES}
    want = {(name, peers) for name, r in REGISTRY.items() for peers in (False, True)
            if (r.among_peers if peers else r.with_master)}  # fmt: skip
    assert cases == want
