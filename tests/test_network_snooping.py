"""A network whose switch forwards a multicast group only to its members (``snooping`` in a SPEC):
the coded multicast's downlink then carries a worker's scoped groups alone
(``coded_shuffle.network.scoped_symbols``), checked against the frames of real plans."""

from __future__ import annotations

import numpy as np
import pytest

from coded_shuffle.codec import encode_plan, load_dataset, parse_frame
from coded_shuffle.matrix import shuffle_matrix
from coded_shuffle.network import Network, scoped_symbols, transition_times
from coded_shuffle.orders import epoch_placement
from coded_shuffle.plan import plan_delivery


def test_snooping_parses_and_says_what_it_needs():
    n = Network.parse("master=1000,up=100,down=300,multicast,snooping")
    assert (n.multicast, n.snooping, str(n)) == (True, True, "master=1000,up=100,down=300,multicast,snooping")
    assert Network.parse(str(n)) == n and not Network.parse("master=1,down=1,multicast").snooping
    for spec, words in [
        ("master=1,down=1,snooping", "snooping needs multicast"),
        ("master=1,down=1,multicast,multicast", "multicast given twice"),
        ("master=1,down=1,snoop", "(master=R, up=R, down=R, multicast, snooping, racks=NxH"),
    ]:
        with pytest.raises(ValueError) as exc:
            Network.parse(spec)
        assert words in str(exc.value) and "\n" not in str(exc.value)


def _scoped_by_frames(plan, K: int) -> tuple[int, int]:
    """The most symbols one worker reads when each goes to its readers' group (a pair's, a
    worker's, or every worker's), and the points sent alone, from the frames' receiver index."""
    ds = load_dataset(np.zeros((plan.N, 1), np.uint8))
    heard, lone = np.zeros(K, np.int64), 0
    for raw in encode_plan(plan, ds, epoch=1, max_frame_bytes=997):
        f = parse_frame(raw)
        for s in range(f.n_symbols):
            who = {w for w, first, count in f.runs.tolist() if first <= s < first + count}
            lone += len(who) == 1
            for k in who if len(who) <= 2 else range(K):
                heard[k] += 1
    return int(heard.max()), lone


@pytest.mark.parametrize(("K", "seed"), [(2, 0), (3, 1), (4, 2), (5, 3), (7, 4)])
def test_scoped_symbols_is_the_busiest_workers_groups_and_an_upper_bound_by_lone_points(K, seed):
    N = 90 * K
    p0, p1 = (epoch_placement(N, K, seed=seed, epoch=e) for e in (0, 1))
    plan = plan_delivery(p0, p1)
    S = shuffle_matrix(p0, p1)
    busiest, lone = _scoped_by_frames(plan, K)
    got = scoped_symbols(S, plan.n_symbols)
    assert busiest <= got <= busiest + lone
    if lone == 0:
        assert got == busiest


def test_predicted_coded_multicast_on_a_snooping_switch_by_hand():
    K, N, B = 8, 8000, 1024
    p0, p1 = (epoch_placement(N, K, seed=0, epoch=e) for e in (0, 1))
    S = np.asarray(shuffle_matrix(p0, p1))
    coded = plan_delivery(p0, p1).n_symbols
    plain, snooped = (Network.parse(f"master=1000,up=100,down=300,multicast{x}") for x in ("", ",snooping"))
    t0, t1 = (transition_times(S, record_bytes=B, network=n, coded_symbols=coded, lower_bound_symbols=0)
              for n in (plain, snooped))  # fmt: skip
    off = S - np.diag(np.diag(S))
    pairs = np.minimum(off, off.T)
    heard = pairs.sum(axis=0).max() + coded - pairs.sum() // 2  # its pairs' symbols, and every other
    master, down = 1000e6 / 8, 300e6 / 8
    assert t0.predicted_seconds["coded"] == pytest.approx(max(coded * B / master, coded * B / down))
    assert t1.predicted_seconds["coded"] == pytest.approx(max(coded * B / master, heard * B / down))
    assert t1.predicted_seconds["coded"] < 0.5 * t0.predicted_seconds["coded"]
    # the uncoded unicast and the exchange do not multicast: snooping changes neither
    for m in ("uncoded", "exchange"):
        assert t0.predicted_seconds[m] == t1.predicted_seconds[m]
