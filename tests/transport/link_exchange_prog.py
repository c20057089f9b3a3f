"""One body of the link contract, run over every link of
:data:`~coded_shuffle.transport.LINKS`: the workers' exchange, then (between processes) the
control plane and the master's deliveries (:func:`control`).

``prog.py KIND[-rounds]``, under the kind's launcher with ``K + 1`` ranks (``mpiexec -n K+1``
for ``mpi``, ``torchrun --nproc-per-node K+1`` for ``torch``; ``-rounds`` cuts every MPI
exchange into rounds of 64 bytes a rank, the path of exchanges past ``2^31`` bytes): over a
link with a master and then a link of peers, every rank runs :func:`control`, and every worker
offers its peers the frames of :func:`offered` (at once, then in the rounds of
:func:`schedule`), collects, and checks what came with :func:`check`; each worker of the first
link prints ``ok WORKER`` and all exit 0, or one raises. ``tests/transport/test_transport.py``
runs the exchange over the in-process link, and ``tests/transport/multicast_link_prog.py`` runs
:func:`control` over a multicast link.
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


def check_each(got: list[np.ndarray], worker: int, K: int, rnd: int) -> None:
    """``got`` is every frame offered to ``worker`` in the rounds of :func:`schedule`, round by
    round (the order a link in rounds gives them as they come)."""
    from coded_shuffle.plan import exchange_rounds

    D = np.array([[len(offered(i, K, rnd).get(j, [])) for j in range(K)] for i in range(K)], dtype=np.int64)
    left = {s: list(offered(s, K, rnd).get(worker, [])) for s in range(K)}
    want = []
    for r in exchange_rounds(D, merge_below=0):
        for s, (j, n) in r.items():
            if j == worker:
                want += left[s][:n]
                del left[s][:n]
    assert len(got) == len(want), (worker, len(got), len(want))
    for a, b in zip(got, want, strict=True):
        assert np.array_equal(np.asarray(a), b), (worker, a[:4], b[:4])


def sent(worker: int, K: int, rnds: int) -> int:
    """The bytes ``worker`` sends in ``rnds`` rounds."""
    return sum(f.size for r in range(rnds) for fs in offered(worker, K, r).values() for f in fs)


def rows_of(worker: int) -> np.ndarray:
    """The first batch the master sends ``worker``: 3 rows of 5 bytes that name it."""
    return np.arange(15, dtype=np.uint8).reshape(3, 5) + 16 * worker


def delivery(n: int, rnd: int) -> list[np.ndarray]:
    """The frames of broadcast ``rnd``: ``n`` buffers of bytes that name the round and the frame."""
    return [np.full(7 + 300 * q, 8 * rnd + q, dtype=np.uint8) for q in range(n)]


def control(link) -> None:
    """Every rank of a link between processes: what the leader shares (a value, an array), two
    control rounds (each worker's post, the leader's word), the workers' allgather; with a
    master, each worker's first rows, a broadcast, a unicast and a broadcast of repairs, received
    whole and counted once on the master."""
    K, lead, me = link.K, link.is_leader, link.worker
    assert link.share({"K": K, "rounds": 2} if lead else None) == {"K": K, "rounds": 2}
    arr = np.arange(3 * K, dtype=np.int64).reshape(3, K) if lead else np.zeros((3, K), np.int64)
    assert np.array_equal(link.share_array(arr), np.arange(3 * K).reshape(3, K))
    for rnd in range(2):
        if lead:
            posts = link.gather_posts(timeout=60, stage="contract")
            assert posts == [None if k == me else (k, rnd) for k in range(K)], posts
            link.announce(("word", rnd))
        else:
            assert link.post((me, rnd), timeout=60, stage="contract") == ("word", rnd)
    if me is not None:
        assert link.allgather(10 * me) == [10 * k for k in range(K)]
    if link.peers:
        link.sync()
        return
    sent = [delivery(2, 0), {k: delivery(1 + k % 2, 1 + k) for k in range(K)}, delivery(1, 9)]
    if link.is_master:
        for k in range(K):
            link.send_rows(k, rows_of(k))
        before = link.stats
        link.send(sent[0])
        link.send_to(sent[1])
        link.send(sent[2], repair=True)
        every = [*sent[0], *(f for fs in sent[1].values() for f in fs), *sent[2]]
        took = link.stats - before
        # bytes of datagrams lost and sent again (a multicast link) are counted beside the frames'
        assert (took.frames, took.bytes - took.resent) == (len(every), sum(f.size for f in every)), took
    else:
        out = np.empty((3, 5), np.uint8)
        assert np.array_equal(link.receive_rows(out), rows_of(me))
        for want in (sent[0], sent[1][me], sent[2]):
            got = link.receive(me)
            assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
    link.sync()


def exchange(link) -> None:
    """A worker of ``link``: four rounds of offers, each collected and checked."""
    from coded_shuffle.transport import TokenBucket

    k = link.worker
    for rnd in range(4):  # a link is used again and again; one round's offer never leaks into the next
        # all at once, then in rounds of matchings, then rounds offered to a link that sends at once,
        # then in rounds again, each round's frames given as they come
        link.exchange_schedule = "alltoall" if rnd == 2 else "rounds"
        # rounds 1 and 2 paced (a bucket on the worker's uplink): the sends point to point, in pieces
        link.exchange_pace = TokenBucket(1e9) if rnd in (1, 2) else None
        link.offer(k, offered(k, link.K, rnd), rounds=schedule(k, link.K, rnd))
        if rnd == 3:
            got = list(link.collect_each(k))
            check_each(got, k, link.K, rnd)
        else:
            check(link.collect(k), k, link.K, rnd)
    # the same offer in rounds again: received into the pages of the last exchange in rounds, which
    # the link keeps (none touched for the first time inside a delivery)
    link.offer(k, offered(k, link.K, 3), rounds=schedule(k, link.K, 3))
    again = list(link.collect_each(k))
    check_each(again, k, link.K, 3)
    if link.reuse_buffers and again:
        assert any(np.shares_memory(a, b) for a in again for b in got), k
    # and all at once, into the same pages
    link.exchange_schedule = "alltoall"
    link.offer(k, offered(k, link.K, 3))
    once = link.collect(k)
    check(once, k, link.K, 3)
    if link.reuse_buffers and once:
        assert any(np.shares_memory(a, b) for a in once for b in again), k
    want = sent(k, link.K, 4) + 2 * sum(f.size for fs in offered(k, link.K, 3).values() for f in fs)
    assert link.exchanged_bytes == want, (link.exchanged_bytes, want)


def main(argv: list[str]) -> int:
    """``KIND[-rounds]``: the link of :data:`~coded_shuffle.transport.LINKS` named ``KIND``, with a
    master, then one of peers over the same ranks."""
    from coded_shuffle.transport import LINKS

    name, _, rounds = argv[0].partition("-")
    if name == "torch":
        import torch.distributed as dist

        dist.init_process_group("gloo")
    first = None
    for peers in (False, True):
        link = LINKS[name].make(peers=peers, join_timeout=60)
        if rounds:  # every exchange in rounds of a few bytes a pair, as past 2^31
            link.max_call_bytes = 64
        control(link)
        if not link.is_master:
            exchange(link)
        first = link.worker if first is None and not peers else first
    if first is not None:
        print(f"ok {first}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
