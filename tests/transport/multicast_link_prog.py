"""The MPI link's multicast deliveries with datagrams dropped: ``mpiexec -n K+1 python -m mpi4py
multicast_link_prog.py GROUP:PORT DROP SCOPE``, in a network namespace whose loopback carries
239.0.0.0/8 (``tests/transport/test_multicast.py``).

The master sends three deliveries of the frames of coded plans; every worker drops the share
``DROP`` of the datagrams it receives. Every worker must receive every byte it reads, and what
the master sent again must be exactly the bytes of the datagrams the workers dropped (each
worker's own, over MPI): a datagram lost costs its own bytes, not its frame. Rank 0 prints
``ok RESENT DROPPED``; then every rank runs the link contract's
:func:`~tests.transport.link_exchange_prog.control` over the multicast link and exits 0, or one
raises.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from coded_shuffle.codec import frame_scopes
from coded_shuffle.transport import MPITransport, MulticastLink
from coded_shuffle.transport.multicast import parse_group

# Run as a script, its own folder is on the path and the repository's root is not: the contract's
# body is imported as a module of the tests' package, as the in-process tests import it.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.transport.link_exchange_prog import control  # noqa: E402


def frames(delivery: int, K: int) -> list[np.ndarray]:
    """The frames of delivery ``delivery``: a coded plan of ``K`` workers, encoded (the scoped
    groups read their spans)."""
    from coded_shuffle.codec import encode_plan, load_dataset
    from coded_shuffle.orders import epoch_placement
    from coded_shuffle.plan import plan_delivery

    N, B = 300, 200
    ds = load_dataset(np.random.default_rng(delivery).integers(0, 256, (N, B), dtype=np.uint8))
    p_t, p_t1 = (epoch_placement(N, K, seed=3, epoch=delivery + e) for e in (0, 1))
    return encode_plan(plan_delivery(p_t, p_t1), ds, epoch=delivery + 1, max_frame_bytes=30 * B)


def main() -> None:
    group, port = parse_group(sys.argv[1])
    drop, scope = float(sys.argv[2]), sys.argv[3]
    mpi = MPITransport()
    link = MulticastLink(mpi, group, port, datagram_bytes=1000, drop=drop, scope=scope)
    for d in range(3):
        if link.is_master:
            link.send(frames(d, link.K))
        else:
            got = link.receive(link.worker)
            for a, b in zip(got, frames(d, link.K), strict=True):
                assert a.size == b.size
                bounds, masks = frame_scopes(b)  # scoped: the spans this worker reads
                for lo, hi, m in zip(bounds[:-1].tolist(), bounds[1:].tolist(), masks.tolist(), strict=True):
                    if link.multicast_groups == 1 or m == -1 or m >> link.worker & 1:
                        assert np.array_equal(a[lo:hi], b[lo:hi]), (d, lo, hi)
    mine = (link.dropped_bytes, link.resent_bytes)
    every = mpi.comm.gather(mine, root=0)
    if link.is_master:
        dropped = sum(e[0] for e in every)
        resent = link.stats.resent
        assert resent == sum(e[1] for e in every) == dropped, (resent, every)
        assert (dropped > 0) == (drop > 0), dropped
        print(f"ok {resent} {dropped}", flush=True)
    control(link)  # the link contract's control plane and deliveries (repairs on the reliable path)


if __name__ == "__main__":
    main()
