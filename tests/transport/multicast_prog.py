"""The multicast data path in a network namespace of its own: ``unshare -n python multicast_prog.py``.

Run by ``tests/transport/test_multicast.py`` (root). It turns on the namespace's loopback with
multicast and a route for 239.0.0.0/8 (nothing outside the namespace changes), then checks that
two receivers get every frame of a delivery byte for byte, that a receiver dropping datagrams
returns an empty buffer for each frame it could not complete, that what it says it lacks is the
bytes of the datagrams it dropped (and those put back make the frames whole), and that without a
route the sender and the receivers refuse in one line. Prints ``ok`` and exits 0.
"""

from __future__ import annotations

import subprocess

import numpy as np

from coded_shuffle.errors import TransportError
from coded_shuffle.transport import TokenBucket
from coded_shuffle.transport.multicast import (
    DATAGRAM_HEADER_BYTES,
    MulticastReceiver,
    MulticastSender,
    missing_spans,
)


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True)


def main() -> None:
    ip("link", "set", "lo", "up")
    for kind in (MulticastSender, MulticastReceiver):  # no route for the group yet
        try:
            obj = kind("239.77.0.1", 6001)
            if isinstance(obj, MulticastSender):
                obj.send([np.zeros(8, dtype=np.uint8)], 1)
            raise AssertionError(f"{kind.__name__} worked without a route")
        except TransportError as exc:
            assert "no route" in str(exc) and "\n" not in str(exc), exc
    ip("link", "set", "lo", "multicast", "on")
    ip("route", "add", "239.0.0.0/8", "dev", "lo")
    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 256, n, dtype=np.uint8) for n in (70_000, 0, 1, 1452, 1453, 400_000)]
    sizes = [f.size for f in frames]
    rx = [MulticastReceiver("239.77.0.1", 6002, idle=0.5) for _ in range(2)]
    tx = MulticastSender("239.77.0.1", 6002, pace=TokenBucket.from_mbps(200))
    tx.send(frames, 7)
    step = 1472 - DATAGRAM_HEADER_BYTES
    assert tx.datagrams == sum(max(1, -(-n // step)) for n in sizes), tx.datagrams
    for r in rx:
        got = r.collect(7, sizes)
        assert all(np.array_equal(a, b) for a, b in zip(got, frames, strict=True))
    # a receiver that drops datagrams: the frames it misses are empty buffers
    lossy = MulticastReceiver("239.77.0.1", 6003, idle=0.3, drop=0.2, seed=1)
    tx = MulticastSender("239.77.0.1", 6003, datagram_bytes=600)
    tx.send(frames, 8)
    got = lossy.collect(8, sizes)
    assert lossy.dropped > 0, lossy.dropped
    for g, f in zip(got, frames, strict=True):
        assert g.size == 0 or np.array_equal(g, f)
    assert got[5].size == 0  # 400 KB in about 690 datagrams: one of them dropped at least
    # what it lacks is the bytes of the datagrams it dropped, no more: those put back, every frame is whole
    before = lossy.dropped_bytes
    plan = tx.schedule(frames)
    tx.send(frames, 9, plan)
    bufs, lacking = lossy.gather(9, sizes)
    rows = missing_spans(plan, 0, lacking)
    dropped = lossy.dropped_bytes - before
    assert dropped > 0 and int((rows[:, 2] - rows[:, 1]).sum()) == dropped, (rows, dropped)
    assert sorted(lacking) == sorted(set(rows[:, 0].tolist()))
    for q, lo, hi in rows.tolist():
        bufs[q][lo:hi] = frames[q][lo:hi]
    assert all(np.array_equal(a, b) for a, b in zip(bufs, frames, strict=True))
    for r in (*rx, lossy):
        r.close()
    scoped()
    print("ok")


def scoped() -> None:
    """Scoped groups of K = 3 workers on one loopback: each receiver gets the datagrams of its
    groups alone, every byte of its spans as sent, and the groups leave interleaved."""
    from coded_shuffle.codec import encode_plan, frame_scopes, load_dataset
    from coded_shuffle.orders import epoch_placement
    from coded_shuffle.plan import plan_delivery

    K, N, B = 3, 600, 64
    ds = load_dataset(np.random.default_rng(1).integers(0, 256, (N, B), dtype=np.uint8))
    plan = plan_delivery(epoch_placement(N, K, seed=2, epoch=0), epoch_placement(N, K, seed=2, epoch=1))
    frames = encode_plan(plan, ds, epoch=1, max_frame_bytes=40 * B)
    # worker 1 drops a tenth of its datagrams: it lacks their bytes, of its own groups alone
    rx = [MulticastReceiver("239.77.0.20", 6004, idle=0.5, worker=k, K=K, drop=0.1 * (k == 1), seed=k)
          for k in range(K)]  # fmt: skip
    tx = MulticastSender("239.77.0.20", 6004, pace=TokenBucket.from_mbps(200), K=K)
    sched = tx.schedule(frames)
    tx.send(frames, 9, sched)
    sizes = [f.size for f in frames]
    members = {0: set(range(K)), 1: {0, 1}, 2: {0, 2}, 3: {1, 2}, 4: {0}, 5: {1}, 6: {2}}
    for k, r in enumerate(rx):
        got, lacking = r.gather(9, sizes, sched.expected[:, k].tolist())
        rows = missing_spans(sched, k, lacking, K=K)
        assert int((rows[:, 2] - rows[:, 1]).sum()) == r.dropped_bytes and (r.dropped > 0) == (k == 1)
        for q, lo, hi in rows.tolist():
            got[q][lo:hi] = frames[q][lo:hi]
        assert r.datagrams == sum(k in members[g] for g in sched.group.tolist()), (k, r.datagrams)
        for q, (g, f) in enumerate(zip(got, frames, strict=True)):
            assert g.size == f.size, (k, q)
            bounds, masks = frame_scopes(f)
            mine = [(lo, hi) for lo, hi, m in zip(bounds[:-1], bounds[1:], masks, strict=True)
                    if m == -1 or m >> k & 1]  # fmt: skip
            assert sum(hi - lo for lo, hi in mine) == sched.expected[q, k]
            assert all(np.array_equal(g[lo:hi], f[lo:hi]) for lo, hi in mine)
        assert sched.expected[:, k].sum() < sum(sizes)  # it was spared the other pair's symbols
    # interleaved: every group that has datagrams starts within its first share of the delivery
    order = sched.group.tolist()
    for g in set(order):
        n = order.count(g)
        assert order.index(g) <= len(order) / n + 1, (g, order.index(g), n)
    for r in rx:
        r.close()


if __name__ == "__main__":
    main()
