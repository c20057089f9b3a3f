"""The session's view of the records among peers: the leader's master half, given only a
catalogue of the units (their number, width and checksums), reports and verifies as it does
given the records themselves."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from coded_shuffle.codec import Cache, load_dataset
from coded_shuffle.engine import drive, scheme_for
from coded_shuffle.engine.protocol import MasterOptions
from coded_shuffle.engine.session import Catalogue
from coded_shuffle.orders import epoch_placement
from coded_shuffle.transport import InProcessTransport


@pytest.mark.parametrize(("K", "M", "B"), [(3, 1, 40), (4, 2, 2048)])
def test_a_catalogue_of_the_units_reports_as_the_records_do(K, M, B):
    ds = load_dataset(np.random.default_rng(K).integers(0, 256, (8 * K, B), dtype=np.uint8))
    reports = []
    for catalogue in (False, True):
        scheme = scheme_for("exchange", K=K, storage=M, peers=True)
        work = scheme.dataset(ds)
        held = scheme.start(epoch_placement(ds.N, K, seed=3, epoch=0))
        nxt = scheme.following(held, epoch_placement(ds.N, K, seed=3, epoch=1))
        caches = [work.cache(scheme.held(held, k)) for k in range(K)]
        units = (
            Catalogue(N=work.N, record_bytes=work.record_bytes, checksums=work.checksums)
            if catalogue
            else work
        )
        opts = MasterOptions(records=(ds.N, B))
        rep, new = drive(InProcessTransport(K), scheme, units, caches, (held, nxt), epoch=1, opts=opts)
        for k, cache in enumerate(new):  # every worker holds its units byte for byte
            assert np.array_equal(cache.data, work.data[scheme.held(nxt, k)])
        reports.append(dataclasses.replace(rep, seconds=0.0, timings={}))
    assert reports[0].verified and reports[0] == reports[1]


def test_a_unit_the_catalogue_gives_another_checksum_is_never_accepted():
    K = 3
    ds = load_dataset(np.random.default_rng(0).integers(0, 256, (24, 16), dtype=np.uint8))
    scheme = scheme_for("exchange", K=K, peers=True)
    p0, p1 = (epoch_placement(ds.N, K, seed=1, epoch=e) for e in (0, 1))
    sums = ds.checksums.copy()
    sums[int(p1.batch(0)[0])] ^= 1  # the leader's table names another checksum for one record
    wrong = Catalogue(N=ds.N, record_bytes=16, checksums=sums)
    caches = [ds.cache(p0.batch(k)) for k in range(K)]
    rep, _ = drive(InProcessTransport(K), scheme, ds, caches, (p0, p1), epoch=1, opts=MasterOptions())
    assert rep.verified
    with pytest.raises(Exception, match="unverified"):
        drive(InProcessTransport(K), scheme, wrong, caches, (p0, p1), epoch=1, opts=MasterOptions())


@pytest.mark.parametrize("mode", ["coded", "uncoded", "exchange"])
def test_packed_caches_of_records_of_many_sizes_under_every_scheme(mode):
    # Workers start from packed caches; the coded schemes decode them packed, writing the
    # records of epoch 2 over the spare packed buffers of epoch 0 when they hold their bytes;
    # the others write rows. Every worker holds its records byte for byte each epoch.
    K, rng = 3, np.random.default_rng(9)
    ds = load_dataset([rng.bytes(int(n)) for n in rng.integers(0, 90, 60)])
    scheme = scheme_for(mode, K=K)
    p = [epoch_placement(ds.N, K, seed=2, epoch=e) for e in range(3)]
    caches = [ds.cache(p[0].batch(k), packed=True) for k in range(K)]
    big = [Cache.packed(c.ids, np.zeros(int(ds.lengths.sum()), np.uint8), c.lengths, c.width) for c in caches]
    spares = [None, big]
    for t in (1, 2):
        rep, new = drive(InProcessTransport(K), scheme, ds, caches, (p[t - 1], p[t]), epoch=t,
                         opts=MasterOptions(), spare=spares[t - 1])  # fmt: skip
        assert rep.verified
        for k, cache in enumerate(new):
            assert cache.is_packed == scheme.packs
            assert [cache.record(n) for n in p[t].batch(k)] == [ds.record(n) for n in p[t].batch(k)]
            if t == 2 and scheme.packs:
                assert cache.buffer is big[k].buffer  # the spare written over
        caches = new


def test_a_worker_reads_its_records_of_many_sizes_packed_a_few_rows_at_a_time(monkeypatch):
    # units_of packs a worker's records as it reads them: never more than GATHER_ROWS rows of
    # the widest width at once beside the packed bytes.
    from coded_shuffle.codec import records
    from coded_shuffle.engine.state import units_of
    from coded_shuffle.records import SpanRecords

    rng = np.random.default_rng(4)
    blobs = [rng.bytes(int(n)) for n in rng.integers(0, 50, 40)]
    sizes = [len(b) for b in blobs]
    flat = np.frombuffer(b"".join(blobs), np.uint8)
    source = SpanRecords([flat], starts=np.cumsum([0, *sizes[:-1]]), sizes=sizes)
    asked = []
    gather = source.gather
    monkeypatch.setattr(source, "gather", lambda ids: asked.append(len(ids)) or gather(ids), raising=False)
    monkeypatch.setattr(records, "GATHER_ROWS", 7)
    scheme = scheme_for("coded", K=2)
    cache = units_of(scheme, source, scheme.start(epoch_placement(40, 2, seed=1, epoch=0)), 1, source.width)
    assert cache.is_packed and max(asked) == 7 and sum(asked) == len(cache)
    assert [cache.record(n) for n in cache.ids] == [blobs[n] for n in cache.ids]
