"""One body of the link contract for the workers' exchange, run over every link.

``prog.py mpi|mpi-rounds|torch``: under ``mpiexec -n K+1`` (:class:`~coded_shuffle.transport.MPITransport`;
``mpi-rounds`` cuts every exchange into rounds of 64 bytes a rank, the path of exchanges past
``2^31`` bytes)
or ``torchrun --nproc-per-node K+1`` (:class:`~coded_shuffle.transport.TorchTransport`), every
worker offers its peers the frames of :func:`offered` (at once, then in the rounds of
:func:`schedule`), collects, and checks what came with
:func:`check`; it prints ``ok WORKER`` and exits 0, or raises. ``tests/transport/test_transport.py`` runs the
same functions over the in-process link.
"""

from __future__ import annotations

import sys

import numpy as np


def offered(sender: int, K: int, rnd: int) -> dict[int, list[np.ndarray]]:
    """What ``sender`` offers in round ``rnd``: to worker ``j``, ``(sender + j + rnd) % 3`` frames
    of bytes that name the sender, the receiver and the frame (none at all to some)."""
    out: dict[int, list[np.ndarray]] = {}
    for j in range(K):
        n = (sender + j + rnd) % 3
        if j != sender and n:
            out[j] = [np.full(1 + 97 * q + sender, 16 * sender + j + q, dtype=np.uint8) for q in range(n)]
    return out


def schedule(worker: int, K: int, rnd: int) -> list[tuple[int, int, int]] | None:
    """``worker``'s rounds of round ``rnd``'s offers (none in round 0): the matchings of
    :func:`~coded_shuffle.plan.exchange_rounds` of the frames each sender offers each receiver,
    as ``(to, frames, frm)`` a round."""
    if rnd == 0:
        return None
    from coded_shuffle.plan import exchange_rounds

    D = np.array([[len(offered(i, K, rnd).get(j, [])) for j in range(K)] for i in range(K)], dtype=np.int64)
    out = []
    for r in exchange_rounds(D, merge_below=0):
        to, n = r.get(worker, (-1, 0))
        frm = next((i for i, (j, _) in r.items() if j == worker), -1)
        out.append((to, n, frm))
    return out


def check(got: list[np.ndarray], worker: int, K: int, rnd: int) -> None:
    """``got`` is every frame offered to ``worker``, in sender order, each sender's in order."""
    want = [f for s in range(K) if s != worker for f in offered(s, K, rnd).get(worker, [])]
    assert len(got) == len(want), (worker, len(got), len(want))
    for a, b in zip(got, want, strict=True):
        assert np.array_equal(np.asarray(a), b), (worker, a[:4], b[:4])


def sent(worker: int, K: int, rnds: int) -> int:
    """The bytes ``worker`` sends in ``rnds`` rounds."""
    return sum(f.size for r in range(rnds) for fs in offered(worker, K, r).values() for f in fs)


def main(argv: list[str]) -> int:
    kind = argv[0]
    if kind in ("mpi", "mpi-rounds"):
        from coded_shuffle.transport import MPITransport

        link = MPITransport()
        if kind == "mpi-rounds":  # every exchange in rounds of a few bytes a pair, as past 2^31
            link.max_call_bytes = 64
    else:
        import torch.distributed as dist

        from coded_shuffle.transport.torch_dist import TorchTransport

        dist.init_process_group("gloo")
        link = TorchTransport(timeout=60)
    if link.is_master:
        return 0
    k = link.worker
    for rnd in range(3):  # a link is used again and again; one round's offer never leaks into the next
        # all at once, then in rounds of matchings, then rounds offered to a link that sends at once
        link.exchange_schedule = "alltoall" if rnd == 2 else "rounds"
        link.offer(k, offered(k, link.K, rnd), rounds=schedule(k, link.K, rnd))
        check(link.collect(k), k, link.K, rnd)
    assert link.exchanged_bytes == sent(k, link.K, 3), (link.exchanged_bytes, sent(k, link.K, 3))
    print(f"ok {k}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
