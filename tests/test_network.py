"""The public boundary of ``coded_shuffle.network``: every bad input is one ``TypeError`` or
``ValueError`` naming its argument, and a ``K_t x K_{t+1}`` matrix is timed as the square one of
its workers (a worker that joins holds nothing, one that leaves needs nothing)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from coded_shuffle.network import (
    Network,
    explain,
    predict,
    scoped_symbols,
    split_share,
    split_time,
    transition_times,
)

S3 = [[0, 30, 30], [30, 0, 30], [30, 30, 0]]
SWITCH = Network.parse("master=1000,up=100,down=1000")
EDGE = Network.parse("master=1000,up=100,down=1000,multicast")
TIMES = {"record_bytes": 1000, "network": SWITCH, "coded_symbols": 90, "lower_bound_symbols": 60}
RATES = {"master": 1.0, "up": 1.0, "down": 1.0, "multicast": True}


def _times(**changed):
    return transition_times(changed.pop("S", S3), **{**TIMES, **changed})


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        # Network(...): every rate a positive finite number of Mbit/s, the flags bools
        (
            lambda: Network(down=0),
            ValueError,
            r"Argument 'down' must be a positive finite number of Mbit/s, not 0\.",
        ),
        (
            lambda: Network(down=-1),
            ValueError,
            r"'down' must be a positive finite number of Mbit/s, not -1\.",
        ),
        (
            lambda: Network(down=math.nan),
            ValueError,
            r"'down' must be a positive finite number of Mbit/s, not nan\.",
        ),
        (
            lambda: Network(down=math.inf),
            ValueError,
            r"'down' must be a positive finite number of Mbit/s, not inf\.",
        ),
        (lambda: Network(down=10**400), ValueError, r"'down' must be a positive finite number"),
        (lambda: Network(down="x"), TypeError, r"Argument 'down' must be a number of Mbit/s, not str\."),
        (lambda: Network(down=None), TypeError, r"'down' must be a number of Mbit/s, not NoneType\."),
        (lambda: Network(down=True), TypeError, r"'down' must be a number of Mbit/s, not bool\."),
        (lambda: Network(down=1, master=0), ValueError, r"'master' must be a positive finite number"),
        (
            lambda: Network(down=1, up=-5.0),
            ValueError,
            r"'up' must be a positive finite number of Mbit/s, not -5\.0",
        ),
        (lambda: Network(down=1, up="100"), TypeError, r"'up' must be a number of Mbit/s, not str\."),
        (lambda: Network(down=1, multicast=True), ValueError, r"'master' must be a rate with multicast=True"),
        (
            lambda: Network(down=1, master=1, multicast="yes"),
            TypeError,
            r"'multicast' must be a bool, not str\.",
        ),
        (
            lambda: Network(down=1, master=1, snooping=True),
            ValueError,
            r"'snooping' must be False without multicast",
        ),
        (
            lambda: Network(down=1, master=1, multicast=True, snooping=1),
            TypeError,
            r"'snooping' must be a bool",
        ),
        (lambda: Network.parse(None), TypeError, r"Argument 'spec' must be a str, not NoneType\."),
        (lambda: Network.parse(" "), ValueError, r"--network: an empty SPEC; say at least down=R"),
        # transition_times: S, record_bytes, network, the symbol counts
        (lambda: _times(S=[[0, -1], [1, 0]]), ValueError, r"Argument 'S' must have non-negative entries"),
        (lambda: _times(S=[[0.5, 1], [1, 0]]), ValueError, r"Argument 'S' must hold integers"),
        (lambda: _times(S=[0, 1]), ValueError, r"Argument 'S' must have 2 dimension"),
        (lambda: _times(S=np.zeros((0, 0), int)), ValueError, r"Argument 'S' must have at least 1 worker"),
        (lambda: _times(S="S"), ValueError, r"Argument 'S' must hold integers"),
        (
            lambda: _times(record_bytes=-5),
            ValueError,
            r"Argument 'record_bytes' must be at least 1, not -5\.",
        ),
        (lambda: _times(record_bytes=0), ValueError, r"Argument 'record_bytes' must be at least 1, not 0\."),
        (
            lambda: _times(record_bytes=1000.0),
            TypeError,
            r"Argument 'record_bytes' must be an int, not float\.",
        ),
        (lambda: _times(network=None), TypeError, r"Argument 'network' must be a Network, not NoneType\."),
        (lambda: _times(network="down=1"), TypeError, r"Argument 'network' must be a Network, not str\."),
        (
            lambda: _times(coded_symbols=-1),
            ValueError,
            r"'coded_symbols' must be a non-negative finite number, not -1\.",
        ),
        (
            lambda: _times(coded_symbols=math.nan),
            ValueError,
            r"'coded_symbols' must be a non-negative finite number",
        ),
        (lambda: _times(coded_symbols=None), TypeError, r"'coded_symbols' must be a number, not NoneType\."),
        (
            lambda: _times(lower_bound_symbols=-3),
            ValueError,
            r"'lower_bound_symbols' must be a non-negative finite",
        ),
        (
            lambda: _times(lower_bound_symbols=math.inf),
            ValueError,
            r"'lower_bound_symbols' must be a non-negative",
        ),
        (
            lambda: _times(lower_bound_symbols="60"),
            TypeError,
            r"'lower_bound_symbols' must be a number, not str\.",
        ),
        # predict: its own arguments, before the plan is made
        (
            lambda: predict(S3, record_bytes=1000, network=None),
            TypeError,
            r"'network' must be a Network, not NoneType",
        ),
        (
            lambda: predict(S3, record_bytes=-5, network=SWITCH),
            ValueError,
            r"'record_bytes' must be at least 1",
        ),
        (
            lambda: predict([[0, -1], [1, 0]], record_bytes=1, network=SWITCH),
            ValueError,
            r"Argument 'S' must have non",
        ),
        (
            lambda: predict(S3, record_bytes=1, network=SWITCH, strategy="best"),
            ValueError,
            r"Argument 'strategy' must",
        ),
        # split_share, scoped_symbols, explain, split_time
        (
            lambda: split_share(S3, network=None),
            TypeError,
            r"Argument 'network' must be a Network, not NoneType\.",
        ),
        (
            lambda: split_share(S3, network=SWITCH),
            ValueError,
            r"Argument 'network' must be a Network that multicasts",
        ),
        (
            lambda: split_share([[0, -1], [1, 0]], network=EDGE),
            ValueError,
            r"Argument 'S' must have non-negative",
        ),
        (
            lambda: scoped_symbols([[0, -1], [1, 0]], 1),
            ValueError,
            r"Argument 'S' must have non-negative entries",
        ),
        (
            lambda: scoped_symbols(S3, -1),
            ValueError,
            r"Argument 'coded_symbols' must be a non-negative finite",
        ),
        (
            lambda: scoped_symbols(S3, math.nan),
            ValueError,
            r"Argument 'coded_symbols' must be a non-negative finite",
        ),
        (
            lambda: explain(None, "coded"),
            TypeError,
            r"Argument 'predicted' must be a mapping of modes to seconds",
        ),
        (
            lambda: explain({"coded": 1.0}, "split"),
            ValueError,
            r"Argument 'choice' must be a mode of 'predicted' \(coded\)",
        ),
        (
            lambda: explain({"coded": None}, "coded"),
            ValueError,
            r"'predicted' must give 'choice' \(coded\) a finite time",
        ),
        (
            lambda: explain({"coded": math.inf}, "coded"),
            ValueError,
            r"'predicted' must give 'choice' \(coded\) a finite",
        ),
        (
            lambda: split_time(-1.0, 0.0, 0.0, **RATES),
            ValueError,
            r"Argument 'coded' must be a non-negative finite",
        ),
        (
            lambda: split_time(1.0, math.nan, 0.0, **RATES),
            ValueError,
            r"Argument 'missing' must be a non-negative",
        ),
        (
            lambda: split_time(1.0, 0.0, "1", **RATES),
            TypeError,
            r"Argument 'only' must be a number, not str\.",
        ),
        (
            lambda: split_time(1.0, 0.0, 0.0, **{**RATES, "master": -1}),
            ValueError,
            r"Argument 'master' must be a non",
        ),
        (
            lambda: split_time(1.0, 0.0, 0.0, **{**RATES, "up": math.inf}),
            ValueError,
            r"Argument 'up' must be a non",
        ),
        (
            lambda: split_time(1.0, 0.0, 0.0, **{**RATES, "down": 0}),
            ValueError,
            r"Argument 'down' must be a positive",
        ),
        (
            lambda: split_time(1.0, 0.0, 0.0, **{**RATES, "multicast": 1}),
            TypeError,
            r"'multicast' must be a bool",
        ),
        (
            lambda: split_time(1.0, 0.0, 0.0, **RATES, heard=-1),
            ValueError,
            r"Argument 'heard' must be a non-negative",
        ),
    ],
)
def test_network_exceptions(call, error, match):
    with pytest.raises(error, match=match) as exc:
        call()
    assert "\n" not in str(exc.value)


def test_the_edges_of_good_input_are_taken():
    # rates as ints become the floats parse gives; Fractions and numpy numbers are numbers too
    assert Network(down=1000, master=np.int64(1000), up=Fraction(100), multicast=True) == EDGE
    assert isinstance(Network(down=1000).down, float) and str(Network(down=1000)) == "down=1000"
    t = _times(record_bytes=1, coded_symbols=Fraction(181, 2), lower_bound_symbols=0)
    assert t.bound_seconds > 0 and t.choice in t.predicted_seconds
    assert _times(S=np.zeros((3, 3), int), coded_symbols=0).predicted_seconds["exchange"] == 0.0
    assert split_time(0, 0, 0, master=0, up=0, down=1, multicast=False) == (0.0, 0.0)


def _padded(S: list[list[int]]) -> list[list[int]]:
    """``S`` squared with zero rows and columns, written out here: a worker that joins holds
    nothing, one that leaves needs nothing."""
    K = max(len(S), len(S[0]))
    return [[S[i][j] if i < len(S) and j < len(S[0]) else 0 for j in range(K)] for i in range(K)]


@pytest.mark.parametrize("S", [[[2, 0, 1], [0, 2, 1]], [[2, 1], [1, 2], [1, 1]]])
@pytest.mark.parametrize(
    "network", [SWITCH, EDGE, Network.parse("master=1000,up=100,down=300,multicast,snooping")]
)
def test_a_matrix_of_a_changing_number_of_workers_is_timed_as_its_square_one(S, network):
    """``rates`` and ``lower_bound`` take ``K_t x K_{t+1}`` matrices; the times do the same."""
    assert predict(S, record_bytes=1024, network=network) == predict(
        _padded(S), record_bytes=1024, network=network
    )
    assert scoped_symbols(S, 3) == scoped_symbols(_padded(S), 3)
    if network.multicast:
        assert split_share(S, network=network) == split_share(_padded(S), network=network)
    # by hand: two workers become three (the first S), the new one missing a record from each:
    # its downlink carries 2 records, each old worker's uplink 1 (the exchange's time)
    if len(S) == 2 and network is SWITCH:
        t = transition_times(S, record_bytes=125_000, network=network, coded_symbols=2, lower_bound_symbols=2)
        assert t.predicted_seconds["exchange"] == max(2 * 125_000 / 125e6, 125_000 / 12.5e6)
