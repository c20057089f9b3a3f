"""Which link binds each mode's predicted time (coded_shuffle.network.TransitionTimes.binding_links).

The oracle is the arithmetic of the module docstring done by hand for three workers each sending
the other two 30 records of 1000 B: ``d = o = 60 000 B`` a worker, ``W = 180 000 B``, and the
coded broadcast's 90 order-2 symbols (given, not planned here).
"""

from __future__ import annotations

import pytest

from coded_shuffle.engine.report import time_lines
from coded_shuffle.network import Network, binding, transition_times

S = [[0, 30, 30], [30, 0, 30], [30, 30, 0]]
B, D, ONLY, W, C = 1000, 60_000, 60_000, 180_000, 90_000


def _bps(mbit: float) -> float:
    return mbit * 1e6 / 8


def _times(spec: str):
    return transition_times(S, record_bytes=B, network=Network.parse(spec), coded_symbols=90,
                            lower_bound_symbols=90)  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "links"),
    [
        # uplinks as fast as the downlinks: the exchange is bound by both; the master by itself
        (
            "master=100,up=1000,down=1000",
            {"exchange": "downlink=uplink", "coded": "master", "uncoded": "master"},
        ),
        # slow worker uplinks, no multicast: the coded symbols' chain of relays binds
        ("master=1000,up=10,down=1000", {"exchange": "uplink", "coded": "relays", "uncoded": "master"}),
        # a slow downlink binds every mode
        ("master=1000,up=1000,down=10", {"exchange": "downlink", "coded": "downlink", "uncoded": "downlink"}),
    ],
)
def test_the_binding_link_is_the_term_of_the_max(spec, links):
    n = Network.parse(spec)
    m, u, d = _bps(n.master), _bps(n.up), _bps(n.down)
    by_hand = {  # each link's seconds, by the module docstring
        "exchange": {"downlink": D / d, "uplink": ONLY / u},
        "coded": {"master": C / m, "downlink": C / d, "relays": C / u},
        "uncoded": {"master": W / m, "downlink": D / d},
    }
    t = _times(spec)
    for mode, want in links.items():
        terms = by_hand[mode]
        top = max(terms.values())
        assert t.predicted_seconds[mode] == pytest.approx(top, rel=1e-12)
        assert set(want.split("=")) == {k for k, v in terms.items() if v == pytest.approx(top, rel=1e-12)}
        assert t.binding_links[mode] == want
    assert t.binding_links["split"] is None  # no multicast: no split
    assert t.to_dict()["binding_links"] == t.binding_links


def test_a_split_is_bound_where_its_lines_cross():
    t = _times("master=1000,up=200,down=1000,multicast")
    assert t.choice == "split" and t.split_coded_share is not None
    a = t.split_coded_share
    lines = {  # split_time's lines at the share chosen (multicast: no relays)
        "master": a * C / _bps(1000),
        "downlink": (a * C + (1 - a) * D) / _bps(1000),
        "uplink": (1 - a) * ONLY / _bps(200),
    }
    top = max(lines.values())
    assert t.predicted_seconds["split"] == pytest.approx(top, rel=1e-9)
    named = set(t.binding_links["split"].split("="))
    assert named == {k for k, v in lines.items() if v == pytest.approx(top, rel=1e-9)} and len(named) >= 2
    assert t.binding_links["coded"] == "master=downlink" and t.binding_links["exchange"] == "uplink"


def test_binding_names_ties_in_order():
    assert binding({"master": 2.0, "downlink": 1.0}) == "master"
    assert binding({"downlink": 1.0, "uplink": 1.0, "master": 0.5}) == "downlink=uplink"


def test_one_verdict_a_measured_transition():
    t = _times("master=1000,up=1000,down=1000").to_dict()
    rows = [
        {**t, "network": "n", "record_bytes": B, "epoch": 1, "mode": mode, "seconds": s, "time_gap": s - 1}
        for mode, s in (("coded", 0.5), ("uncoded", 0.25), ("exchange", 2.0))
    ]
    head, verdict, detail = time_lines(rows)
    assert verdict.startswith("  epoch 1: measured fastest uncoded 0.25 s (then coded 0.5, exchange 2); ")
    assert "predicted fastest exchange" in verdict and verdict.count("epoch") == 1 and "differs" in verdict
    assert "exchange 0.00048 (downlink=uplink)" in detail and "uncoded 0.00144 (master)" in detail
    assert "measured / predicted: coded 694x, uncoded 174x, exchange 4,167x" in detail
